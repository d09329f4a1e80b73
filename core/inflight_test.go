package outbox

import (
	"sync"
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

func TestHoldsAcquireRelease(t *testing.T) {
	h := newHolds()
	t0 := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	a, ok := h.acquire("a", "", t0, t0, nil)
	if !ok {
		t.Fatal("first acquire failed")
	}
	if _, ok := h.acquire("a", "", t0, t0.Add(time.Hour), nil); ok {
		t.Fatal("second acquire of a queued id succeeded")
	}
	if _, ok := h.acquire("b", "", t0, t0, nil); !ok {
		t.Fatal("acquire of another id failed")
	}
	h.release(a)
	a2, ok := h.acquire("a", "", t0, t0, nil)
	if !ok {
		t.Fatal("acquire after release failed")
	}
	h.release(a) // an old hold does not release the new one
	if _, ok := h.acquire("a", "", t0, t0, nil); ok {
		t.Fatal("a stale release dropped the current hold")
	}
	h.release(a2)
	if h.len() != 1 {
		t.Fatalf("len = %d, want 1 (b)", h.len())
	}
}

// TestHoldsDeadline: a delivery past its deadline is no longer renewed,
// and its event can be held again (a claim gave it out once more).
func TestHoldsDeadline(t *testing.T) {
	h := newHolds()
	t0 := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	a, _ := h.acquire("a", "", t0, t0, nil)
	b, _ := h.acquire("b", "", t0, t0, nil)
	h.start(a, t0.Add(time.Minute))
	if got := h.renewable(t0.Add(59 * time.Second)); len(got) != 2 {
		t.Fatalf("renewable before the deadline: %d holds, want 2", len(got))
	}
	if _, ok := h.acquire("a", "", t0, t0.Add(59*time.Second), nil); ok {
		t.Fatal("acquired before the deadline")
	}
	got := h.renewable(t0.Add(time.Minute))
	if len(got) != 1 || got[0] != b {
		t.Fatalf("renewable at the deadline: %v, want only b", got)
	}
	h.renewedAt(got, t0.Add(time.Minute))
	if r := h.lastRenewed(b); !r.Equal(t0.Add(time.Minute)) {
		t.Errorf("b renewed at %v", r)
	}
	if r := h.lastRenewed(a); !r.Equal(t0) {
		t.Errorf("a renewed at %v, want its claim time", r)
	}
	if _, ok := h.acquire("a", "", t0.Add(2*time.Minute), t0.Add(2*time.Minute), nil); !ok {
		t.Fatal("not acquired past the deadline")
	}
}
