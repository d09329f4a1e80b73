// Package outboxsqlx connects the outbox to sqlx: the outbox row is written
// in the very transaction that writes the business rows, and the outbox's
// after-commit callbacks (the dispatcher's hot path) run only once that
// transaction really commits.
//
// # Setup
//
// A *sqlx.Tx commits through database/sql, which tells nobody. Open the
// database with this package's Open, Connect or NewDb instead of sqlx's:
// they wrap the driver's connections so that every transaction reports its
// real commit or rollback, and its savepoints. The result is a plain
// *sqlx.DB. The outbox Store is outboxsql's, on the same database:
//
//	db, _ := outboxsqlx.Open("pgx", dsn) // instead of sqlx.Open
//	store, _ := outboxsql.Open(db.DB)
//	tc := outboxsqlx.New()
//	w, _ := outbox.NewWriter(outbox.WriterConfig{TxContext: tc, Store: store, Hook: d.Hook()})
//
// # Writing
//
// sqlx's transactions do not live in a context.Context, so the Writer is
// given the transaction explicitly: WithTx puts a *sqlx.Tx in a context.
// Transactions begun any way work — Beginx, MustBegin, BeginTxx,
// MustBeginTx — and are committed or rolled back with their own Commit and
// Rollback:
//
//	tx := db.MustBegin()
//	tx.MustExec(`INSERT INTO orders (id) VALUES ($1)`, id)
//	if _, err := w.Write(outboxsqlx.WithTx(ctx, tx), event); err != nil {
//		tx.Rollback()
//		return err
//	}
//	return tx.Commit() // the hot path delivers after this commit
//
// TxContext.InTx runs a function in a transaction and passes it a context
// already carrying it; called again with that context, it nests in a
// savepoint. InTx also works on a *sqlx.DB opened with sqlx itself: it then
// tracks the transactions it begins on its own.
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
