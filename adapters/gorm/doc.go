// Package outboxgorm connects the outbox to GORM: the outbox row is written
// in the very transaction that writes the business rows, and the outbox's
// after-commit callbacks (the Client's hot path) run only once that
// transaction really commits.
//
// # Setup
//
// Four calls, the same in every adapter, wire the outbox:
//
//	db, _ := gorm.Open(postgres.Open(dsn), &gorm.Config{})
//	tc, _ := outboxgorm.New(db)    // before any transaction begins
//	store, _ := outboxgorm.Open(db)
//	_ = store.Migrate(ctx)          // or Store.Schema in your migrations
//	client, _ := outbox.New(outbox.Config{Store: store, TxContext: tc})
//	_ = client.Handle(outbox.EventName("OrderPlaced"), notify)
//	_ = client.Start(ctx)
//	defer client.Close(ctx)
//
// New installs a GORM plugin that wraps the database's connection pool and returns the
// TxContext through which the Client finds GORM's transactions. Open
// returns the outbox Store: outboxsql's, on the *sql.DB under GORM, in the
// dialect of GORM's dialector; like outboxsql.Open it does not touch the
// database (create the table with Store.Migrate, or with Store.Schema in
// your migrations). outbox.New takes both.
//
// # Writing
//
// GORM's transactions do not live in a context.Context, so the Client is
// given the transaction explicitly: WithTx puts the *gorm.DB of a
// transaction in a context.
//
//	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
//		if err := tx.Create(&order).Error; err != nil {
//			return err
//		}
//		_, err := client.Write(outboxgorm.WithTx(ctx, tx), event)
//		return err
//	})
//
// Every way GORM runs a transaction works: db.Transaction, nested
// tx.Transaction, db.Begin with tx.Commit or tx.Rollback, tx.SavePoint and
// tx.RollbackTo, and prepared-statement mode. The row is written through
// the transaction's own connection (tx.Statement.ConnPool). Transaction is
// a shorthand that calls db.Transaction and passes the function a context
// already carrying the transaction.
//
// # When callbacks run
//
// GORM begins every transaction through its connection pool and commits it
// through the connection the pool returned; the plugin wraps both, so it
// sees each real COMMIT and ROLLBACK, and the SAVEPOINT and ROLLBACK TO
// statements of nested transactions. After-commit callbacks run after the
// outermost commit succeeded, once. A failed commit runs the
// after-rollback callbacks instead. A nested transaction that fails (GORM
// rolls back to its savepoint) takes its outbox rows with it, so the
// callbacks registered inside it turn into after-rollback callbacks at once,
// even if the outer transaction commits later: the hot path never delivers
// an event whose row was rolled back.
//
// # Not supported
//
//   - Transactions begun inside db.Connection: GORM hands them a *sql.Conn
//     that bypasses the plugin. Current reports it.
//   - Sessions derived from the *gorm.DB before New was called keep the
//     unwrapped pool; install the plugin right after gorm.Open.
//   - Savepoint statements sent as raw SQL through a prepared-statement
//     session (tx.Session(&gorm.Session{PrepareStmt: true}).Exec("SAVEPOINT
//     …")) are not seen; GORM's own SavePoint and RollbackTo are.
//
// # Schema
//
// The outbox table has no GORM model: a model must spell the DDL's partial
// indexes, collations and MySQL's generated columns in struct tags, under
// fixed index names (so for one table name only), and is a second
// definition of the table that drifts from the DDL. Store.Migrate creates it (safe at every
// start); for a migration tool, Store.Schema returns the statements and
// `outboxctl --db URL migrate` prints them without connecting.
package outboxgorm
