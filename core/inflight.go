package outbox

import (
	"sync"
	"time"
)

// inFlightTracker keeps one event from being processed twice at once in a
// process. A Dispatcher holds an event from the moment it is queued until
// its outcome is stored.
type inFlightTracker interface {
	// TryAcquire returns false if id is already held.
	TryAcquire(id string) bool
	// Release forgets id.
	Release(id string)
}

// newInFlightTracker returns the default tracker. With ttl > 0 an entry older
// than ttl can be acquired again, which recovers from a stuck holder.
func newInFlightTracker(ttl time.Duration, clock Clock) inFlightTracker {
	return &inFlight{ttl: ttl, clock: clockOr(clock), m: make(map[string]time.Time)}
}

type inFlight struct {
	mu    sync.Mutex
	ttl   time.Duration
	clock Clock
	m     map[string]time.Time
}

func (t *inFlight) TryAcquire(id string) bool {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if at, held := t.m[id]; held && (t.ttl <= 0 || now.Sub(at) < t.ttl) {
		return false
	}
	t.m[id] = now
	return true
}

func (t *inFlight) Release(id string) {
	t.mu.Lock()
	delete(t.m, id)
	t.mu.Unlock()
}
