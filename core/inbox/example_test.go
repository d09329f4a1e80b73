package inbox_test

import (
	"context"
	"database/sql"
	"log"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/inbox"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/relay"
)

// message stands for a message of a broker client: NATS, RabbitMQ, Kafka.
type message struct {
	headers map[string]string
	data    []byte
}

func (m message) Ack() error { return nil }
func (m message) Nak() error { return nil }

// A consumer applies each message once, in its own transaction, and
// acknowledges it after the commit. (Runnable on SQLite: the Example of
// the integration module.)
func ExampleInbox_Process() {
	ctx := context.Background()
	db, err := sql.Open("sqlite", outboxsql.SQLiteDSN("consumer.db")) // import _ "modernc.org/sqlite"
	if err != nil {
		log.Fatal(err)
	}
	store, err := outboxsql.Open(db) // the database's pool and dialect
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

	handle := func(msg message) {
		err := txm.InTx(ctx, func(ctx context.Context) error {
			_, err := in.Process(ctx, msg.headers[relay.HeaderEventID], func(ctx context.Context) error {
				tx, _ := txm.Tx(ctx)
				_, err := tx.ExecContext(ctx, "INSERT INTO shipments (order_json) VALUES (?)", string(msg.data))
				return err
			})
			return err // a duplicate is no error: it commits nothing new
		})
		if err != nil {
			_ = msg.Nak() // redelivered later; nothing was applied
			return
		}
		_ = msg.Ack()
	}
	handle(message{headers: map[string]string{relay.HeaderEventID: "01J0000000000000000000000A"}, data: []byte(`{"order":"o-1"}`)})
}

// The outbox's PurgeScheduler forgets processed ids after a retention.
func ExampleInbox_Purger() {
	ctx := context.Background()
	var in *inbox.Inbox // inbox.New(…)
	purger, err := outbox.NewPurgeScheduler(outbox.PurgeConfig{
		Purger:    in.Purger(),
		Retention: 14 * 24 * time.Hour, // longer than any redelivery
		Interval:  time.Hour,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := purger.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = purger.Close(ctx) }()
}
