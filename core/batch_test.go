package outbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// batchRecorder is a BatchListener that records its calls: each
// HandleBatch as its event ids, each Handle as a batch of one, marked
// "single". result decides each event's outcome (nil: delivered); short
// cuts the last result off every batch.
type batchRecorder struct {
	mu     sync.Mutex
	calls  []string
	result func(ctx context.Context, e Envelope) error
	short  bool
	block  chan struct{} // closed when a HandleBatch starts, if set
}

func (r *batchRecorder) record(call string) {
	r.mu.Lock()
	r.calls = append(r.calls, call)
	r.mu.Unlock()
}

func (r *batchRecorder) log() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func (r *batchRecorder) outcome(ctx context.Context, e Envelope) error {
	if r.result == nil {
		return nil
	}
	return r.result(ctx, e)
}

func (r *batchRecorder) Handle(ctx context.Context, e Envelope) error {
	r.record("single " + e.Type())
	return r.outcome(ctx, e)
}

func (r *batchRecorder) HandleBatch(ctx context.Context, events []Envelope) []error {
	types := make([]string, len(events))
	for i, e := range events {
		types[i] = e.Type()
	}
	r.record("batch " + strings.Join(types, ","))
	if r.block != nil {
		close(r.block)
		<-ctx.Done()
	}
	errs := make([]error, len(events))
	for i, e := range events {
		errs[i] = r.outcome(ctx, e)
	}
	if r.short {
		errs = errs[:len(errs)-1]
	}
	return errs
}

