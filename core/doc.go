// Package outbox is a transactional outbox for Go.
//
// A business transaction writes its events into an outbox table in the same
// transaction (Writer). After the transaction commits, the events are
// delivered at least once to in-process listeners: at once through a hot path
// (a WriterHook that hands them to the Dispatcher), and safely through a
// Poller that claims whatever the hot path missed, on any number of
// instances. Failed deliveries are retried with backoff and end in DEAD after
// too many attempts, where DeadEvents can inspect and replay them. A
// PurgeScheduler deletes old terminal events.
//
// The package depends on the standard library only. Package outboxsql
// provides the database/sql Store for PostgreSQL, MySQL/MariaDB and SQLite
// and a TxContext for plain *sql.DB; adapters for GORM, bun and sqlx live in
// their own modules.
//
// # Guarantees
//
// An event is written if and only if its transaction commits. A committed
// event is delivered at least once, or ends in DEAD; it is never lost to a
// crash, a full queue, a slow listener or a database outage. Delivery can be
// repeated (after a crash or an expired claim), so listeners must be
// idempotent: deduplicate by Envelope.ID.
//
// # Claims and fencing
//
// Every delivery works on a claimed row: the hot path inserts its rows
// already claimed by the dispatcher's owner id, and the poller claims rows
// with an owner and a lease. Status updates only apply while the caller
// still holds the claim, so a worker whose lease expired and was taken over
// elsewhere changes nothing.
package outbox
