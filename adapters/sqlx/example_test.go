package outboxsqlx_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"

	outboxsqlx "github.com/go-outbox/outbox/adapters/sqlx"
)

// The business row and the event commit in one sqlx transaction, begun
// with sqlx's own MustBegin; the Client delivers the event right after
// tx.Commit.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outboxsqlx")
	defer os.RemoveAll(dir)

	// OpenDB instead of sqlx.Open: every transaction reports its commit.
	db, _ := outboxsqlx.OpenDB("sqlite", outboxsql.SQLiteDSN(filepath.Join(dir, "app.db")))
	defer db.Close() // after client.Close
	_, _ = db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`)

	store, _ := outboxsqlx.Open(db) // the outbox table, on the same database
	_ = store.Migrate(ctx)
	client, _ := outbox.New(outbox.Config{Store: store, TxContext: outboxsqlx.New()})
	delivered := make(chan string, 1)
	_ = client.Handle(outbox.EventName("OrderPlaced"), func(_ context.Context, e outbox.Envelope) error {
		delivered <- e.PayloadString()
		return nil
	})
	_ = client.Start(ctx)
	defer client.Close(ctx)

	tx := db.MustBegin()
	tx.MustExec(`INSERT INTO orders (id, total) VALUES (?, ?)`, "o-1", 42)
	ev := outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithJSON([]byte(`{"id":"o-1"}`)))
	if _, err := client.Write(outboxsqlx.WithTx(ctx, tx), ev); err != nil {
		_ = tx.Rollback()
		fmt.Println(err)
		return
	}
	fmt.Println("commit error:", tx.Commit())
	fmt.Println("delivered:", <-delivered)
	// Output:
	// commit error: <nil>
	// delivered: {"id":"o-1"}
}

// InTx runs a function in a transaction; nested, it runs in a savepoint.
func ExampleTxManager_InTx() {
	dir, _ := os.MkdirTemp("", "outboxsqlx")
	defer os.RemoveAll(dir)
	db, _ := outboxsqlx.OpenDB("sqlite", outboxsql.SQLiteDSN(filepath.Join(dir, "app.db")))
	defer db.Close()
	txm := outboxsqlx.NewTxManager(db)

	err := txm.InTx(context.Background(), func(ctx context.Context) error {
		cur, err := txm.Current(ctx)
		if err != nil {
			return err
		}
		cur.AfterCommit(func() { fmt.Println("committed") })
		nested := txm.InTx(ctx, func(ctx context.Context) error {
			cur, _ := txm.Current(ctx)
			cur.AfterRollback(func() { fmt.Println("savepoint rolled back") })
			return errors.New("nested step fails")
		})
		fmt.Println("nested:", nested)
		return nil // the outer transaction still commits
	})
	fmt.Println("error:", err)
	// Output:
	// savepoint rolled back
	// nested: nested step fails
	// committed
	// error: <nil>
}
