package outboxtest

import (
	"context"

	outbox "github.com/go-outbox/outbox/core"
)

// Fixture is one backend under test: a Store on its own fresh, empty table
// and the transaction style of an adapter. Factories must return a new,
// isolated table on every call: the suites call them once per subtest and
// run some subtests in parallel.
type Fixture struct {
	// Store is the store under test. It owns its pool.
	Store outbox.Store
	// Purger deletes terminal events of the same table; nil skips the purge tests.
	Purger outbox.Purger
	// TxContext finds the transaction InTx carries in its context.
	TxContext outbox.TxContext
	// InTx runs fn in a transaction, the way the adapter's users do:
	// committed if fn returns nil, rolled back (and fn's error returned)
	// otherwise, rolled back and re-panicked if fn panics. Called with a
	// context that already carries a transaction, it must nest the way the
	// adapter nests (in a savepoint).
	InTx func(ctx context.Context, fn func(ctx context.Context) error) error
	// Table is the name of the store's table as written in SQL, and Exec
	// runs a statement without arguments on the store's database. The store
	// suite uses them to damage rows on purpose (corrupt headers); a nil
	// Exec skips those tests.
	Table string
	Exec  func(ctx context.Context, query string) error
}
