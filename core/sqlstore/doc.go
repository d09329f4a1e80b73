// Package sqlstore is the outbox [Store] and Purger for SQL databases —
// PostgreSQL, MySQL/MariaDB/TiDB and SQLite — independent of the driver API.
//
// It holds everything about the outbox table: the schema of every dialect
// ([Store.Migrate], [Store.Schema]), the statements (built once per Store), how
// timestamps are bound and read, the claim and purge queries, decoding rows
// into records. It runs them through two small interfaces: [DB], the pool the
// Store owns, and [Tx], the caller's transaction that [Store.Insert] writes in.
// Package outboxsql binds them to database/sql (and through it the GORM, bun
// and sqlx adapters); outboxpgx binds them to pgx with no database/sql in
// between. Most users never import this package directly.
//
// # Control tables
//
// Beside the outbox table the Store keeps the control tables of
// [outbox.Controls] — <table>_pauses, <table>_nodes and <table>_audit —
// which Migrate creates and Schema lists with the outbox table's DDL, and
// implements the operator's [outbox.Overrides] on the outbox table. The
// audit trail is kept: no purge deletes it. See docs/databases.md.
//
// # Dialects
//
// PostgreSQL, MySQL and SQLite are the Dialect values; the registry finds
// one by name (LookupDialect), by database/sql driver (DriverDialect) or by
// URL (ParseURL, ParseDSN, which also check what the store needs of the
// DSN). The adapters, outboxfx and the tools ask it rather than keep lists
// of databases.
//
// # Time
//
// Every timestamp is given by the caller (the outbox Clock) and converted
// to UTC by the application; the SQL never reads the database's clock or
// its session time zone. SQLite stores timestamps as INTEGER Unix
// microseconds; values read back are UTC with microsecond precision.
//
// # Concurrency
//
// A Store is safe for concurrent use. Claims are atomic: two pollers never
// claim the same row while its lease runs, and every status update is
// fenced by the owner that claimed the row.
//
// # Claims of some event types
//
// A claim with ClaimRequest.Types reads each type's due rows from a type
// index, in due order, and stops after its limit: the rows of other types
// that come first cost it nothing. Types and SkipTypes hold at most
// [MaxClaimTypes] types each; a claim with more fails with an error
// wrapping outbox.ErrInvalidConfig. See docs/databases.md.
package sqlstore
