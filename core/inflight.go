package outbox

import (
	"sync"
	"time"
)

// holds are the events a dispatcher is responsible for, from the moment
// one is queued until its outcome is stored. A hold keeps an event from
// being delivered twice at once in the process, and the heartbeat renews
// the claims of the held events whose delivery has not outlived its
// ListenerTimeout.
type holds struct {
	mu sync.Mutex
	m  map[string]*hold
}

// hold is one held event. Its times are guarded by holds.mu.
type hold struct {
	id string
	// renewed is when the event's claim was last made or renewed.
	renewed time.Time
	// deadline is zero until the listener starts, then start +
	// ListenerTimeout: past it the claim is no longer renewed, so that a
	// listener that hangs loses its event to a take-over.
	deadline time.Time
	// ordered: the event is ordered; its DONE wakes the poller (set
	// before the hold is queued, read after).
	ordered bool
}

func newHolds() *holds { return &holds{m: make(map[string]*hold)} }

// acquire holds id, claimed at claimed. It fails while id is held, unless
// the holding delivery is past its deadline: its claim is no longer
// renewed, and a claim that returns the event again is a take-over.
func (h *holds) acquire(id string, claimed, now time.Time) (*hold, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if old, held := h.m[id]; held && (old.deadline.IsZero() || now.Before(old.deadline)) {
		return nil, false
	}
	nh := &hold{id: id, renewed: claimed}
	h.m[id] = nh
	return nh, true
}

// release forgets hd (unless its id has been acquired again since).
func (h *holds) release(hd *hold) {
	h.mu.Lock()
	if h.m[hd.id] == hd {
		delete(h.m, hd.id)
	}
	h.mu.Unlock()
}

// start records that hd's listener starts; its claim is renewed until
// deadline.
func (h *holds) start(hd *hold, deadline time.Time) {
	h.mu.Lock()
	hd.deadline = deadline
	h.mu.Unlock()
}

// lastRenewed returns when hd's claim was last made or renewed.
func (h *holds) lastRenewed(hd *hold) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return hd.renewed
}

// renewable returns the holds whose claims the heartbeat renews at now:
// queued, or delivering within their deadline.
func (h *holds) renewable(now time.Time) []*hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*hold, 0, len(h.m))
	for _, hd := range h.m {
		if hd.deadline.IsZero() || now.Before(hd.deadline) {
			out = append(out, hd)
		}
	}
	return out
}

// renewedAt records a successful renewal of hs at t.
func (h *holds) renewedAt(hs []*hold, t time.Time) {
	h.mu.Lock()
	for _, hd := range hs {
		hd.renewed = t
	}
	h.mu.Unlock()
}

// len returns how many events are held.
func (h *holds) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.m)
}
