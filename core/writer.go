package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// WriterHook observes and shapes what a writer writes. Embed NopHook to
// implement only the methods you need.
//
// Lifecycle: BeforeWrite (may transform or suppress) → insert → AfterWrite →
// commit or rollback → AfterCommit or AfterRollback. Only BeforeWrite can fail
// a write; failures and panics in the other methods are logged and swallowed.
type WriterHook interface {
	// BeforeWrite may return a different list of events; an empty list
	// suppresses the write. An error fails the write.
	BeforeWrite(ctx context.Context, events []Envelope) ([]Envelope, error)
	// AfterWrite runs after the rows are inserted, inside the transaction.
	AfterWrite(ctx context.Context, events []Envelope)
	// AfterCommit runs once after the transaction commits.
	AfterCommit(events []Envelope)
	// AfterRollback runs once after the transaction rolls back.
	AfterRollback(events []Envelope)
}

// NopHook implements WriterHook doing nothing; embed it in partial hooks.
type NopHook struct{}

// BeforeWrite returns events unchanged.
func (NopHook) BeforeWrite(_ context.Context, events []Envelope) ([]Envelope, error) {
	return events, nil
}

// AfterWrite does nothing.
func (NopHook) AfterWrite(context.Context, []Envelope) {}

// AfterCommit does nothing.
func (NopHook) AfterCommit([]Envelope) {}

// AfterRollback does nothing.
func (NopHook) AfterRollback([]Envelope) {}

// writer writes events into the outbox inside the caller's transaction.
// It is safe for concurrent use.
type writer struct {
	tx      TxContext
	store   Store
	claims  *claims // inserts the rows, claimed for hot or not
	hot     *dispatcher
	hooks   []WriterHook
	ordered bool
	// ttl is the time-to-live of the types with one (RoutePolicy.TTL).
	ttl     map[string]time.Duration
	clock   Clock
	logger  *slog.Logger
	metrics Metrics
}

// newWriter returns a writer inserting through c (the dispatcher's, with
// a hot path), with the settings of cfg (defaults applied, see
// Config.WithDefaults): cfg.TxContext finds the caller's transaction,
// cfg.Hooks shape writes and observe commits, and cfg.Ordered stores the
// ordering keys. hot, if not nil, delivers committed events in this
// process right after commit (the hot path): the rows are inserted
// already claimed by its owner, so no other instance's poller takes them;
// an ordered event takes the hot path only if nothing of its key is
// pending ahead of it (one Store.PendingKeys query per write). Hooks
// cannot turn the hot path off: it is wired through hot, not through a
// hook. It fails if a hook is nil.
func newWriter(cfg Config, c *claims, hot *dispatcher) (*writer, error) {
	for i, h := range cfg.Hooks {
		if h == nil {
			return nil, configErr("writer hook %d is nil", i)
		}
	}
	w := &writer{tx: cfg.TxContext, store: cfg.Store, hot: hot, hooks: append([]WriterHook(nil), cfg.Hooks...),
		ordered: cfg.Ordered, clock: cfg.Clock, logger: cfg.Logger, metrics: cfg.Metrics, claims: c}
	for t, p := range cfg.Routes {
		if p.TTL > 0 {
			if w.ttl == nil {
				w.ttl = make(map[string]time.Duration)
			}
			w.ttl[t] = p.TTL
		}
	}
	return w, nil
}

// checkEvents refuses a write of events before it reaches the database: a
// zero Envelope, or one outside the limits NewEnvelope keeps (see
// checkWritable) — one made otherwise (RestoreEnvelope) has not been
// checked yet; one made by NewEnvelope or WithAddedHeaders has been.
func checkEvents(events []Envelope) error {
	for i, e := range events {
		if e.IsZero() {
			return fmt.Errorf("%w: event %d is the zero Envelope; build it with NewEnvelope", ErrInvalidEnvelope, i)
		}
		if e.checked {
			continue
		}
		if err := e.checkWritable(); err != nil {
			return err
		}
	}
	return nil
}

// Write inserts events into the outbox in the transaction carried by ctx and
// returns their ids (none if a hook suppressed the write). With no
// transaction in ctx it fails with an error wrapping ErrNoTransaction and
// writes nothing. After commit the hot path and the hooks are told once for
// the batch.
func (w *writer) Write(ctx context.Context, events ...Envelope) ([]string, error) {
	tx, err := w.tx.Current(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkEvents(events); err != nil {
		return nil, err
	}
	for _, h := range w.hooks {
		if events, err = h.BeforeWrite(ctx, events); err != nil {
			return nil, fmt.Errorf("outbox: before-write hook: %w", err)
		}
	}
	if len(w.hooks) > 0 {
		if err := checkEvents(events); err != nil {
			return nil, fmt.Errorf("outbox: after the before-write hooks: %w", err)
		}
	}
	if len(events) == 0 {
		return nil, nil
	}
	seen := make(map[string]struct{}, len(events))
	marked := make([]Envelope, len(events)) // the caller's slice stays as it is
	for i, e := range events {
		if _, dup := seen[e.ID()]; dup {
			return nil, fmt.Errorf("%w: event id %s appears twice in one write", ErrDuplicateEvent, e.ID())
		}
		seen[e.ID()] = struct{}{}
		if ttl, ok := w.ttl[e.Type()]; ok && e.ExpiresAt().IsZero() {
			if e, err = e.WithAddedHeaders(map[string]string{HeaderExpiresAt: e.OccurredAt().Add(ttl).UTC().Format(time.RFC3339Nano)}, true); err != nil {
				return nil, fmt.Errorf("outbox: the TTL of %s: %w", e.Type(), err)
			}
		}
		marked[i] = e.inOrder(w.ordered)
	}
	events = marked
	var claim bool
	if w.hot != nil {
		claim = w.hot.takesHot(events)
	}
	var hot []Envelope
	var released []string
	if claim {
		if w.ordered {
			if hot, released, claim, err = w.hotSplit(ctx, tx, events); err != nil {
				return nil, err
			}
			if !claim {
				released = nil // nothing for the hot path: insert unclaimed
			}
		} else {
			hot = events
		}
	}
	now := utcNow(w.clock)
	if err := w.claims.insert(ctx, tx, now, claim, events); err != nil {
		return nil, fmt.Errorf("outbox: write %d event(s): %w", len(events), err)
	}
	ids := make([]string, len(events))
	for i, e := range events {
		ids[i] = e.ID()
	}
	if claim {
		d := w.hot
		tx.AfterCommit(func() { d.afterCommit(hot, released, now) })
	} else if anyDue(events) {
		// Left in the table: the pollers claim them, this instance's and,
		// woken, the others' (a writer-only instance, a full hot queue,
		// a type another service routes, a limited route).
		tx.AfterCommit(w.claims.wakeAll)
	}
	if !isNop(w.metrics) {
		tx.AfterCommit(func() { countWritten(w.metrics, events) })
	}
	for _, h := range w.hooks {
		safeCall(w.logger, "after-write hook", func() { h.AfterWrite(ctx, events) })
		tx.AfterCommit(func() { safeCall(w.logger, "after-commit hook", func() { h.AfterCommit(events) }) })
		tx.AfterRollback(func() { safeCall(w.logger, "after-rollback hook", func() { h.AfterRollback(events) }) })
	}
	return ids, nil
}

// anyDue reports whether one of events is due at once (not Delayed).
func anyDue(events []Envelope) bool {
	for _, e := range events {
		if !e.Delayed() {
			return true
		}
	}
	return false
}
