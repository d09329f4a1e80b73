// Package outboxsql binds the outbox to database/sql: [Open] returns the
// [Store] of the outbox table in a *sql.DB (PostgreSQL through lib/pq or
// pgx's stdlib, MySQL/MariaDB through go-sql-driver/mysql, SQLite through
// modernc.org/sqlite, the dialect detected from the driver), and
// [TxManager] carries a *sql.Tx in a context so that [outbox.Client.Write]
// finds it. The SQL itself lives in package [sqlstore], shared with the pgx
// adapter.
//
// The package imports no database driver:
//
//	db, _ := sql.Open("sqlite", outboxsql.SQLiteDSN("app.db")) // import _ "modernc.org/sqlite"
//	store, _ := outboxsql.Open(db)                             // dialect detected from the driver
//	_ = store.Migrate(ctx)                                     // CREATE TABLE / INDEX IF NOT EXISTS
//	txm := outboxsql.NewTxManager(db)                          // an outbox.TxContext
//	client, _ := outbox.New(outbox.Config{Store: store, TxContext: txm})
//
// Nested [TxManager.InTx] calls run in savepoints, as in GORM and bun: the
// events of a savepoint that is rolled back are never delivered. ORM and
// driver adapters built on database/sql return [NewTx] from their
// TxContext.
package outboxsql
