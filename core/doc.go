// Package outbox is a transactional outbox for Go: events are written into
// an outbox table in the same database transaction as the business change
// they describe, and delivered to in-process listeners once that
// transaction has committed.
//
// # Quick start
//
// A [Client] is the front door. With database/sql and SQLite (package
// outboxsql; its Store works the same on PostgreSQL and MySQL/MariaDB):
//
//	db, err := sql.Open("sqlite", outboxsql.SQLiteDSN("app.db")) // import _ "modernc.org/sqlite"
//	store, err := outboxsql.Open(db) // the dialect is detected from the driver
//	err = store.Migrate(ctx)         // creates the outbox table if it does not exist
//	txm := outboxsql.NewTxManager(db)
//
//	client, err := outbox.New(outbox.Config{Store: store, TxContext: txm})
//	err = client.Handle(OrderPlaced, func(ctx context.Context, e outbox.Envelope) error {
//		return ship(ctx, e) // idempotent: deduplicate by e.ID()
//	})
//	err = client.Start(ctx)
//	defer client.Close(ctx)
//
//	err = txm.InTx(ctx, func(ctx context.Context) error {
//		tx, _ := txm.Tx(ctx) // the *sql.Tx for the business writes
//		if _, err := tx.ExecContext(ctx, "UPDATE orders SET placed = 1 WHERE id = ?", "o-42"); err != nil {
//			return err
//		}
//		_, err := client.Write(ctx, outbox.MustEnvelope(OrderPlaced,
//			outbox.WithAggregate(Order, "o-42"), outbox.WithJSONValue(order)))
//		return err
//	})
//
// Event and aggregate types are values with a Name method ([EventName] and
// [AggregateName] will do). [Client.Handle] routes an event type on any
// aggregate; [Client.Register] routes one (aggregate type, event type) pair
// and wins over Handle. [Client.Subscribe] gives an event type several
// named subscribers that retry independently: a failing one never runs the
// others again. [Client.Dead] lists and replays events that kept failing,
// [Client.Get] and [Client.Stats] inspect the table. A listener that is
// also a [BatchListener] (the broker sinks are) is handed the events queued
// together in one HandleBatch call, up to [Config.ListenerBatchSize], with
// an outcome per event.
//
// # Guarantees
//
// An event is stored if and only if its transaction commits: [Client.Write]
// runs in the caller's transaction (it fails with [ErrNoTransaction] outside
// one), and the events of a rolled-back savepoint are never delivered. A
// committed event is delivered at least once, or ends in DEAD after
// [Config.MaxAttempts] failed deliveries; a crash, a full queue, a slow
// listener or a database outage delays it but does not lose it. Delivery can
// repeat (after a crash, or a claim that expired while its listener ran), so
// listeners must be idempotent: deduplicate by [Envelope.ID].
//
// Right after commit the events go to this process's dispatcher (the hot
// path). Everything else — delayed events, retries, events of crashed
// instances — is claimed by pollers, which any number of instances run on
// one table. Every delivery works on a claimed row: the hot path inserts
// its rows already claimed by the Client's owner id, and pollers claim
// rows with an owner and a lease. Status updates are fenced by that claim,
// so a worker whose lease expired and was taken over elsewhere changes
// nothing.
//
// Backpressure never fails or blocks a write: when the hot queue is full,
// the event simply stays in the table for the poller. Events are delivered
// concurrently and retried independently, in no particular order — unless
// [Config.Ordered] is on.
//
// # Ordered delivery
//
// With [Config.Ordered], the events that share an ordering key (by default
// their aggregate type and id, see [Envelope.OrderingKey] and
// [WithOrderingKey]) are delivered one at a time, in the order they were
// written, on any number of instances: a listener never starts an event while
// an earlier event of its key is not DONE. Keys run in parallel; a failing
// event holds back its key only, and [Config.DeadPolicy] says what a DEAD one
// does (by default the key waits until it is replayed or skipped, see
// [DeadEvents.Skip] and [Stats.BlockedKeys]). "Earlier" is the order of
// insertion, which is the commit order when the transactions of one key are
// serialized, as they are when each updates its aggregate's row first. Every
// Client of a table must agree on Ordered.
//
// # Operations
//
// A Client claims only the event types it routes (every type with a
// catch-all [Client.HandleAll], or with [Config.ClaimAll]), so services
// with different routes share a table; an event type nobody routes stays
// pending and shows in [Stats.Unrouted]. An operator pauses an event type,
// or everything, on every instance with [Client.Pause] (stored in the
// database, obeyed within [Config.ControlInterval]); [Config.BreakerFailures]
// gives each route a circuit breaker that leaves its events pending, their
// attempts unused, while its downstream fails, probing it once per
// [Config.BreakerInterval]; [Config.Routes] limits a route's rate and
// concurrency across every instance; [Client.Health] reports it all.
// docs/operations.md says how each works.
//
// # Modes
//
// [Config.Mode] chooses what runs in a process:
//
//   - [ModeFull] (the default): writes, delivers its own events right after
//     commit, polls for the rest and purges old DONE and DEAD events;
//   - [ModeWriterOnly]: only writes; other processes (or a CDC pipeline)
//     deliver;
//   - [ModePollerOnly]: delivers what its poller claims, and purges; its
//     writes, if it has a TxContext, are left unclaimed for any poller;
//   - [ModeHotPathOnly]: writes and delivers its own events right after
//     commit, without a poller and without purging: retries, delayed
//     events and events the full hot queue refused wait for a poller in
//     another process.
//
// A Client assembles its parts (a writer, a dispatcher with its workers,
// a poller, a PurgeScheduler and DeadEvents) from its Config: they are not
// built one by one. docs/design.md maps the package for maintainers.
//
// # Configuration
//
// Config holds every knob of a Client; zero values are the defaults.
// Knobs describes each knob once (default, bounds, doc, environment
// variable): New refuses a value outside its bounds with an error that
// names the knob, Config.WithDefaults shows what a Config runs with, and
// Config.LoadEnv reads the knobs from the environment (OUTBOX_WORKERS=8),
// refusing a misspelt variable with the closest known name.
//
// # Packages
//
// This package depends on the standard library only. Around it:
//
//   - [github.com/go-outbox/outbox/core/outboxsql] binds the outbox to
//     database/sql: Open returns the Store of a *sql.DB, NewTxManager its
//     TxContext;
//   - [github.com/go-outbox/outbox/core/sqlstore] is the SQL engine behind
//     it (PostgreSQL, MySQL/MariaDB, SQLite), independent of the driver API;
//   - [github.com/go-outbox/outbox/core/outboxmem] is an outbox in memory,
//     for unit tests of listeners and for examples;
//   - [github.com/go-outbox/outbox/core/outboxtx] is the transaction
//     bookkeeping (savepoint-aware callbacks) shared by every TxContext;
//   - [github.com/go-outbox/outbox/core/outboxtest] holds the conformance
//     suites every Store and TxContext must pass;
//   - the adapters write in the transactions of an ORM or driver:
//     [github.com/go-outbox/outbox/adapters/gorm],
//     [github.com/go-outbox/outbox/adapters/bun],
//     [github.com/go-outbox/outbox/adapters/sqlx] and
//     [github.com/go-outbox/outbox/adapters/pgx] (pgx without database/sql);
//   - [github.com/go-outbox/outbox/fxmodule] wires the outbox into an
//     uber-go/fx application.
package outbox
