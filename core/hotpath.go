package outbox

import (
	"context"
)

// claimOwner returns the owner id the Writer inserts new rows claimed by, or
// "" while the dispatcher is not running: the rows are then left unclaimed
// for any poller.
func (d *Dispatcher) claimOwner() string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if !d.started || d.closed {
		return ""
	}
	return d.owner
}

// afterCommit hands events the Writer inserted claimed by this dispatcher
// to the hot queue; delayed events were not claimed and are left to the
// poller. An event the full queue refuses stays claimed by this owner and
// the poller is told to take it back soon; an event refused because the
// dispatcher has closed in the meantime is released, so that any poller
// takes it at once instead of after the lease.
func (d *Dispatcher) afterCommit(events []Envelope) {
	var full int
	var refused []string
	for _, e := range events {
		if e.Delayed() {
			continue
		}
		if d.enqueueHot(e) {
			continue
		}
		d.metrics.HotDropped()
		if d.isClosed() {
			refused = append(refused, e.ID())
		} else {
			full++
		}
	}
	if full > 0 {
		d.log.Warn("outbox: hot queue full, events left to the poller", "dropped", full)
		select {
		case d.dropped <- struct{}{}:
		default:
		}
	}
	if len(refused) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeoutOnStop)
		defer cancel()
		if _, err := d.cfg.Store.Release(ctx, d.owner, refused); err != nil {
			d.log.Warn("outbox: dispatcher closed before committed events reached it; they are claimable again when their lease expires",
				"count", len(refused), "error", err)
		}
	}
}

func (d *Dispatcher) isClosed() bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.closed
}
