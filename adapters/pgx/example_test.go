package outboxpgx_test

import (
	"context"
	"fmt"
	"log"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
	"github.com/jackc/pgx/v5/pgxpool"

	outboxpgx "github.com/go-outbox/outbox/adapters/pgx"
)

// The business row and the event commit in one pgx transaction; the event
// is delivered right after the commit. (Not run: it needs a server.
// TestQuickStart runs the same steps against the test server.)
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@localhost:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	store, err := outboxpgx.Open(pool)
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	txm := outboxpgx.NewTxManager(pool)
	client, err := outbox.New(outbox.Config{Store: store, TxContext: txm})
	if err != nil {
		log.Fatal(err)
	}
	err = client.Handle(outbox.EventName("OrderPlaced"), func(_ context.Context, e outbox.Envelope) error {
		fmt.Println("delivered:", e.PayloadString())
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)

	err = txm.InTx(ctx, func(ctx context.Context) error {
		tx, _ := txm.Tx(ctx)
		if _, err := tx.Exec(ctx, "INSERT INTO orders (id, total) VALUES ($1, $2)", "o-1", 42); err != nil {
			return err
		}
		ev := outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithJSON([]byte(`{"id":"o-1"}`)))
		_, err := client.Write(ctx, ev)
		return err
	})
	fmt.Println("committed:", err == nil)
}

// TestQuickStart runs the steps of Example on the test server.
func TestQuickStart(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, defaultSession)
	orders := outboxsqltest.TableName("orders_pgx")
	exec(t, pool, "CREATE TABLE "+orders+" (id TEXT PRIMARY KEY, total INTEGER NOT NULL)")
	t.Cleanup(func() { _, _ = pool.Exec(ctx, "DROP TABLE IF EXISTS "+orders) })
	store := newStore(t, pool)
	txm := outboxpgx.NewTxManager(pool)
	client, err := outbox.New(outbox.Config{Store: store, TxContext: txm, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	ev := outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithJSON([]byte(`{"id":"o-1"}`)))
	outboxtest.DeliverOnce(t, client, ev, func(ctx context.Context, write func(context.Context) error) error {
		return txm.InTx(ctx, func(ctx context.Context) error {
			tx, _ := txm.Tx(ctx)
			if _, err := tx.Exec(ctx, "INSERT INTO "+orders+" (id, total) VALUES ($1, $2)", "o-1", 42); err != nil {
				return err
			}
			return write(ctx)
		})
	})
	if n := count(t, pool, orders); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}
