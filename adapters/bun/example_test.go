package outboxbun_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"

	outboxbun "github.com/go-outbox/outbox/adapters/bun"
)

// Order is the example's business model.
type Order struct {
	bun.BaseModel `bun:"table:orders"`
	ID            string `bun:",pk"`
	Total         int    `bun:",notnull"`
}

// The business row and the event commit in one bun transaction; the
// Client delivers the event right after the commit.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outboxbun")
	defer os.RemoveAll(dir)

	sqlDB, _ := sql.Open("sqlite", outboxsql.SQLiteDSN(filepath.Join(dir, "app.db")))
	defer sqlDB.Close() // after client.Close
	tc := outboxbun.New()
	db := bun.NewDB(sqlDB, sqlitedialect.New()).WithQueryHook(tc)
	_, _ = db.NewCreateTable().Model((*Order)(nil)).Exec(ctx)

	store, _ := outboxbun.Open(db) // the outbox table, on bun's *sql.DB
	_ = store.Migrate(ctx)
	client, _ := outbox.New(outbox.Config{Store: store, TxContext: tc})
	delivered := make(chan string, 1)
	_ = client.Handle(outbox.EventName("OrderPlaced"), func(_ context.Context, e outbox.Envelope) error {
		delivered <- e.PayloadString()
		return nil
	})
	_ = client.Start(ctx)
	defer client.Close(ctx)

	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(&Order{ID: "o-1", Total: 42}).Exec(ctx); err != nil {
			return err
		}
		ev := outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithJSON([]byte(`{"id":"o-1"}`)))
		_, err := client.Write(outboxbun.WithTx(ctx, tx), ev)
		return err
	})
	fmt.Println("committed:", err == nil)
	fmt.Println("delivered:", <-delivered)
	// Output:
	// committed: true
	// delivered: {"id":"o-1"}
}

// BeginTx begins a transaction that is committed with bun's own Commit; its
// nested transactions are bun's savepoints.
func ExampleTxContext_BeginTx() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outboxbun")
	defer os.RemoveAll(dir)
	sqlDB, _ := sql.Open("sqlite", outboxsql.SQLiteDSN(filepath.Join(dir, "app.db")))
	defer sqlDB.Close()
	tc := outboxbun.New()
	db := bun.NewDB(sqlDB, sqlitedialect.New()).WithQueryHook(tc)

	ctx, tx, err := tc.BeginTx(ctx, db, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	cur, _ := tc.Current(ctx)
	cur.AfterCommit(func() { fmt.Println("committed") })
	_ = tx.RunInTx(ctx, nil, func(ctx context.Context, sp bun.Tx) error {
		cur, _ := tc.Current(outboxbun.WithTx(ctx, sp))
		cur.AfterRollback(func() { fmt.Println("savepoint rolled back") })
		return errors.New("nested step fails")
	})
	fmt.Println("commit error:", tx.Commit())
	// Output:
	// savepoint rolled back
	// committed
	// commit error: <nil>
}
