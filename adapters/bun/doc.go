// Package outboxbun connects the outbox to bun: the outbox row is written in
// the very transaction that writes the business rows, and the outbox's
// after-commit callbacks (the Client's hot path) run only once that
// transaction really commits.
//
// # Setup
//
// TxContext is a bun query hook: install it on the database, then give it
// to the outbox Client. Open returns the outbox Store: outboxsql's, on the
// *sql.DB under bun, in the dialect of bun's. Like outboxsql.Open, it does
// not touch the database; the Store's Migrate creates the table (or run
// Store.Schema in your own migrations).
//
//	tc := outboxbun.New()
//	db := bun.NewDB(sqlDB, pgdialect.New()).WithQueryHook(tc)
//	store, _ := outboxbun.Open(db)
//	_ = store.Migrate(ctx)
//	client, _ := outbox.New(outbox.Config{Store: store, TxContext: tc})
//	_ = client.Handle(outbox.EventName("OrderPlaced"), notify)
//	_ = client.Start(ctx)
//	defer client.Close(ctx)
//
// # Writing
//
// bun keeps a context for each transaction and passes it to the function of
// db.RunInTx; the hook attaches the transaction's bookkeeping to it when
// bun reports BEGIN. The Client also needs the bun.Tx, which WithTx adds:
//
//	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
//		if _, err := tx.NewInsert().Model(&order).Exec(ctx); err != nil {
//			return err
//		}
//		_, err := client.Write(outboxbun.WithTx(ctx, tx), event)
//		return err
//	})
//
// Nested transactions are bun's own: tx.RunInTx, or tx.BeginTx with the
// savepoint's Commit and Rollback, given the transaction's context.
// TxContext.RunInTx is a shorthand that calls bun's RunInTx (nesting when
// the context already carries a transaction of the same database) and
// passes the function a context already carrying the transaction.
//
// The outbox row is written through the transaction's *sql.Tx, which
// bun.Tx embeds: bun.Tx's own Exec methods format "?" arguments into the SQL
// text themselves and would not bind the Store's driver placeholders
// (such as PostgreSQL's $1).
//
// # When callbacks run
//
// bun reports BEGIN, COMMIT and ROLLBACK of every transaction, and the
// SAVEPOINT, RELEASE SAVEPOINT and ROLLBACK TO SAVEPOINT statements of its
// nested transactions, to query hooks. After-commit callbacks run after the
// outermost COMMIT succeeded, once; a failed COMMIT runs the after-rollback
// callbacks instead. A nested transaction that rolls back takes its outbox
// rows with it, so the callbacks registered inside it turn into
// after-rollback callbacks at once, even if the outer transaction commits
// later: the hot path never delivers an event whose row was rolled back.
//
// # Not supported
//
//   - db.BeginTx (and db.Begin) used directly: bun keeps the new
//     transaction's context private, and the outbox needs it. Begin with
//     TxContext.BeginTx instead, which returns that context; commit and roll
//     back with bun's own methods. Current reports a context that does not
//     come from a transaction the hook saw begin.
//   - Using the context of one transaction with another transaction: Current
//     reports the mismatch.
//
// # Schema
//
// The outbox table has no bun model: bun's struct tags cannot state its
// partial indexes, CHECK constraint, collations and generated columns, and
// a second definition of the table would drift from the DDL.
// Store.Migrate creates it (safe at every start); for a migration tool,
// Store.Schema returns the statements and `outboxctl --db URL migrate`
// prints them without connecting.
package outboxbun
