package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"go.uber.org/fx"
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

const ordersSchema = `CREATE TABLE IF NOT EXISTS http_demo_orders (
	id VARCHAR(36) PRIMARY KEY,
	customer VARCHAR(200) NOT NULL,
	amount_cents BIGINT NOT NULL,
	status VARCHAR(16) NOT NULL,
	created_at VARCHAR(40) NOT NULL,
	shipped_at VARCHAR(40),
	event_id VARCHAR(36) NOT NULL
)`

// Orders stores orders, writing each order's events through the outbox in
// the order's transaction.
type Orders struct {
	db     *sql.DB
	store  *outboxsql.Store
	tx     *outboxsql.TxManager
	outbox *outbox.Client
}

// newOrders creates the orders table when the app starts (after the outbox
// table, whose hook was registered first).
func newOrders(lc fx.Lifecycle, db *sql.DB, store *outboxsql.Store, tx *outboxsql.TxManager, c *outbox.Client, obs *Observability) *Orders {
	o := &Orders{db: db, store: store, tx: tx, outbox: c}
	lc.Append(fx.StartHook(func(ctx context.Context) error {
		if _, err := db.ExecContext(ctx, ordersSchema); err != nil {
			return fmt.Errorf("create orders table: %w", err)
		}
		return nil
	}))
	return o
}

// Place stores a new order and its OrderPlaced event in one transaction:
// both are written, or neither.
func (o *Orders) Place(ctx context.Context, customer string, amountCents int64) (Order, error) {
	id := outbox.NewULID()
	ev, err := outbox.NewEnvelope(orderPlaced, outbox.WithAggregate(orderAggregate, id),
		outbox.WithJSONValue(orderPlacedPayload{OrderID: id, Customer: customer, AmountCents: amountCents}))
	if err != nil {
		return Order{}, err
	}
	order := Order{ID: id, Customer: customer, AmountCents: amountCents, Status: "placed",
		CreatedAt: time.Now().UTC().Format(time.RFC3339Nano), EventID: ev.ID()}
	err = o.tx.InTx(ctx, func(ctx context.Context) error {
		tx, _ := o.tx.Tx(ctx)
		if _, err := tx.ExecContext(ctx, o.rebind(
			`INSERT INTO http_demo_orders (id, customer, amount_cents, status, created_at, event_id) VALUES (?, ?, ?, ?, ?, ?)`),
			order.ID, order.Customer, order.AmountCents, order.Status, order.CreatedAt, order.EventID); err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		_, err := o.outbox.Write(ctx, ev)
		return err
	})
	if err != nil {
		return Order{}, fmt.Errorf("place order: %w", err)
	}
	return order, nil
}

// Get returns one order, or errOrderNotFound.
func (o *Orders) Get(ctx context.Context, id string) (Order, error) {
	var ord Order
	var shipped sql.NullString
	err := o.db.QueryRowContext(ctx, o.rebind(
		`SELECT id, customer, amount_cents, status, created_at, shipped_at, event_id FROM http_demo_orders WHERE id = ?`), id).
		Scan(&ord.ID, &ord.Customer, &ord.AmountCents, &ord.Status, &ord.CreatedAt, &shipped, &ord.EventID)
	if errors.Is(err, sql.ErrNoRows) {
		return Order{}, errOrderNotFound
	}
	if err != nil {
		return Order{}, fmt.Errorf("get order %s: %w", id, err)
	}
	if shipped.Valid {
		ord.ShippedAt = &shipped.String
	}
	return ord, nil
}

// rebind makes a query written with ? placeholders run on the data
// source's database ($1, $2, … on PostgreSQL).
func (o *Orders) rebind(query string) string {
	return outboxsql.Rebind(o.store.Dialect(), query)
}
