package outbox

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// DeadEvents inspects and replays events in DEAD. Get one from
// Client.Dead, or build one with newDeadEvents.
type DeadEvents struct {
	store Store
	clock Clock
	// wake, if set, tells the Client's poller that replayed or skipped
	// events may let others go out.
	wake func()
	// record, if set, appends an action to the Client's audit trail.
	record func(ctx context.Context, e AuditEntry)
}

// audit records an action that changed n events, if any did.
func (d *DeadEvents) audit(ctx context.Context, n int64, e AuditEntry) {
	if n > 0 && d.record != nil {
		e.Count = n
		d.record(ctx, e)
	}
}

// newDeadEvents returns a DeadEvents working on store. A nil clock means
// SystemClock.
func newDeadEvents(store Store, clock Clock) *DeadEvents {
	return &DeadEvents{store: store, clock: clockOr(clock)}
}

func (d *DeadEvents) woke(n int64) {
	if n > 0 && d.wake != nil {
		d.wake()
	}
}

func deadOnly(q Query) Query {
	q.Statuses = []Status{StatusDead}
	return q
}

// List returns DEAD events matching q (its Statuses are ignored), by id.
// With q.Blocking, only those that hold back their ordering key.
func (d *DeadEvents) List(ctx context.Context, q Query) ([]Record, error) {
	return d.store.List(ctx, deadOnly(q))
}

// Count returns how many DEAD events match q.
func (d *DeadEvents) Count(ctx context.Context, q Query) (int64, error) {
	return d.store.Count(ctx, deadOnly(q))
}

// Replay makes one DEAD event pending again, with zero attempts. It fails
// with ErrNotFound if id is not a DEAD event. An ordered event keeps its
// place: under DeadBlocksKey it is delivered before the events of its key
// that waited for it.
func (d *DeadEvents) Replay(ctx context.Context, id string) error {
	n, err := d.store.Replay(ctx, []string{id}, utcNow(d.clock))
	if err != nil {
		return fmt.Errorf("outbox: replay %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: no DEAD event with id %s", ErrNotFound, id)
	}
	d.woke(n)
	d.audit(ctx, n, AuditEntry{Action: "replay", Target: id})
	return nil
}

// Skip gives up one DEAD event for good without deleting it: it becomes
// DONE, undelivered, with SkipNote and reason as its last error, so that
// the events of its ordering key that waited for it go on. It fails with
// ErrNotFound if id is not a DEAD event.
func (d *DeadEvents) Skip(ctx context.Context, id, reason string) error {
	note := SkipNote
	if reason != "" {
		note += ": " + reason
	}
	n, err := d.store.Skip(ctx, []string{id}, utcNow(d.clock), TruncateError(note))
	if err != nil {
		return fmt.Errorf("outbox: skip %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: no DEAD event with id %s", ErrNotFound, id)
	}
	d.woke(n)
	d.audit(ctx, n, AuditEntry{Action: "skip", Target: id, Reason: storableText(reason, MaxReasonLen)})
	return nil
}

// Delete removes DEAD events for good and returns how many it removed; an
// id that is not a DEAD event is left alone (and not counted). Like Skip,
// it lets the ordered events that waited for them go on.
func (d *DeadEvents) Delete(ctx context.Context, ids ...string) (int64, error) {
	n, err := d.store.Delete(ctx, ids)
	if err != nil {
		return n, fmt.Errorf("outbox: delete dead events: %w", err)
	}
	d.woke(n)
	d.audit(ctx, n, AuditEntry{Action: "delete", Target: idsTarget(ids)})
	return n, nil
}

// ReplayAll replays every DEAD event matching q, batchSize at a time
// (q.Limit, default 100), and returns how many were replayed.
func (d *DeadEvents) ReplayAll(ctx context.Context, q Query) (int64, error) {
	q = deadOnly(q)
	if q.Limit <= 0 {
		q.Limit = 100
	}
	var total int64
	defer func() { d.audit(ctx, total, AuditEntry{Action: "replay", Target: QueryTarget(q)}) }()
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
		d.woke(n)
		if err != nil {
			return total, fmt.Errorf("outbox: replay all: %w", err)
		}
		q.AfterID = ids[len(ids)-1]
	}
}

// QueryTarget describes the filter q in an audit entry: its statuses,
// types, tenant and ids, e.g. "status=DEAD type=OrderPlaced tenant=acme".
func QueryTarget(q Query) string {
	var parts []string
	for _, st := range q.Statuses {
		parts = append(parts, "status="+st.String())
	}
	for _, f := range []struct{ name, v string }{{"aggregate_type", q.AggregateType}, {"type", q.EventType}, {"tenant", q.TenantID}} {
		if f.v != "" {
			parts = append(parts, f.name+"="+strconv.Quote(f.v))
		}
	}
	if len(q.IDs) > 0 {
		parts = append(parts, idsTarget(q.IDs))
	}
	if q.Blocking {
		parts = append(parts, "blocking")
	}
	if len(parts) == 0 {
		return "all"
	}
	return strings.Join(parts, " ")
}
