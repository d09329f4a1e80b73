// Package outboxsql stores outbox events in a SQL database through
// database/sql: a Store and Purger for the outbox table, the table's schema
// for every supported dialect, dialect detection from a *sql.DB, and a
// TxManager that carries a *sql.Tx in a context for the outbox Writer.
//
// The package imports no database driver. Open a *sql.DB with the driver of
// your choice, then build a Store for it:
//
//	db, _ := sql.Open("sqlite", outboxsql.SQLiteDSN("app.db"))
//	store, _ := outboxsql.Open(db)            // dialect detected from the driver
//	_ = store.Migrate(ctx, db)                // CREATE TABLE / INDEX IF NOT EXISTS
//	txm := outboxsql.NewTxManager(db)         // an outbox.TxContext
//
// # Dialects
//
// A Dialect owns everything that differs between databases: placeholders,
// DDL, how timestamps are bound and scanned, the claim and the purge
// statements. SQLite is supported today (through modernc.org/sqlite, or any
// driver that passes a Dialect explicitly).
//
// # Time
//
// Every timestamp is given by the caller (the outbox Clock) and converted to
// UTC by the application; the SQL never reads the database's clock or its
// session time zone. SQLite stores timestamps as INTEGER Unix microseconds,
// which sort and compare correctly; values read back are UTC and have
// microsecond precision.
//
// # Concurrency
//
// A Store is safe for concurrent use. Claims are atomic: two pollers never
// claim the same row while its lease runs, and every status update is fenced
// by the owner that claimed the row.
package outboxsql
