// Package inbox is the consumer side of the outbox: an inbox table that
// turns the at-least-once delivery of a broker (or of the outbox itself)
// into an effect applied exactly once.
//
// A consumer processes each message in a transaction of its own database.
// [Inbox.Process] records the event id in the inbox table in that transaction
// and runs the consumer's function in it: the changes and the record commit
// together, and a redelivery of the id finds the record and changes nothing.
// The table is on PostgreSQL, MySQL/MariaDB or SQLite, reached through
// database/sql (outboxsql) or an adapter (GORM, bun, sqlx, pgx); the package
// depends on the standard library only.
//
// # Quick start
//
// With database/sql and the transactions of outboxsql.TxManager (with an
// adapter, pass its Store and TxContext instead):
//
//	store, _ := outboxsql.Open(db)   // the database: pool and dialect
//	txm := outboxsql.NewTxManager(db) // the consumer's transactions
//	in, _ := inbox.New(inbox.Config{Store: store, TxContext: txm})
//	_ = in.Migrate(ctx) // CREATE TABLE IF NOT EXISTS outbox_inbox …
//
//	// For every message (NATS, RabbitMQ, Kafka, an outbox listener):
//	err := txm.InTx(ctx, func(ctx context.Context) error {
//		dup, err := in.Process(ctx, msg.Header.Get(relay.HeaderEventID), func(ctx context.Context) error {
//			tx, _ := txm.Tx(ctx)
//			_, err := tx.ExecContext(ctx, "UPDATE stock SET reserved = reserved + ? WHERE sku = ?", qty, sku)
//			return err
//		})
//		if dup {
//			log.Println("applied before; nothing to do")
//		}
//		return err
//	})
//	if err == nil {
//		_ = msg.Ack() // acknowledge only after the commit
//	}
//
// Acknowledge a message after its transaction commits: a crash in between
// redelivers it, and the inbox drops the redelivery. The event id is the
// relay.HeaderEventID header the sinks of this repository set on every
// message (also AMQP's message-id, and NATS's Nats-Msg-Id when the sink
// does not sign); the outbox [outbox.Envelope.ID] in an outbox listener.
//
// # Forged messages
//
// Anyone who may publish on the broker can send a message with an
// upcoming event's id, which the inbox would record first, making the
// real event a duplicate. Give the sinks a SigningKey and the inbox the
// same key in Config.VerifyKeys, and process messages with
// [Inbox.ProcessMessage], which records an id only for a message whose signature
// verifies: a forged message fails with [relay.ErrSignature] and records
// nothing.
//
// # Retention
//
// Ids are kept until they are purged: [Inbox.Purge] deletes those processed
// before a cutoff, and [Inbox.Purger] hands the inbox to the outbox's
// PurgeScheduler, which does it after a retention, at an interval. A redelivery
// of a purged id is applied again, so the retention must outlast every
// redelivery: the broker's (messages waiting unacknowledged, replays of a
// stream) and the outbox's (retries, replays of DEAD events).
package inbox
