// Package idempotencytest is the conformance suite of the idempotency keys
// (package idempotency): every database, driver and transaction adapter
// runs it. It depends on the standard library and the outbox core only.
//
// A backend passes the factory of its [outboxtest.AdapterFixture] — a Store
// on a fresh table of the database, the adapter's TxContext and InTx, and
// business writes through the adapter — and the suite puts an
// idempotency table next to that Store's table:
//
//	func TestIdempotency(t *testing.T) { idempotencytest.RunSuite(t, newAdapterFixture) }
package idempotencytest
