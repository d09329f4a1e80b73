package outboxsqltest

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/idempotency/idempotencytest"
	"github.com/go-outbox/outbox/core/inbox/inboxtest"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxtest"
)

// Fixture returns the test fixture of store, a Store on db, written through
// the TxContext tc whose transactions inTx runs.
func Fixture(db *sql.DB, store *outboxsql.Store, tc outbox.TxContext, inTx func(ctx context.Context, fn func(ctx context.Context) error) error) outboxtest.Fixture {
	return outboxtest.Fixture{
		Store: store, Purger: store, TxContext: tc, InTx: inTx, Table: store.Table(),
		Exec: func(ctx context.Context, query string) error { _, err := db.ExecContext(ctx, query); return err },
	}
}

// RunAdapterSuites runs the suites every ORM adapter passes, on every
// backend: the TxContext suite and the adapter suite once per transaction
// style of the adapter (the ways its users begin, nest, commit and roll
// back), and the end-to-end suite, the consumer inbox's suite (inboxtest)
// and the idempotency keys' suite (idempotencytest) with the first style. A style's String names its subtests;
// newFixture returns a fixture of backend b in style s.
func RunAdapterSuites[S fmt.Stringer](t *testing.T, styles []S, newFixture func(t *testing.T, b Backend, s S) outboxtest.AdapterFixture) {
	t.Helper()
	perStyle := func(t *testing.T, run func(t *testing.T, nf func(t *testing.T) outboxtest.AdapterFixture)) {
		Run(t, func(t *testing.T, b Backend) {
			for _, s := range styles {
				t.Run(s.String(), func(t *testing.T) {
					run(t, func(t *testing.T) outboxtest.AdapterFixture { return newFixture(t, b, s) })
				})
			}
		})
	}
	t.Run("TxContextSuite", func(t *testing.T) {
		perStyle(t, func(t *testing.T, nf func(t *testing.T) outboxtest.AdapterFixture) {
			outboxtest.RunTxContextSuite(t, func(t *testing.T) outboxtest.Fixture { return nf(t).Fixture })
		})
	})
	t.Run("AdapterSuite", func(t *testing.T) { perStyle(t, outboxtest.RunAdapterSuite) })
	t.Run("EndToEndSuite", func(t *testing.T) {
		Run(t, func(t *testing.T, b Backend) {
			outboxtest.RunEndToEndSuite(t, func(t *testing.T) outboxtest.Fixture { return newFixture(t, b, styles[0]).Fixture })
		})
	})
	t.Run("InboxSuite", func(t *testing.T) {
		Run(t, func(t *testing.T, b Backend) {
			inboxtest.RunSuite(t, func(t *testing.T) outboxtest.AdapterFixture { return newFixture(t, b, styles[0]) })
		})
	})
	t.Run("IdempotencySuite", func(t *testing.T) {
		Run(t, func(t *testing.T, b Backend) {
			idempotencytest.RunSuite(t, func(t *testing.T) outboxtest.AdapterFixture { return newFixture(t, b, styles[0]) })
		})
	})
}

// ExecIn returns the ExecBusiness of an outboxtest.AdapterFixture for an
// ORM whose transactions run statements like database/sql: it runs the
// statement in the transaction txOf finds in ctx.
func ExecIn[T outboxsql.Executor](txOf func(ctx context.Context) (T, error)) func(ctx context.Context, query string) error {
	return func(ctx context.Context, query string) error {
		tx, err := txOf(ctx)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, query)
		return err
	}
}

// OpenWith returns the Store that open, an adapter's Open on db (a
// database of b), returns for a fresh table, whose name it passes with
// outboxsql.WithTable. It fails t unless the Store has b's dialect and that
// table. The table and its control tables are dropped at cleanup; the
// Store is not migrated.
func (b Backend) OpenWith(t *testing.T, db *sql.DB, open func(opts ...outboxsql.Option) (*outboxsql.Store, error)) *outboxsql.Store {
	t.Helper()
	table := TableName("outbox_open")
	store, err := open(outboxsql.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { DropTables(db, store) })
	if store.Dialect() != b.Dialect || store.Table() != table {
		t.Fatalf("Open: dialect %v, table %q; want %v, %q", store.Dialect(), store.Table(), b.Dialect, table)
	}
	return store
}

// Insert writes events with store in one transaction of db, run by
// outboxsql's TxManager, and fails t unless it commits: rows for a test
// that reads the table another way (through an ORM's model, say).
func Insert(t testing.TB, db *sql.DB, store outbox.Store, events ...outbox.Envelope) {
	t.Helper()
	InsertAt(t, db, store, time.Now(), "", events...)
}

// InsertAt is Insert at now, the rows claimed by owner ("": unclaimed).
func InsertAt(t testing.TB, db *sql.DB, store outbox.Store, now time.Time, owner string, events ...outbox.Envelope) {
	t.Helper()
	txm := outboxsql.NewTxManager(db)
	err := txm.InTx(context.Background(), func(ctx context.Context) error {
		tx, err := txm.Current(ctx)
		if err != nil {
			return err
		}
		return store.Insert(ctx, tx, now, owner, events)
	})
	if err != nil {
		t.Fatalf("insert %d events: %v", len(events), err)
	}
}
