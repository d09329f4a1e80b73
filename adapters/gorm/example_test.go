package outboxgorm_test

import (
	"context"
	"database/sql"
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
// dispatcher delivers the event right after the commit.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outboxgorm")
	defer os.RemoveAll(dir)

	sqlDB, _ := sql.Open("sqlite", outboxsql.SQLiteDSN(filepath.Join(dir, "app.db")))
	defer sqlDB.Close()
	db, _ := gorm.Open(sqlite.Dialector{DriverName: "sqlite", Conn: sqlDB}, &gorm.Config{Logger: logger.Discard})
	tc, _ := outboxgorm.New(db) // before any transaction begins
	_ = db.AutoMigrate(&Order{})
	store, _ := outboxsql.Open(sqlDB)
	_ = store.Migrate(ctx, sqlDB)

	delivered := make(chan string, 1)
	reg := outbox.NewRegistry()
	_ = reg.Handle(outbox.EventName("OrderPlaced"), func(_ context.Context, e outbox.Envelope) error {
		delivered <- e.PayloadString()
		return nil
	})
	d, _ := outbox.NewDispatcher(outbox.DispatcherConfig{Store: store, DB: sqlDB, Registry: reg})
	_ = d.Start(ctx)
	defer d.Close(ctx)
	w, _ := outbox.NewWriter(outbox.WriterConfig{TxContext: tc, Store: store, Hook: d.Hook()})

	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&Order{ID: "o-1", Total: 42}).Error; err != nil {
			return err
		}
		ev := outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithJSON([]byte(`{"id":"o-1"}`)))
		_, err := w.Write(outboxgorm.WithTx(ctx, tx), ev)
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
	sqlDB, _ := sql.Open("sqlite", outboxsql.SQLiteDSN(filepath.Join(dir, "app.db")))
	defer sqlDB.Close()
	db, _ := gorm.Open(sqlite.Dialector{DriverName: "sqlite", Conn: sqlDB}, &gorm.Config{Logger: logger.Discard})
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
