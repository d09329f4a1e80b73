package outboxfx_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	outboxfx "github.com/go-outbox/outbox/fxmodule"
	"github.com/rs/zerolog"
	"go.uber.org/fx"
)

// OrderService is application code: it writes an order's event through the
// "orders" data source's Client, in that data source's transaction.
type OrderService struct {
	tx     *outboxsql.TxManager
	outbox *outbox.Client
}

func (s *OrderService) Place(ctx context.Context, id string) error {
	return s.tx.InTx(ctx, func(ctx context.Context) error {
		// ... INSERT INTO orders through s.tx.Tx(ctx) ...
		e, err := outbox.NewEnvelope(outbox.EventName("OrderPlaced"),
			outbox.WithAggregate(outbox.AggregateName("Order"), id), outbox.WithJSON([]byte(`{"id":"`+id+`"}`)))
		if err != nil {
			return err
		}
		_, err = s.outbox.Write(ctx, e)
		return err
	})
}

func ExampleDataSource() {
	dir, _ := os.MkdirTemp("", "outboxfx-example")
	defer os.RemoveAll(dir)

	delivered := make(chan string, 1)
	shipping := func() outboxfx.Route { // a listener constructor; it could take dependencies
		return outboxfx.Route{
			Aggregate: outbox.AggregateName("Order"),
			Event:     outbox.EventName("OrderPlaced"),
			Listener: outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
				delivered <- e.AggregateID() + " " + e.PayloadString()
				return nil
			}),
		}
	}

	var svc *OrderService
	app := fx.New(
		fx.Supply(zerolog.Nop()), // the application's zerolog.Logger
		outboxfx.ZerologLogger(), // the outbox logs to it
		outboxfx.WithZerolog(),   // and so does fx
		outboxfx.SQLDB("orders", "sqlite", outboxsql.SQLiteDSN(filepath.Join(dir, "orders.db"))),
		outboxfx.DataSource("orders",
			outboxfx.WithPreset(outboxfx.PresetSingleNode),
			outboxfx.Configure(func(c *outboxfx.Config) { c.Migrate = true }),
			outboxfx.FromEnv(), // OUTBOX_ORDERS_… variables have the last word
		),
		outboxfx.Routes("orders", shipping),
		fx.Provide(fx.Annotate(
			func(tx *outboxsql.TxManager, c *outbox.Client) *OrderService { return &OrderService{tx: tx, outbox: c} },
			fx.ParamTags(`name:"orders"`, `name:"orders"`),
		)),
		fx.Populate(&svc),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	if err := svc.Place(ctx, "o-1"); err != nil {
		fmt.Println(err)
	}
	fmt.Println("delivered:", <-delivered)
	if err := app.Stop(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// delivered: o-1 {"id":"o-1"}
}
