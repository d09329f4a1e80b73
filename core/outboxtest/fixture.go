package outboxtest

import (
	"context"

	outbox "github.com/go-outbox/outbox/core"
)

// Fixture is one backend under test: a Store on its own fresh, empty table,
// the pool it lives in, and the transaction style of an adapter. Factories
// must return a new, isolated table on every call: the suites call them
// once per subtest and run subtests in parallel.
type Fixture struct {
	// Store is the store under test.
	Store outbox.Store
	// Purger deletes terminal events of the same table; nil skips the purge tests.
	Purger outbox.Purger
	// DB is the pool (for example a *sql.DB) the store's table lives in.
	DB outbox.Executor
	// TxContext finds the transaction InTx carries in its context.
	TxContext outbox.TxContext
	// InTx runs fn in a transaction, the way the adapter's users do:
	// committed if fn returns nil, rolled back (and fn's error returned)
	// otherwise, rolled back and re-panicked if fn panics. Called with a
	// context that already carries a transaction, it must nest the way the
	// adapter nests (join the transaction or use a savepoint).
	InTx func(ctx context.Context, fn func(ctx context.Context) error) error
	// Table is the name of the store's table as written in SQL. The store
	// suite uses it with DB to damage rows on purpose (corrupt headers);
	// empty skips those tests.
	Table string
}

// Backend returns the fixture as the end-to-end suite's Backend.
func (f Fixture) Backend() Backend {
	return Backend{Store: f.Store, DB: f.DB, TxContext: f.TxContext, InTx: f.InTx}
}
