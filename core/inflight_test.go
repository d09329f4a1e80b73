package outbox

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// stepClock is a manual Clock for tests.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func newStepClock() *stepClock {
	return &stepClock{now: time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestInFlightAcquireRelease(t *testing.T) {
	tr := newInFlightTracker(0, nil)
	if !tr.TryAcquire("a") {
		t.Fatal("first acquire failed")
	}
	if tr.TryAcquire("a") {
		t.Fatal("second acquire of a held id succeeded")
	}
	if !tr.TryAcquire("b") {
		t.Fatal("acquire of another id failed")
	}
	tr.Release("a")
	if !tr.TryAcquire("a") {
		t.Fatal("acquire after release failed")
	}
	tr.Release("never-held") // harmless
}

func TestInFlightTTL(t *testing.T) {
	clk := newStepClock()
	tr := newInFlightTracker(time.Minute, ClockFunc(clk.Now))
	if !tr.TryAcquire("a") {
		t.Fatal("first acquire failed")
	}
	clk.Advance(59 * time.Second)
	if tr.TryAcquire("a") {
		t.Fatal("acquired before the TTL expired")
	}
	clk.Advance(time.Second)
	if !tr.TryAcquire("a") {
		t.Fatal("not acquirable once the TTL expired")
	}
	// The re-acquire restarted the TTL.
	clk.Advance(30 * time.Second)
	if tr.TryAcquire("a") {
		t.Fatal("acquired again right after a re-acquire")
	}
	// Without a TTL an entry never expires.
	forever := newInFlightTracker(0, ClockFunc(clk.Now))
	forever.TryAcquire("x")
	clk.Advance(1000 * time.Hour)
	if forever.TryAcquire("x") {
		t.Fatal("entry expired with ttl 0")
	}
}

func TestInFlightConcurrentExclusive(t *testing.T) {
	tr := newInFlightTracker(time.Hour, nil)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if tr.TryAcquire("same") {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Errorf("%d goroutines acquired the same id, want 1", wins.Load())
	}
}
