// Package integration runs the outbox conformance suites against real
// databases through their drivers. The backends are listed once, in
// outboxsqltest, for these suites and the ORM adapters alike.
package integration

import (
	"log/slog"
	"testing"

	outboxpgx "github.com/go-outbox/outbox/adapters/pgx"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
	"github.com/go-outbox/outbox/core/sqlstore"

	_ "modernc.org/sqlite"
)

// quietLogger drops the logs of callbacks that panic on purpose.
var quietLogger = slog.New(slog.DiscardHandler)

// newFixture returns a store on a fresh table of b, migrated, dropped at cleanup.
func newFixture(t *testing.T, b outboxsqltest.Backend) outboxtest.Fixture {
	t.Helper()
	db := b.Open(t)
	var opts []outboxsql.Option
	if b.Dialect == outboxsql.PostgreSQL { // database/sql cannot LISTEN: wake-ups are heard through pgx
		opts = append(opts, sqlstore.WithListener(outboxpgx.NewListener(b.DSN(t))))
	}
	store := b.NewStore(t, db, opts...)
	txm := outboxsql.NewTxManager(db, outboxsql.WithTxLogger(quietLogger))
	return outboxsqltest.Fixture(db, store, txm, txm.InTx)
}

func forEachBackend(t *testing.T, run func(t *testing.T, newFixture func(t *testing.T) outboxtest.Fixture)) {
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		run(t, func(t *testing.T) outboxtest.Fixture { return newFixture(t, b) })
	})
}

func TestStoreSuite(t *testing.T) {
	forEachBackend(t, outboxtest.RunStoreSuite)
}

func TestTxContextSuite(t *testing.T) {
	forEachBackend(t, outboxtest.RunTxContextSuite)
}

func TestEndToEndSuite(t *testing.T) {
	forEachBackend(t, outboxtest.RunEndToEndSuite)
}
