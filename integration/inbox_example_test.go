package integration_test

import (
	"context"
	"fmt"
	"log"

	"github.com/go-outbox/outbox/core/inbox"
	"github.com/go-outbox/outbox/core/outboxsql"
)

// A consumer applies an event once: the second delivery of its id is a
// duplicate and changes nothing.
func Example_inbox() {
	db, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()
	if _, err := db.Exec("CREATE TABLE stock (sku TEXT PRIMARY KEY, reserved INTEGER NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO stock VALUES ('sku-1', 0)"); err != nil {
		log.Fatal(err)
	}
	store, err := outboxsql.Open(db) // the database: pool and dialect
	if err != nil {
		log.Fatal(err)
	}
	txm := outboxsql.NewTxManager(db)
	in, err := inbox.New(inbox.Config{Store: store, TxContext: txm})
	if err != nil {
		log.Fatal(err)
	}
	if err := in.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	// consume is what a broker's message handler runs; acknowledge the
	// message once it returns nil.
	consume := func(eventID string, qty int) error {
		return txm.InTx(ctx, func(ctx context.Context) error {
			dup, err := in.Process(ctx, eventID, func(ctx context.Context) error {
				tx, _ := txm.Tx(ctx)
				_, err := tx.ExecContext(ctx, "UPDATE stock SET reserved = reserved + ? WHERE sku = 'sku-1'", qty)
				return err
			})
			fmt.Println(eventID, "duplicate:", dup)
			return err
		})
	}
	for _, id := range []string{"evt-1", "evt-2", "evt-1"} { // evt-1 is redelivered
		if err := consume(id, 5); err != nil {
			log.Fatal(err)
		}
	}
	var reserved int
	if err := db.QueryRow("SELECT reserved FROM stock").Scan(&reserved); err != nil {
		log.Fatal(err)
	}
	fmt.Println("reserved", reserved)
	// Output:
	// evt-1 duplicate: false
	// evt-2 duplicate: false
	// evt-1 duplicate: true
	// reserved 10
}
