package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	outboxfx "github.com/go-outbox/outbox/fxmodule"
	"gorm.io/gorm"
)

// errShippingDown is what the listener returns while it is set to fail.
var errShippingDown = errors.New("shipping service unavailable")

// Shipping is the listener: it ships an order once its OrderPlaced event is
// delivered, by marking the order shipped. Deliveries are at least once, so
// it is idempotent: shipping an order twice changes nothing.
type Shipping struct {
	db      *gorm.DB
	failing atomic.Bool
}

func newShipping(db *gorm.DB, failing bool) *Shipping {
	sh := &Shipping{db: db}
	sh.failing.Store(failing)
	return sh
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
	shippedAt := time.Now().UTC().Format(time.RFC3339Nano)
	err := sh.db.WithContext(ctx).Model(&orderRecord{}).
		Where("id = ? AND status = ?", e.AggregateID(), "placed").
		Updates(map[string]any{"status": "shipped", "shipped_at": shippedAt}).Error
	if err != nil {
		return fmt.Errorf("ship order %s: %w", e.AggregateID(), err)
	}
	return nil
}
