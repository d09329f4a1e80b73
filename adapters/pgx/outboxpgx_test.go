package outboxpgx_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	outboxpgx "github.com/go-outbox/outbox/adapters/pgx"
)

// TestMain fails the run if a goroutine outlives the tests: every pool is
// closed in the cleanup of the test that opened it, every Client is closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// session is one way of talking to the server.
type session struct {
	name      string
	configure func(c *pgxpool.Config)
}

// tokyo sets the session's TimeZone: a store that compared wall clocks, or
// read timestamps in the session's zone, would be nine hours off.
func tokyo(c *pgxpool.Config) {
	c.ConnConfig.RuntimeParams["timezone"] = outboxsqltest.SessionZone
}

var (
	defaultSession = session{name: "default"}
	tokyoSession   = session{name: "tokyo", configure: tokyo}
	// The simple protocol (as behind PgBouncer in transaction mode) sends
	// arguments and reads results as text, where the session's time zone
	// shows.
	simpleTokyoSession = session{name: "simple-protocol-tokyo", configure: func(c *pgxpool.Config) {
		tokyo(c)
		c.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	}}
	// Exec mode: the extended protocol without prepared statements.
	execSession = session{name: "exec-mode", configure: func(c *pgxpool.Config) {
		c.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}}
)

// newPool returns a pool on the test server in session s (see
// outboxpgx.OpenTestPool).
func newPool(t testing.TB, s session) *pgxpool.Pool {
	t.Helper()
	return outboxpgx.OpenTestPool(t, s.configure)
}

// exec runs a statement on pool, failing t if it fails.
func exec(t testing.TB, pool *pgxpool.Pool, query string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// newStore returns a migrated Store on a fresh table of pool, dropped at
// cleanup.
var newStore = outboxpgx.NewTestStore

// fixture returns the suites' fixture factory on pool: a fresh table per
// call, transactions of a TxManager nested in style st.
func fixture(pool *pgxpool.Pool, st style) func(t *testing.T) outboxtest.Fixture {
	return func(t *testing.T) outboxtest.Fixture { return newFixture(t, pool, st).Fixture }
}

func newFixture(t *testing.T, pool *pgxpool.Pool, st style) outboxtest.AdapterFixture {
	t.Helper()
	store := newStore(t, pool)
	txm := outboxpgx.NewTxManager(pool, outboxpgx.WithTxLogger(quietLogger))
	business := outboxsqltest.TableName("business_pgx")
	exec(t, pool, "CREATE TABLE "+business+" (name TEXT NOT NULL)")
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+business) })
	inTx := txm.InTx
	if st == styleBegin {
		inTx = beginStyle(txm)
	}
	execInTx := func(ctx context.Context, query string, args ...any) error {
		tx, ok := txm.Tx(ctx)
		if !ok {
			return errors.New("no transaction in the context")
		}
		_, err := tx.Exec(ctx, query, args...)
		return err
	}
	return outboxtest.AdapterFixture{
		Fixture: outboxtest.Fixture{
			Store: store, Purger: store, TxContext: txm, InTx: inTx, Table: store.Table(),
			Exec: func(ctx context.Context, query string) error { _, err := pool.Exec(ctx, query); return err },
		},
		InsertBusiness: func(ctx context.Context, name string) error {
			return execInTx(ctx, "INSERT INTO "+business+" (name) VALUES ($1)", name)
		},
		BusinessRows: func(t testing.TB) []string {
			t.Helper()
			rows, err := pool.Query(context.Background(), "SELECT name FROM "+business)
			if err != nil {
				t.Fatal(err)
			}
			names, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			return names
		},
		ExecBusiness:  func(ctx context.Context, query string) error { return execInTx(ctx, query) },
		FailCommitSQL: commitFailure(t, pool),
	}
}

