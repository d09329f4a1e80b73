// Package outboxtest holds conformance suites that every outbox backend and
// every transaction adapter must pass, and helpers for tests of code that
// uses the outbox. It depends on the standard library only.
//
// A backend provides one factory returning a [Fixture] (a Store on a fresh,
// empty table plus its transaction style) and runs every suite with one call
// each:
//
//	func TestStore(t *testing.T)     { outboxtest.RunStoreSuite(t, newFixture) }
//	func TestTxContext(t *testing.T) { outboxtest.RunTxContextSuite(t, newFixture) }
//	func TestEndToEnd(t *testing.T) {
//		outboxtest.RunEndToEndSuite(t, newFixture)
//	}
//
// The suites use explicit timestamps in a non-UTC location, never sleeps,
// and count deliveries and claims per event id so that duplicates are
// reported rather than hidden.
package outboxtest
