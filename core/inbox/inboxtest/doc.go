// Package inboxtest is the conformance suite of the consumer inbox
// (package inbox): every database, driver and transaction adapter runs it.
// It depends on the standard library and the outbox core only.
//
// A backend passes the factory of its [outboxtest.AdapterFixture] — a Store
// on a fresh table of the database, the adapter's TxContext and InTx, and
// business writes through the adapter — and the suite puts an inbox table
// next to that Store's table:
//
//	func TestInbox(t *testing.T) { inboxtest.RunSuite(t, newAdapterFixture) }
//
// outboxsqltest.RunAdapterSuites runs it for the adapters built on
// database/sql, on every backend.
package inboxtest
