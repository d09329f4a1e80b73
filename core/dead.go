package outbox

import (
	"context"
	"fmt"
)

// DeadEvents inspects and replays events in DEAD. Get one from
// Client.Dead, or build one with newDeadEvents.
type DeadEvents struct {
	store Store
	clock Clock
}

// newDeadEvents returns a DeadEvents working on store. A nil clock means
// SystemClock.
func newDeadEvents(store Store, clock Clock) *DeadEvents {
	return &DeadEvents{store: store, clock: clockOr(clock)}
}

func deadOnly(q Query) Query {
	q.Statuses = []Status{StatusDead}
	return q
}

// List returns DEAD events matching q (its Statuses are ignored), by id.
func (d *DeadEvents) List(ctx context.Context, q Query) ([]Record, error) {
	return d.store.List(ctx, deadOnly(q))
}

// Count returns how many DEAD events match q.
func (d *DeadEvents) Count(ctx context.Context, q Query) (int64, error) {
	return d.store.Count(ctx, deadOnly(q))
}

// Replay makes one DEAD event pending again, with zero attempts. It fails
// with ErrNotFound if id is not a DEAD event.
func (d *DeadEvents) Replay(ctx context.Context, id string) error {
	n, err := d.store.Replay(ctx, []string{id}, utcNow(d.clock))
	if err != nil {
		return fmt.Errorf("outbox: replay %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: no DEAD event with id %s", ErrNotFound, id)
	}
	return nil
}

// ReplayAll replays every DEAD event matching q, batchSize at a time
// (q.Limit, default 100), and returns how many were replayed.
func (d *DeadEvents) ReplayAll(ctx context.Context, q Query) (int64, error) {
	q = deadOnly(q)
	if q.Limit <= 0 {
		q.Limit = 100
	}
	var total int64
	for {
		recs, err := d.store.List(ctx, q)
		if err != nil {
			return total, fmt.Errorf("outbox: replay all: %w", err)
		}
		if len(recs) == 0 {
			return total, nil
		}
		ids := make([]string, len(recs))
		for i, r := range recs {
			ids[i] = r.ID
		}
		n, err := d.store.Replay(ctx, ids, utcNow(d.clock))
		total += n
		if err != nil {
			return total, fmt.Errorf("outbox: replay all: %w", err)
		}
		q.AfterID = ids[len(ids)-1]
	}
}
