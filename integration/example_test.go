package integration_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"

	_ "modernc.org/sqlite"
)

// tempDB opens a new SQLite file; the returned function removes it.
func tempDB() (*sql.DB, func()) {
	dir, err := os.MkdirTemp("", "outbox-example")
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("sqlite", outboxsql.SQLiteDSN(filepath.Join(dir, "app.db")))
	if err != nil {
		log.Fatal(err)
	}
	return db, func() { db.Close(); os.RemoveAll(dir) }
}

// Open a store for a database, detecting its dialect, and create its table.
func Example_open() {
	db, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()

	store, err := outboxsql.Open(db, outboxsql.WithTable("app_outbox"))
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil { // idempotent
		log.Fatal(err)
	}
	fmt.Println(store.Dialect().Name(), store.Table(), len(store.Schema()), "statements")
	// Output: sqlite app_outbox 16 statements
}

// The quick start on SQLite: write a business row and its event in one
// transaction; after the commit the Client delivers the event to its
// listener at once.
func Example_client() {
	db, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()
	store, _ := outboxsql.Open(db)
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE orders (id TEXT PRIMARY KEY)"); err != nil {
		log.Fatal(err)
	}
	txm := outboxsql.NewTxManager(db)
	client, err := outbox.New(outbox.Config{Store: store, TxContext: txm})
	if err != nil {
		log.Fatal(err)
	}
	delivered := make(chan string, 1)
	_ = client.Handle(outbox.EventName("OrderPlaced"), func(ctx context.Context, e outbox.Envelope) error {
		delivered <- e.AggregateID() + " " + e.PayloadString() // deduplicate by e.ID() in real listeners
		return nil
	})
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)

	err = txm.InTx(ctx, func(ctx context.Context) error {
		tx, _ := txm.Tx(ctx)
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id) VALUES ('o-1')"); err != nil {
			return err
		}
		ev, err := outbox.NewEnvelope(outbox.EventName("OrderPlaced"),
			outbox.WithAggregate(outbox.AggregateName("Order"), "o-1"),
			outbox.WithJSON([]byte(`{"id":"o-1"}`)))
		if err != nil {
			return err
		}
		_, err = client.Write(ctx, ev)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-delivered)
	// Output: o-1 {"id":"o-1"}
}

// Claim due events for one owner, deliver them, and acknowledge them.
func Example_claim() {
	db, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()
	store, _ := outboxsql.Open(db)
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	now := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	var evs []outbox.Envelope
	for i := range 3 {
		evs = append(evs, outbox.MustEnvelope(outbox.EventName("Ping"), outbox.WithID(fmt.Sprintf("evt-%d", i)), outbox.WithJSON([]byte(`{}`))))
	}
	txm := outboxsql.NewTxManager(db)
	err := txm.InTx(ctx, func(ctx context.Context) error {
		tx, err := txm.Current(ctx)
		if err != nil {
			return err
		}
		return store.Insert(ctx, tx, now, "", evs)
	})
	if err != nil {
		log.Fatal(err)
	}

	recs, err := store.Claim(ctx, outbox.ClaimRequest{Owner: "node-1", Now: now, Lease: 5 * time.Minute, Limit: 2})
	if err != nil {
		log.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.ID) // deliver r.Envelope here
	}
	done, _ := store.MarkDone(ctx, "node-1", ids, now)
	stats, _ := store.Stats(ctx, now)
	fmt.Println("claimed", ids, "done", done)
	fmt.Println("pending", stats.ByStatus[outbox.StatusNew], "done", stats.ByStatus[outbox.StatusDone])
	// Output:
	// claimed [evt-0 evt-1] done 2
	// pending 1 done 2
}
