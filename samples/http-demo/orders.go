package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	outboxgorm "github.com/go-outbox/outbox/adapters/gorm"
	outbox "github.com/go-outbox/outbox/core"
	"go.uber.org/fx"
	"gorm.io/gorm"
)

// The application's event and aggregate types.
type eventType string

func (e eventType) Name() string { return string(e) }

const (
	orderPlaced    eventType = "OrderPlaced"
	orderAggregate           = outbox.AggregateName("Order")
)

// errOrderNotFound is returned by Orders.Get for an unknown id.
var errOrderNotFound = errors.New("order not found")

// Order is an order as the API shows it.
type Order struct {
	ID          string  `json:"id"`
	Customer    string  `json:"customer"`
	AmountCents int64   `json:"amount_cents"`
	Status      string  `json:"status"` // placed, then shipped once OrderPlaced is delivered
	CreatedAt   string  `json:"created_at"`
	ShippedAt   *string `json:"shipped_at,omitempty"`
	EventID     string  `json:"event_id"` // the OrderPlaced event in the outbox
}

// orderPlacedPayload is the OrderPlaced event's JSON.
type orderPlacedPayload struct {
	OrderID     string `json:"order_id"`
	Customer    string `json:"customer"`
	AmountCents int64  `json:"amount_cents"`
}

// orderRecord is the GORM model of the http_demo_orders table.
type orderRecord struct {
	ID          string  `gorm:"primaryKey;size:36"`
	Customer    string  `gorm:"size:200;not null"`
	AmountCents int64   `gorm:"not null"`
	Status      string  `gorm:"size:16;not null"`
	CreatedAt   string  `gorm:"size:40;not null"` // RFC 3339, as the API shows it
	ShippedAt   *string `gorm:"size:40"`
	EventID     string  `gorm:"size:36;not null"`
}

// TableName implements GORM's schema.Tabler.
func (orderRecord) TableName() string { return "http_demo_orders" }

// order is the record as the API shows it (the same fields).
func (r orderRecord) order() Order { return Order(r) }

// ordersSchema creates the table of orderRecord. The sample keeps this DDL
// rather than db.AutoMigrate: the table is the same on SQLite, PostgreSQL
// and MySQL and stays exactly what earlier runs created (make demo-http
// keeps its SQLite file between runs), where AutoMigrate would compare the
// existing columns with the model's and could alter them.
const ordersSchema = `CREATE TABLE IF NOT EXISTS http_demo_orders (
	id VARCHAR(36) PRIMARY KEY,
	customer VARCHAR(200) NOT NULL,
	amount_cents BIGINT NOT NULL,
	status VARCHAR(16) NOT NULL,
	created_at VARCHAR(40) NOT NULL,
	shipped_at VARCHAR(40),
	event_id VARCHAR(36) NOT NULL
)`

// Orders stores orders through GORM, writing each order's events through
// the outbox in the order's transaction.
type Orders struct {
	db     *gorm.DB
	outbox *outbox.Client
}

// newOrders creates the orders table when the app starts (after the outbox
// table, whose hook was registered first).
func newOrders(lc fx.Lifecycle, db *gorm.DB, c *outbox.Client) *Orders {
	o := &Orders{db: db, outbox: c}
	lc.Append(fx.StartHook(func(ctx context.Context) error {
		if err := db.WithContext(ctx).Exec(ordersSchema).Error; err != nil {
			return fmt.Errorf("create orders table: %w", err)
		}
		return nil
	}))
	return o
}

// Place stores a new order and its OrderPlaced event in one GORM
// transaction: both are written, or neither. The Client delivers the event
// once that transaction has committed.
func (o *Orders) Place(ctx context.Context, customer string, amountCents int64) (Order, error) {
	id := outbox.NewULID()
	ev, err := outbox.NewEnvelope(orderPlaced, outbox.WithAggregate(orderAggregate, id),
		outbox.WithJSONValue(orderPlacedPayload{OrderID: id, Customer: customer, AmountCents: amountCents}))
	if err != nil {
		return Order{}, err
	}
	rec := orderRecord{ID: id, Customer: customer, AmountCents: amountCents, Status: "placed",
		CreatedAt: time.Now().UTC().Format(time.RFC3339Nano), EventID: ev.ID()}
	err = o.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&rec).Error; err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		// WithTx hands the transaction to the Client (its TxContext is the
		// outboxgorm plugin's); ctx keeps the request's trace context.
		_, err := o.outbox.Write(outboxgorm.WithTx(ctx, tx), ev)
		return err
	})
	if err != nil {
		return Order{}, fmt.Errorf("place order: %w", err)
	}
	return rec.order(), nil
}

// Get returns one order, or errOrderNotFound.
func (o *Orders) Get(ctx context.Context, id string) (Order, error) {
	var rec orderRecord
	err := o.db.WithContext(ctx).Where("id = ?", id).Take(&rec).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Order{}, errOrderNotFound
	}
	if err != nil {
		return Order{}, fmt.Errorf("get order %s: %w", id, err)
	}
	return rec.order(), nil
}