// blockWorker starts h, whose one worker it keeps busy with an event of
// type Block until unblock is called: the events committed meanwhile wait
// in the queue together, to be taken at once.
func blockWorker(t *testing.T, h *harness) (unblock func()) {
	t.Helper()
	started, release := make(chan struct{}), make(chan struct{})
	if err := h.reg.Handle(EventName("Block"), func(context.Context, Envelope) error {
		close(started)
		<-release
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h.start(t)
	h.commit(t, evt("Block"))
	<-started
	return func() { close(release) }
}

func oneWorker(c *Config) { c.Workers = 1 }

func TestBatchMixedRoutes(t *testing.T) {
	h := newHarness(t, oneWorker)
	rec := &batchRecorder{}
	if err := h.reg.HandleAll(rec); err != nil {
		t.Fatal(err)
	}
	_ = h.reg.Handle(EventName("X"), func(_ context.Context, e Envelope) error { rec.record("handle " + e.Type()); return nil })
	unblock := blockWorker(t, h)
	ids := h.commit(t, evt("B1"), evt("B2"), evt("X"), evt("B3"), evt("B4"), evt("X"))
	unblock()
	for _, id := range ids {
		h.waitStatus(t, id, StatusDone)
	}
	// The event routed elsewhere ends the batch and goes out right after
	// it; none is dropped or handed over twice.
	want := []string{"batch B1,B2", "handle X", "batch B3,B4", "handle X"}
	if got := rec.log(); !slices.Equal(got, want) {
		t.Errorf("calls = %q, want %q", got, want)
	}
	if n := h.metrics.get("DispatchSuccess"); n != 7 {
		t.Errorf("DispatchSuccess = %d, want 7 (one per event)", n)
	}
}

func TestBatchSize(t *testing.T) {
	tests := []struct {
		name string
		size int
		want []string
	}{
		{"bound", 3, []string{"batch A,B,C", "batch D,E,F", "single G"}},
		{"one is per event", 1, []string{"single A", "single B", "single C", "single D", "single E", "single F", "single G"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.Workers = 1; c.ListenerBatchSize = tc.size })
			rec := &batchRecorder{}
			_ = h.reg.HandleAll(rec)
			unblock := blockWorker(t, h)
			ids := h.commit(t, evt("A"), evt("B"), evt("C"), evt("D"), evt("E"), evt("F"), evt("G"))
			unblock()
			for _, id := range ids {
				h.waitStatus(t, id, StatusDone)
			}
			if got := rec.log(); !slices.Equal(got, tc.want) {
				t.Errorf("calls = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestBatchOutcomes(t *testing.T) {
	h := newHarness(t, oneWorker)
	rec := &batchRecorder{result: func(ctx context.Context, e Envelope) error {
		switch e.Type() {
		case "Fail":
			return errors.New("refused by the broker")
		case "Later":
			return RetryAfter(10*time.Second, "busy")
		}
		return nil
	}}
	_ = h.reg.HandleAll(rec)
	unblock := blockWorker(t, h)
	ids := h.commit(t, evt("Ok"), evt("Fail"), evt("Later"), evt("Ok"))
	unblock()
	ok := h.waitStatus(t, ids[0], StatusDone)
	h.waitStatus(t, ids[3], StatusDone)
	failed := h.waitStatus(t, ids[1], StatusRetry)
	later := h.waitStatus(t, ids[2], StatusRetry)
	if ok.Attempts != 0 {
		t.Errorf("delivered event: %d attempts", ok.Attempts)
	}
	if failed.Attempts != 1 || !strings.Contains(failed.LastError, "refused by the broker") || failed.AvailableAt.Sub(h.clk.Now()) != time.Minute {
		t.Errorf("failed event = attempts %d, error %q, due in %v; want 1, the listener's error, the retry policy's minute",
			failed.Attempts, failed.LastError, failed.AvailableAt.Sub(h.clk.Now()))
	}
	if later.Attempts != 0 || later.AvailableAt.Sub(h.clk.Now()) != 10*time.Second {
		t.Errorf("RetryAfter event = attempts %d, due in %v; want 0 and 10s", later.Attempts, later.AvailableAt.Sub(h.clk.Now()))
	}
	if got := rec.log(); !slices.Equal(got, []string{"batch Ok,Fail,Later,Ok"}) {
		t.Errorf("calls = %q", got)
	}
	if s, f := h.metrics.get("DispatchSuccess"), h.metrics.get("DispatchFailure"); s != 3 || f != 1 {
		t.Errorf("DispatchSuccess = %d, DispatchFailure = %d; want 3 (the blocker too) and 1", s, f)
	}
}

func TestBatchLastAttemptGoesDead(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Workers = 1; c.MaxAttempts = 1 })
	rec := &batchRecorder{result: func(ctx context.Context, e Envelope) error {
		if e.Type() == "Fail" {
			return errors.New("still refused")
		}
		return nil
	}}
	_ = h.reg.HandleAll(rec)
	unblock := blockWorker(t, h)
	ids := h.commit(t, evt("Ok"), evt("Fail"))
	unblock()
	h.waitStatus(t, ids[0], StatusDone)
	if r := h.waitStatus(t, ids[1], StatusDead); r.Attempts != 1 {
		t.Errorf("dead event: %d attempts, want 1", r.Attempts)
	}
	if n := h.metrics.get("DispatchDead"); n != 1 {
		t.Errorf("DispatchDead = %d, want 1", n)
	}
}

func TestBatchShortResults(t *testing.T) {
	h := newHarness(t, oneWorker)
	rec := &batchRecorder{short: true}
	_ = h.reg.HandleAll(rec)
	unblock := blockWorker(t, h)
	ids := h.commit(t, evt("A"), evt("B"), evt("C"))
	unblock()
	h.waitStatus(t, ids[0], StatusDone)
	h.waitStatus(t, ids[1], StatusDone)
	r := h.waitStatus(t, ids[2], StatusRetry)
	if r.Attempts != 1 || !strings.Contains(r.LastError, ErrNoResult.Error()) {
		t.Errorf("event without a result = attempts %d, error %q; want a failed attempt with ErrNoResult", r.Attempts, r.LastError)
	}
}

func TestBatchPanicFailsEveryEvent(t *testing.T) {
	h := newHarness(t, oneWorker)
	rec := &batchRecorder{result: func(context.Context, Envelope) error { panic("broker client bug") }}
	_ = h.reg.HandleAll(rec)
	unblock := blockWorker(t, h)
	ids := h.commit(t, evt("A"), evt("B"), evt("C"))
	unblock()
	for _, id := range ids {
		if r := h.waitStatus(t, id, StatusRetry); r.Attempts != 1 || !strings.Contains(r.LastError, "panic: broker client bug") {
			t.Errorf("event %s = attempts %d, error %q; want a failed attempt with the panic", id, r.Attempts, r.LastError)
		}
	}
	if got := rec.log(); !slices.Equal(got, []string{"batch A,B,C"}) {
		t.Errorf("calls = %q", got)
	}
}

// Interceptors run per event, with or without an Around hook (with one,
// each event's chain runs in a goroutine of its own).
func TestBatchInterceptorsPerEvent(t *testing.T) {
	tests := []struct {
		name    string
		around  bool
		handed  string   // the batch handed over
		skipped bool     // the Skip event is left out by its Around
		want    []string // interceptor calls, sorted
	}{
		{"around", true, "batch A,B", true, []string{
			"after A err=false", "after B err=false", "after Block err=false", "after Deny err=true", "after Skip err=true",
			"around A attempt 1", "around B attempt 1", "around Block attempt 1", "around Skip attempt 1",
			"before A", "before B", "before Block", "before Skip",
		}},
		{"without around", false, "batch A,Skip,B", false, []string{
			"after A err=false", "after B err=false", "after Block err=false", "after Deny err=true", "after Skip err=false",
			"before A", "before B", "before Block", "before Skip",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var trace []string
			add := func(format string, args ...any) {
				mu.Lock()
				trace = append(trace, fmt.Sprintf(format, args...))
				mu.Unlock()
			}
			ic := Interceptor{
				Before: func(ctx context.Context, e Envelope) error {
					if e.Type() == "Deny" {
						return errors.New("denied")
					}
					add("before %s", e.Type())
					return nil
				},
				After: func(ctx context.Context, e Envelope, err error) { add("after %s err=%v", e.Type(), err != nil) },
			}
			if tc.around {
				ic.Around = func(ctx context.Context, e Envelope, next func(context.Context) error) error {
					add("around %s attempt %d", e.Type(), DeliveryAttempt(ctx))
					if e.Type() == "Skip" {
						return errors.New("skipped by the interceptor")
					}
					return next(ctx)
				}
			}
			h := newHarness(t, func(c *Config) { c.Workers = 1; c.Interceptors = []Interceptor{ic} })
			rec := &batchRecorder{}
			_ = h.reg.HandleAll(rec)
			unblock := blockWorker(t, h)
			ids := h.commit(t, evt("A"), evt("Skip"), evt("Deny"), evt("B"))
			unblock()
			h.waitStatus(t, ids[0], StatusDone)
			h.waitStatus(t, ids[3], StatusDone)
			if !tc.skipped {
				h.waitStatus(t, ids[1], StatusDone)
			} else if r := h.waitStatus(t, ids[1], StatusRetry); !strings.Contains(r.LastError, "skipped by the interceptor") {
				t.Errorf("skipped event: error %q", r.LastError)
			}
			if r := h.waitStatus(t, ids[2], StatusRetry); !strings.Contains(r.LastError, "denied") {
				t.Errorf("denied event: error %q", r.LastError)
			}
			// Only the events that passed their interceptors were handed over.
			if got := rec.log(); !slices.Equal(got, []string{tc.handed}) {
				t.Errorf("calls = %q, want %q", got, tc.handed)
			}
			mu.Lock()
			got := slices.Clone(trace)
			mu.Unlock()
			slices.Sort(got) // concurrent with an Around: in any order across events
			if !slices.Equal(got, tc.want) {
				t.Errorf("interceptor calls:\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// releaseLog is a memStore that counts the releases of each id.
type releaseLog struct {
	*memStore
	mu       sync.Mutex
	released map[string]int
}

func (s *releaseLog) Release(ctx context.Context, owner string, ids []string) (int64, error) {
	s.mu.Lock()
	for _, id := range ids {
		s.released[id]++
	}
	s.mu.Unlock()
	return s.memStore.Release(ctx, owner, ids)
}

func TestBatchCloseReleasesOnce(t *testing.T) {
	var rl *releaseLog
	h := newHarness(t, func(c *Config) {
		c.Workers, c.DrainTimeout = 1, 20*time.Millisecond
		rl = &releaseLog{memStore: c.Store.(*memStore), released: map[string]int{}}
		c.Store = rl
	})
	started := make(chan struct{})
	rec := &batchRecorder{block: started, result: func(ctx context.Context, _ Envelope) error { return ctx.Err() }}
	_ = h.reg.HandleAll(rec)
	unblock := blockWorker(t, h)
	ids := h.commit(t, evt("A"), evt("B"), evt("C"))
	unblock()
	<-started
	h.closeReleases(t, ids)
	for _, id := range ids {
		rl.mu.Lock()
		n := rl.released[id]
		rl.mu.Unlock()
		if n != 1 {
			t.Errorf("%s released %d times, want 1", id, n)
		}
	}
	if h.d.claims.held.len() != 0 {
		t.Errorf("%d events still held after Close", h.d.claims.held.len())
	}
}

func TestSameListener(t *testing.T) {
	a, b := &batchRecorder{}, &batchRecorder{}
	if !sameListener(a, a) || sameListener(b, a) || sameListener(nil, a) {
		t.Error("pointer listeners compared wrong")
	}
	if sameListener(ListenerFunc(func(context.Context, Envelope) error { return nil }), a) {
		t.Error("a ListenerFunc is the batch listener")
	}
	// A listener type that cannot be compared is never the same (and
	// comparing it does not panic).
	u := uncomparable{f: []int{1}}
	if sameListener(u, u) {
		t.Error("an uncomparable listener is the same as itself")
	}
}

type uncomparable struct{ f []int }

func (uncomparable) Handle(context.Context, Envelope) error          { return nil }
func (uncomparable) HandleBatch(context.Context, []Envelope) []error { return nil }
