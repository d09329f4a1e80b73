package outboxgorm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	outboxgorm "github.com/go-outbox/outbox/adapters/gorm"
)

// Order is the example's business model.
type Order struct {
	ID    string `gorm:"primaryKey;size:32"`
	Total int
}

// The business row and the event commit in one GORM transaction; the
// Client delivers the event right after the commit.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outboxgorm")
	defer os.RemoveAll(dir)
	dsn := outboxsql.SQLiteDSN(filepath.Join(dir, "app.db"))

	db, _ := gorm.Open(sqlite.Dialector{DriverName: "sqlite", DSN: dsn}, &gorm.Config{Logger: logger.Discard})
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close() // after client.Close
	}
	_ = db.AutoMigrate(&Order{})

	tc, _ := outboxgorm.New(db)     // the plugin: before any transaction begins
	store, _ := outboxgorm.Open(db) // the outbox table, on GORM's *sql.DB
	_ = store.Migrate(ctx)
	client, _ := outbox.New(outbox.Config{Store: store, TxContext: tc})
	delivered := make(chan string, 1)
	_ = client.Handle(outbox.EventName("OrderPlaced"), func(_ context.Context, e outbox.Envelope) error {
		delivered <- e.PayloadString()
		return nil
	})
	_ = client.Start(ctx)
	defer client.Close(ctx)

	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&Order{ID: "o-1", Total: 42}).Error; err != nil {
			return err
		}
		ev := outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithJSON([]byte(`{"id":"o-1"}`)))
		_, err := client.Write(outboxgorm.WithTx(ctx, tx), ev)
		return err
	})
	fmt.Println("committed:", err == nil)
	fmt.Println("delivered:", <-delivered)
	// Output:
	// committed: true
	// delivered: {"id":"o-1"}
}

// Transaction passes fn a context that already carries the transaction,
// and nests (in a savepoint) when the context carries one.
func ExampleTransaction() {
	dir, _ := os.MkdirTemp("", "outboxgorm")
	defer os.RemoveAll(dir)
	dsn := outboxsql.SQLiteDSN(filepath.Join(dir, "app.db"))
	db, _ := gorm.Open(sqlite.Dialector{DriverName: "sqlite", DSN: dsn}, &gorm.Config{Logger: logger.Discard})
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	tc, _ := outboxgorm.New(db)

	err := outboxgorm.Transaction(context.Background(), db, func(ctx context.Context, tx *gorm.DB) error {
		cur, err := tc.Current(ctx)
		if err != nil {
			return err
		}
		cur.AfterCommit(func() { fmt.Println("outer committed") })
		return outboxgorm.Transaction(ctx, db, func(ctx context.Context, _ *gorm.DB) error {
			cur, err := tc.Current(ctx)
			if err != nil {
				return err
			}
			cur.AfterRollback(func() { fmt.Println("savepoint rolled back") })
			return fmt.Errorf("nested step fails")
		})
	})
	fmt.Println("error:", err)
	// Output:
	// savepoint rolled back
	// error: nested step fails
}
