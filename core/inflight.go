package outbox

import (
	"sync"
	"sync/atomic"
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
	// ended, if set, is told the type of each counted hold that ends
	// (see gate.held); it runs under mu.
	ended func(typ string)
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
	// before the hold is queued, read after), unless midRun: the next
	// event of its key is this process's already (see claims.settleStep).
	ordered, midRun bool
	// mates, if not nil, counts this hold among the events of its claim
	// that a suspect waits for (see claimMates): it ends with the hold.
	mates *claimMates
	// typ is the event type of a hold the gate counts (see gate.held).
	typ string
	// done is set once the event's DONE is stored, its claim still this
	// owner's (see claims.settleStep).
	done atomic.Bool
}

// claimMates are the events of one claim that its suspects (events in
// flight when their owner stopped, see ErrInFlight) wait for: a suspect
// starts once they have ended — their outcomes stored, their holds let go
// — so that, if it kills the process again, it takes none of them along.
type claimMates struct {
	n    atomic.Int64
	done chan struct{} // closed once n is 0
}

// newClaimMates returns mates holding one reference of their own, which
// seal drops once every mate has joined.
func newClaimMates() *claimMates {
	m := &claimMates{done: make(chan struct{})}
	m.n.Store(1)
	return m
}

func (m *claimMates) join() { m.n.Add(1) }

// end ends one mate (or the claim's own reference: seal).
func (m *claimMates) end() {
	if m.n.Add(-1) == 0 {
		close(m.done)
	}
}

// seal says that every mate has joined.
func (m *claimMates) seal() { m.end() }

func newHolds() *holds { return &holds{m: make(map[string]*hold)} }

// acquire holds id, claimed at claimed, as one of mates (nil: none, see
// claimMates); typ, if not "", is the type of a hold the gate counts
// (see gate.held), told to ended when the hold ends. It fails while id is held, unless
// the holding delivery is past its deadline: its claim is no longer
// renewed, and a claim that returns the event again is a take-over.
func (h *holds) acquire(id, typ string, claimed, now time.Time, mates *claimMates) (*hold, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old, held := h.m[id]
	if held && (old.deadline.IsZero() || now.Before(old.deadline)) {
		return nil, false
	}
	if held {
		old.endMate() // replaced: it ends here
		h.end(old)
	}
	nh := &hold{id: id, typ: typ, renewed: claimed, mates: mates}
	if mates != nil {
		mates.join()
	}
	h.m[id] = nh
	return nh, true
}

// release forgets hd (unless its id has been acquired again since) and
// reports whether it was still held.
func (h *holds) release(hd *hold) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m[hd.id] != hd {
		return false
	}
	delete(h.m, hd.id)
	hd.endMate()
	h.end(hd)
	return true
}

// end tells ended of hd, if it is counted; h.mu is held.
func (h *holds) end(hd *hold) {
	if hd.typ != "" && h.ended != nil {
		h.ended(hd.typ)
		hd.typ = ""
	}
}

// endMate ends hd among its claim's mates, if it is one; holds.mu is held.
func (hd *hold) endMate() {
	if hd.mates != nil {
		hd.mates.end()
		hd.mates = nil
	}
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

// holdIDs returns the event ids of hs.
func holdIDs(hs []*hold) []string {
	ids := make([]string, len(hs))
	for i, hd := range hs {
		ids[i] = hd.id
	}
	return ids
}

// queued returns those of hs whose listeners have not started.
func (h *holds) queued(hs []*hold) []*hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*hold
	for _, hd := range hs {
		if hd.deadline.IsZero() {
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
