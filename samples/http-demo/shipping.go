package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	outboxfx "github.com/go-outbox/outbox/fxmodule"
)

// errShippingDown is what the listener returns while it is set to fail.
var errShippingDown = errors.New("shipping service unavailable")

// Shipping is the listener: it ships an order once its OrderPlaced event is
// delivered, by marking the order shipped. Deliveries are at least once, so
// it is idempotent: shipping an order twice changes nothing.
type Shipping struct {
	db      *sql.DB
	dialect outboxsql.Dialect
	failing atomic.Bool
}

func newShipping(db *sql.DB, failing bool) (*Shipping, error) {
	d, err := outboxsql.DetectDialect(db)
	if err != nil {
		return nil, err
	}
	sh := &Shipping{db: db, dialect: d}
	sh.failing.Store(failing)
	return sh, nil
}

// Route routes OrderPlaced events on Order aggregates to the listener.
func (sh *Shipping) Route() outboxfx.Route {
	return outboxfx.Route{Aggregate: orderAggregate, Event: orderPlaced, Listener: sh}
}

// SetFailing makes every delivery fail (true) or succeed again (false).
func (sh *Shipping) SetFailing(fail bool) { sh.failing.Store(fail) }

// Failing reports whether deliveries currently fail.
func (sh *Shipping) Failing() bool { return sh.failing.Load() }

// Handle implements outbox.Listener.
func (sh *Shipping) Handle(ctx context.Context, e outbox.Envelope) error {
	if sh.failing.Load() {
		return errShippingDown
	}
	_, err := sh.db.ExecContext(ctx, outboxsql.Rebind(sh.dialect,
		`UPDATE http_demo_orders SET status = 'shipped', shipped_at = ? WHERE id = ? AND status = 'placed'`),
		time.Now().UTC().Format(time.RFC3339Nano), e.AggregateID())
	if err != nil {
		return fmt.Errorf("ship order %s: %w", e.AggregateID(), err)
	}
	return nil
}
