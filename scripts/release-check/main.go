// The README's GORM quick start on SQLite, and the fx module's start of
// docs/fx.md (fx.go), as another repository writes them:
// scripts/release-check.sh copies this directory into a fresh module
// outside the repository, gets the modules from the release's proxy
// directory and runs it. It prints the event each delivered.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	outboxgorm "github.com/go-outbox/outbox/adapters/gorm"
	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	_ "modernc.org/sqlite"
)

// Order is the business row written with the event.
type Order struct {
	ID string `gorm:"primaryKey"`
}

func main() {
	// A guard against a hang, not a measurement: delivery takes milliseconds.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "outbox-quickstart")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := quickStart(ctx, filepath.Join(dir, "gorm.db")); err != nil {
		log.Fatal("GORM quick start: ", err)
	}
	if err := fxStart(ctx, filepath.Join(dir, "fx.db")); err != nil {
		log.Fatal("fx start: ", err)
	}
}

// quickStart runs the README's GORM quick start on the SQLite file path.
func quickStart(ctx context.Context, path string) error {
	dsn := outboxsql.SQLiteDSN(path)
	db, err := gorm.Open(sqlite.Dialector{DriverName: "sqlite", DSN: dsn}, &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return err
	}
	if err := db.AutoMigrate(&Order{}); err != nil {
		return err
	}
	tc, err := outboxgorm.New(db) // the plugin: sees every commit
	if err != nil {
		return err
	}
	store, err := outboxgorm.Open(db) // the Store, on GORM's pool
	if err != nil {
		return err
	}
	if err := store.Migrate(ctx); err != nil { // CREATE TABLE/INDEX IF NOT EXISTS
		return err
	}
	client, err := outbox.New(outbox.Config{Store: store, TxContext: tc})
	if err != nil {
		return err
	}
	delivered := make(chan outbox.Envelope, 1)
	err = client.Handle(outbox.EventName("OrderPlaced"), func(_ context.Context, e outbox.Envelope) error {
		delivered <- e
		return nil
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = client.Close(context.Background()) }()

	order := Order{ID: "o-1"}
	err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&order).Error; err != nil {
			return err
		}
		ev, err := outbox.NewEnvelope(outbox.EventName("OrderPlaced"),
			outbox.WithAggregate(outbox.AggregateName("Order"), order.ID), outbox.WithJSON([]byte(`{"id":"o-1"}`)))
		if err != nil {
			return err
		}
		_, err = client.Write(outboxgorm.WithTx(ctx, tx), ev) // same transaction
		return err
	})
	if err != nil {
		return err
	}
	select {
	case e := <-delivered:
		fmt.Printf("delivered %s %s of Order %s: %s\n", e.Type(), e.ID(), e.AggregateID(), e.PayloadString())
		return nil
	case <-ctx.Done():
		return fmt.Errorf("no delivery: %w", ctx.Err())
	}
}
