// Package outboxsqlx connects the outbox to sqlx: the outbox row is written
// in the very transaction that writes the business rows, and the outbox's
// after-commit callbacks (the Client's hot path) run only once that
// transaction really commits.
//
// # Setup
//
// A *sqlx.Tx commits through database/sql, which tells nobody. Open the
// database with this package's OpenDB, Connect or NewDb instead of sqlx's
// Open, Connect or NewDb: they wrap the driver's connections so that every
// transaction reports its real commit or rollback, and its savepoints. The
// result is a plain *sqlx.DB. Open returns the outbox Store, outboxsql's,
// on the same database; like outboxsql.Open (Open always means "the Store
// of this database" in the outbox's packages), it does not touch the
// database, and the Store's Migrate creates the table:
//
//	db, _ := outboxsqlx.OpenDB("pgx", dsn) // instead of sqlx.Open
//	store, _ := outboxsqlx.Open(db)
//	_ = store.Migrate(ctx)
//	client, _ := outbox.New(outbox.Config{Store: store, TxContext: outboxsqlx.New()})
//	_ = client.Handle(outbox.EventName("OrderPlaced"), notify)
//	_ = client.Start(ctx)
//	defer client.Close(ctx)
//
// # Writing
//
// sqlx's transactions do not live in a context.Context, so the Client is
// given the transaction explicitly: WithTx puts a *sqlx.Tx in a context.
// Transactions begun any way work — Beginx, MustBegin, BeginTxx,
// MustBeginTx — and are committed or rolled back with their own Commit and
// Rollback:
//
//	tx := db.MustBegin()
//	tx.MustExec(`INSERT INTO orders (id) VALUES ($1)`, id)
//	if _, err := client.Write(outboxsqlx.WithTx(ctx, tx), event); err != nil {
//		tx.Rollback()
//		return err
//	}
//	return tx.Commit() // the hot path delivers after this commit
//
// NewTxManager(db).InTx(ctx, fn) runs fn in a transaction and passes it a
// context already carrying it (FromContext returns the *sqlx.Tx), the InTx
// of outboxsql's and outboxpgx's TxManager; called again with that
// context, it nests in a savepoint, which a failing nested function rolls
// back alone. InTx also works on a *sqlx.DB opened with sqlx itself: it
// then tracks the transactions it begins on its own. The TxManager is a
// TxContext too.
//
// The outbox row is written through the transaction's embedded *sql.Tx.
//
// # When callbacks run
//
// After-commit callbacks run after the commit succeeded, once; a failed
// commit runs the after-rollback callbacks instead. Savepoints set and
// rolled back in the transaction (SAVEPOINT, ROLLBACK TO SAVEPOINT, RELEASE
// SAVEPOINT, whether run by InTx or by the application) are tracked: a
// savepoint that rolls back takes its outbox rows with it, so the callbacks
// registered after it turn into after-rollback callbacks at once, even if
// the transaction commits later. The hot path never delivers an event whose
// row was rolled back.
//
// # Not supported
//
//   - Beginx and WithTx on a database opened with sqlx.Open, sqlx.Connect or
//     sqlx.NewDb over an existing *sql.DB: nothing reports its commits.
//     Current reports it; use InTx there, or open the database with this
//     package.
//   - Savepoint statements run through prepared statements (tx.Preparex) are
//     not seen.
//   - Code that reaches the driver's connection with sql.Conn.Raw gets the
//     wrapper; its Unwrap method returns the driver's connection.
package outboxsqlx
