package main

import (
	"context"
	"fmt"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	outboxfx "github.com/go-outbox/outbox/fxmodule"
	"go.uber.org/fx"
)

// fxStart runs an fx app with the outbox module on the SQLite file path
// (docs/fx.md, one data source), writes one event and waits for it.
func fxStart(ctx context.Context, path string) error {
	delivered := make(chan outbox.Envelope, 1)
	var txm *outboxsql.TxManager
	var client *outbox.Client
	app := fx.New(
		fx.NopLogger,
		outboxfx.SQLDB("", "sqlite", outboxsql.SQLiteDSN(path)),
		outboxfx.Module(outboxfx.Configure(func(c *outboxfx.Config) { c.Migrate = true })),
		outboxfx.Routes("", func() outboxfx.Route {
			return outboxfx.Route{
				Event: outbox.EventName("OrderPlaced"),
				Listener: outbox.ListenerFunc(func(_ context.Context, e outbox.Envelope) error {
					delivered <- e
					return nil
				}),
			}
		}),
		fx.Populate(&txm, &client),
	)
	if err := app.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = app.Stop(context.Background()) }()

	err := txm.InTx(ctx, func(ctx context.Context) error {
		_, err := client.Write(ctx, outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithJSON([]byte(`{"id":"o-2"}`))))
		return err
	})
	if err != nil {
		return err
	}
	select {
	case e := <-delivered:
		fmt.Printf("delivered through fx %s %s: %s\n", e.Type(), e.ID(), e.PayloadString())
		return nil
	case <-ctx.Done():
		return fmt.Errorf("no delivery: %w", ctx.Err())
	}
}
