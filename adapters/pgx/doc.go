// Package outboxpgx binds the outbox to pgx v5 natively, with no
// database/sql in between: Open returns the Store of the outbox table in a
// *pgxpool.Pool, and TxManager carries a pgx transaction in a context so
// that outbox.Client.Write finds it. The SQL itself lives in package
// sqlstore, shared with the database/sql binding (package outboxsql).
//
// # Quick start
//
//	pool, err := pgxpool.New(ctx, "postgres://app@localhost:5432/app")
//	if err != nil { … }
//	defer pool.Close()
//	store, err := outboxpgx.Open(pool) // the outbox table "outbox_event"
//	if err != nil { … }
//	if err := store.Migrate(ctx); err != nil { … } // CREATE TABLE / INDEX IF NOT EXISTS
//	txm := outboxpgx.NewTxManager(pool)            // an outbox.TxContext
//	client, err := outbox.New(outbox.Config{Store: store, TxContext: txm})
//	if err != nil { … }
//	_ = client.Handle(outbox.EventName("OrderPlaced"), func(ctx context.Context, e outbox.Envelope) error {
//		return publish(ctx, e) // called after the commit, at least once
//	})
//	if err := client.Start(ctx); err != nil { … }
//	defer client.Close(ctx)
//
//	err = txm.InTx(ctx, func(ctx context.Context) error {
//		tx, _ := txm.Tx(ctx) // the same transaction, for the business rows
//		if _, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", "o-1"); err != nil {
//			return err
//		}
//		_, err := client.Write(ctx, outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithJSON(payload)))
//		return err
//	}) // nil: both rows committed, the event is delivered now; an error or a panic: neither row exists
//
// # Transactions
//
// InTx commits when its function returns nil and rolls back otherwise (or
// on a panic, which it re-raises). Called with a context that already
// carries a transaction of the same pool, it runs the function in a
// savepoint, as pgx's Tx.Begin does: if that function fails, its work and
// its events are rolled back, and the enclosing function decides whether
// the rest commits. After-commit callbacks (the hot path of the outbox)
// run once the outermost transaction has really committed.
//
// Business code reaches the transaction with TxManager.Tx. The savepoints
// it sets with that pgx.Tx's Begin (or SAVEPOINT statements through its
// Exec) are tracked as well: events written in a savepoint that is rolled
// back are never delivered. The transaction itself is ended by InTx only.
//
// # Writing many events
//
// Store.Insert writes batches of at least sqlstore.CopyThreshold events
// with PostgreSQL's COPY protocol (pgx's CopyFrom) and smaller ones with
// one multi-row INSERT. The COPY, like any INSERT of 32 events or more,
// runs in a savepoint of its own, so that an event id stored already fails
// the write with outbox.ErrDuplicateEvent and leaves the transaction
// usable, as the conflict clause of a smaller INSERT does.
//
// # Time
//
// Timestamps are written as instants (TIMESTAMPTZ) in UTC and read back in
// UTC: the session's TimeZone does not matter.
package outboxpgx
