// Package outboxmem is an outbox that lives in memory: a Store, Purger and
// TxContext in one value, with transactions of its own. It is meant for
// unit tests of listeners and of code that writes events, and for runnable
// examples; nothing survives the process, so it is no place for production
// events.
//
//	store := outboxmem.New()
//	client, _ := outbox.New(outbox.Config{Store: store, TxContext: store})
//	_ = client.Handle(OrderPlaced, shipOrder)
//	_ = client.Start(ctx)
//	defer client.Close(ctx)
//
//	err := store.InTx(ctx, func(ctx context.Context) error {
//		_, err := client.Write(ctx, event) // staged until the commit
//		return err
//	})
//
// [Store.InTx] behaves like a database transaction under the outbox's
// transaction contract: events written in it become visible all at once when it
// commits, and are discarded when it rolls back. A nested InTx runs in a
// savepoint: if its function fails, only the events written inside it are
// discarded, and they are never delivered; the enclosing function decides
// whether the outer transaction still commits. After-commit callbacks (the
// client's hot path) run only after the outermost commit. The bookkeeping is
// package outboxtx's Scope, the one every adapter uses.
//
// Every other method follows the semantics of the SQL stores (package
// sqlstore): claims with an owner and a lease, status updates fenced by
// the claim's owner, due order by (available_at, id), error text truncated
// with [outbox.TruncateError], timestamps kept in UTC at microsecond
// precision, purging of DONE and DEAD events by completion time, the
// control tables of [outbox.Controls] (pauses, nodes, an audit trail that
// no purge deletes) and the operator's [outbox.Overrides]. Records are
// returned as copies. A Store is safe for concurrent use.
//
// The package depends on the standard library only.
package outboxmem