// commitFailure creates a table with a deferred foreign key, dropped at
// cleanup, and returns a statement that makes the COMMIT of its
// transaction fail.
func commitFailure(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	table := outboxsqltest.TableName("deferred_pgx")
	exec(t, pool, "CREATE TABLE "+table+" (id INTEGER NOT NULL PRIMARY KEY, parent INTEGER REFERENCES "+
		table+" (id) DEFERRABLE INITIALLY DEFERRED)")
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })
	return "INSERT INTO " + table + " (id, parent) VALUES (1, 2)"
}

// style is how nested transactions are begun.
type style int

const (
	// styleInTx nests with TxManager.InTx.
	styleInTx style = iota
	// styleBegin nests with pgx's own API: Begin on the pgx.Tx of
	// TxManager.Tx, then Commit or Rollback.
	styleBegin
)

func (s style) String() string { return [...]string{"InTx", "TxBegin"}[s] }

// beginStyle returns an InTx that begins outermost transactions with txm
// and nests through pgx's Tx.Begin.
func beginStyle(txm *outboxpgx.TxManager) func(ctx context.Context, fn func(ctx context.Context) error) error {
	return func(ctx context.Context, fn func(ctx context.Context) error) error {
		tx, ok := txm.Tx(ctx)
		if !ok {
			return txm.InTx(ctx, fn)
		}
		sp, err := tx.Begin(ctx)
		if err != nil {
			return err
		}
		done := false
		defer func() {
			if !done {
				_ = sp.Rollback(ctx)
			}
		}()
		err = fn(ctx)
		done = true
		if err != nil {
			if rbErr := sp.Rollback(ctx); rbErr != nil {
				return errors.Join(err, rbErr)
			}
			return err
		}
		return sp.Commit(ctx)
	}
}

func TestStoreSuite(t *testing.T) {
	for _, s := range []session{defaultSession, tokyoSession, simpleTokyoSession, execSession} {
		t.Run(s.name, func(t *testing.T) {
			outboxtest.RunStoreSuite(t, fixture(newPool(t, s), styleInTx))
		})
	}
}

func TestTxContextSuite(t *testing.T) {
	for _, s := range []session{defaultSession, tokyoSession} {
		for _, st := range []style{styleInTx, styleBegin} {
			t.Run(s.name+"/"+st.String(), func(t *testing.T) {
				outboxtest.RunTxContextSuite(t, fixture(newPool(t, s), st))
			})
		}
	}
}

func TestAdapterSuite(t *testing.T) {
	for _, st := range []style{styleInTx, styleBegin} {
		t.Run(st.String(), func(t *testing.T) {
			pool := newPool(t, defaultSession)
			outboxtest.RunAdapterSuite(t, func(t *testing.T) outboxtest.AdapterFixture { return newFixture(t, pool, st) })
		})
	}
}

func TestEndToEndSuite(t *testing.T) {
	for _, s := range []session{defaultSession, tokyoSession} {
		t.Run(s.name, func(t *testing.T) {
			outboxtest.RunEndToEndSuite(t, fixture(newPool(t, s), styleInTx))
		})
	}
}

// TestSessionZone checks that the Tokyo sessions really run in Tokyo, so
// that the suites above test what they claim.
func TestSessionZone(t *testing.T) {
	for _, s := range []session{tokyoSession, simpleTokyoSession} {
		t.Run(s.name, func(t *testing.T) {
			var zone string
			if err := newPool(t, s).QueryRow(context.Background(), "SHOW TimeZone").Scan(&zone); err != nil {
				t.Fatal(err)
			}
			if zone != outboxsqltest.SessionZone {
				t.Fatalf("session TimeZone = %q, want %q", zone, outboxsqltest.SessionZone)
			}
		})
	}
}

// mustInTx runs fn in a transaction of txm, failing t on an error.
func mustInTx(t testing.TB, txm *outboxpgx.TxManager, fn func(ctx context.Context) error) {
	t.Helper()
	if err := txm.InTx(context.Background(), fn); err != nil {
		t.Fatalf("InTx: %v", err)
	}
}

// count returns the rows of table.
func count(t testing.TB, pool *pgxpool.Pool, table string) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), fmt.Sprintf("SELECT COUNT(*) FROM %s", table)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
