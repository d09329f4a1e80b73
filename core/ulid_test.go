package outbox

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func checkULIDShape(t *testing.T, id string) {
	t.Helper()
	if len(id) != 26 {
		t.Fatalf("ULID %q has %d characters, want 26", id, len(id))
	}
	for _, c := range id {
		if !strings.ContainsRune(crockford, c) {
			t.Fatalf("ULID %q has %q outside the Crockford alphabet", id, c)
		}
	}
	if id[0] > '7' {
		t.Fatalf("ULID %q overflows 128 bits", id)
	}
}

func TestULIDShape(t *testing.T) {
	for range 1000 {
		checkULIDShape(t, NewULID())
	}
	for _, c := range "ILOU" {
		if strings.ContainsRune(crockford, c) {
			t.Errorf("alphabet contains %q", c)
		}
	}
}

func fixedClock(t time.Time) Clock { return ClockFunc(func() time.Time { return t }) }

func TestULIDMonotonicWithinOneMillisecond(t *testing.T) {
	at := time.Date(2024, 5, 6, 7, 8, 9, 123_000_000, time.UTC)
	g := newULIDGenerator(fixedClock(at))
	prev := g.New()
	checkULIDShape(t, prev)
	for i := 1; i < 100_000; i++ {
		id := g.New()
		if id <= prev {
			t.Fatalf("id %d: %q is not after %q", i, id, prev)
		}
		prev = id
	}
	if ts, ok := ULIDTime(prev); !ok || !ts.Equal(at) {
		t.Errorf("ULIDTime(last) = %v, %v; want %v", ts, ok, at)
	}
}

func TestULIDMonotonicWhenClockGoesBackwards(t *testing.T) {
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := base
	g := newULIDGenerator(ClockFunc(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
	set := func(t time.Time) { mu.Lock(); now = t; mu.Unlock() }

	a := g.New()
	set(base.Add(-time.Hour))
	b := g.New()
	c := g.New()
	set(base.Add(time.Millisecond))
	d := g.New()
	if !(a < b && b < c && c < d) {
		t.Fatalf("not strictly increasing: %s %s %s %s", a, b, c, d)
	}
	if ts, _ := ULIDTime(b); !ts.Equal(base) {
		t.Errorf("after a backward step the id keeps the last time %v, got %v", base, ts)
	}
	if ts, _ := ULIDTime(d); !ts.Equal(base.Add(time.Millisecond)) {
		t.Errorf("after the clock catches up the id carries %v, got %v", base.Add(time.Millisecond), ts)
	}
}

func TestULIDRandomOverflowMovesToNextMillisecond(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000).UTC()
	g := newULIDGenerator(fixedClock(at))
	first := g.New()
	g.mu.Lock()
	g.hi, g.lo = 0xffff, ^uint64(0) // the next increment overflows 80 bits
	g.mu.Unlock()
	next := g.New()
	if next <= first {
		t.Fatalf("%q not after %q", next, first)
	}
	if ts, _ := ULIDTime(next); !ts.Equal(at.Add(time.Millisecond)) {
		t.Errorf("overflowed id carries %v, want %v", ts, at.Add(time.Millisecond))
	}
	if after := g.New(); after <= next {
		t.Errorf("%q not after %q", after, next)
	}
}

func TestULIDConcurrentUnique(t *testing.T) {
	g := newULIDGenerator(nil)
	const goroutines, each = 16, 5000
	results := make([][]string, goroutines)
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]string, each)
			for j := range ids {
				ids[j] = g.New()
				if j > 0 && ids[j] <= ids[j-1] {
					t.Errorf("goroutine %d: %q not after %q", i, ids[j], ids[j-1])
					return
				}
			}
			results[i] = ids
		}()
	}
	wg.Wait()
	all := slices.Concat(results...)
	if len(all) != goroutines*each {
		t.Fatalf("collected %d ids, want %d", len(all), goroutines*each)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("duplicate id %q", all[i])
		}
	}
}

func TestULIDTimeRoundTrip(t *testing.T) {
	for _, at := range []time.Time{
		time.UnixMilli(0).UTC(),
		time.Date(2024, 2, 29, 23, 59, 59, 999_000_000, time.UTC),
		time.UnixMilli(1<<48 - 1).UTC(), // the largest ULID time
	} {
		id := newULIDGenerator(fixedClock(at)).New()
		checkULIDShape(t, id)
		got, ok := ULIDTime(id)
		if !ok || !got.Equal(at) || got.Location() != time.UTC {
			t.Errorf("ULIDTime(%s) = %v, %v; want %v", id, got, ok, at)
		}
	}
	// A non-UTC clock gives the same instant back, in UTC.
	jst := time.Date(2024, 1, 1, 9, 0, 0, 0, time.FixedZone("JST", 9*3600))
	got, ok := ULIDTime(newULIDGenerator(fixedClock(jst)).New())
	if !ok || !got.Equal(jst) {
		t.Errorf("ULIDTime = %v, %v; want %v", got, ok, jst)
	}
	if got, want := encodeULID(0, 0, 0), strings.Repeat("0", 26); got != want {
		t.Errorf("encodeULID(0) = %s", got)
	}
	if got, want := encodeULID(1<<48-1, 0xffff, ^uint64(0)), "7"+strings.Repeat("Z", 25); got != want {
		t.Errorf("encodeULID(max) = %s, want %s", got, want)
	}
}

func TestULIDTimeRejectsMalformed(t *testing.T) {
	valid := NewULID()
	for _, id := range []string{
		"",
		valid[:25],
		valid + "0",
		"8" + valid[1:],               // first digit over 7 overflows 128 bits
		valid[:5] + "U" + valid[6:],   // U is not in the alphabet
		valid[:20] + "I" + valid[21:], // nor is I, in the random part
		strings.ToLower(valid),
		valid[:12] + "-" + valid[13:],
	} {
		if _, ok := ULIDTime(id); ok {
			t.Errorf("ULIDTime(%q) accepted a malformed id", id)
		}
	}
}
