package outboxsqlx_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
	"github.com/jmoiron/sqlx"

	outboxsqlx "github.com/go-outbox/outbox/adapters/sqlx"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/lib/pq"
	_ "modernc.org/sqlite"
)

var _ outbox.TxContext = (*outboxsqlx.TxContext)(nil)

var quietLogger = slog.New(slog.DiscardHandler)

// openTracked returns a database of b opened through outboxsqlx: a fresh
// SQLite file, or one pool per server shared by the test binary.
func openTracked(t *testing.T, b outboxsqltest.Backend) *sqlx.DB {
	t.Helper()
	return outboxsqltest.Shared(t, b, "outboxsqlx", func(dsn string) (*sqlx.DB, error) {
		return outboxsqlx.OpenDB(b.DriverName, dsn, outboxsqlx.WithLogger(quietLogger))
	})
}

// env is one test's database, an outbox store on a fresh table and a fresh
// business table.
type env struct {
	db       *sqlx.DB // opened through outboxsqlx
	plain    *sqlx.DB // the same database through the plain driver
	tc       *outboxsqlx.TxContext
	store    *outboxsql.Store
	business string
	failSQL  string
}

func newEnv(t *testing.T, b outboxsqltest.Backend) *env {
	t.Helper()
	db := openTracked(t, b)
	var plain *sqlx.DB
	if b.IsServer() {
		plain = sqlx.NewDb(b.Open(t), b.DriverName)
	} else {
		// The same SQLite file through the plain driver.
		sqlDB, err := sql.Open(b.DriverName, dbFileDSN(t, db))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sqlDB.Close() })
		plain = sqlx.NewDb(sqlDB, b.DriverName)
	}
	store := b.NewStore(t, db.DB)
	business := outboxsqltest.TableName("orders")
	ctx := context.Background()
	ddl := "CREATE TABLE " + business + " (id INTEGER NOT NULL PRIMARY KEY, name VARCHAR(64) NOT NULL)"
	if _, err := db.ExecContext(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(ctx, "DROP TABLE IF EXISTS "+business) })
	return &env{db: db, plain: plain, tc: outboxsqlx.New(outboxsqlx.WithLogger(quietLogger)), store: store, business: business,
		failSQL: b.CommitFailure(t, db.DB)}
}

// dbFileDSN returns the DSN of the SQLite file db uses.
func dbFileDSN(t *testing.T, db *sqlx.DB) string {
	t.Helper()
	var file string
	if err := db.QueryRowContext(context.Background(), "SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&file); err != nil {
		t.Fatal(err)
	}
	return "file:" + file + "?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_txlock=immediate"
}

// style is one way applications run sqlx transactions; inTx runs fn in a
// transaction the way that style does, nesting when ctx carries one.
type style struct {
	name string
	inTx func(e *env) func(ctx context.Context, fn func(ctx context.Context) error) error
}

var styles = []style{
	{"Beginx", func(e *env) func(context.Context, func(context.Context) error) error { return beginx(e.db) }},
	{"InTx", func(e *env) func(context.Context, func(context.Context) error) error {
		return func(ctx context.Context, fn func(context.Context) error) error {
			return outboxsqlx.NewTxManager(e.db, outboxsqlx.WithLogger(quietLogger)).InTx(ctx, fn)
		}
	}},
	{"InTxPlainDB", func(e *env) func(context.Context, func(context.Context) error) error {
		return func(ctx context.Context, fn func(context.Context) error) error {
			return outboxsqlx.NewTxManager(e.plain, outboxsqlx.WithLogger(quietLogger)).InTx(ctx, fn)
		}
	}},
}

var savepoints atomic.Int64

// beginx runs fn between sqlx's own MustBegin and tx.Commit (or
// tx.Rollback), nesting with SAVEPOINT, ROLLBACK TO and RELEASE.
func beginx(db *sqlx.DB) func(ctx context.Context, fn func(context.Context) error) error {
	return func(ctx context.Context, fn func(context.Context) error) (err error) {
		if outer, ok := outboxsqlx.FromContext(ctx); ok {
			name := fmt.Sprintf("sp%d", savepoints.Add(1))
			if _, err := outer.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
				return err
			}
			ok := false
			defer func() {
				if !ok {
					_, _ = outer.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+name)
				}
			}()
			if err = fn(ctx); err != nil {
				return err
			}
			ok = true
			_, err = outer.ExecContext(ctx, "RELEASE SAVEPOINT "+name)
			return err
		}
		tx := db.MustBeginTx(ctx, nil)
		ok := false
		defer func() {
			if !ok {
				_ = tx.Rollback()
			}
		}()
		if err = fn(outboxsqlx.WithTx(ctx, tx)); err != nil {
			return err
		}
		ok = true
		return tx.Commit()
	}
}

func (e *env) fixture(s style) outboxtest.AdapterFixture {
	var ids atomic.Int64
	return outboxtest.AdapterFixture{
		Fixture:       outboxsqltest.Fixture(e.db.DB, e.store, e.tc, s.inTx(e)),
		FailCommitSQL: e.failSQL,
		InsertBusiness: func(ctx context.Context, name string) error {
			tx, err := txOf(ctx)
			if err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, tx.Rebind("INSERT INTO "+e.business+" (id, name) VALUES (?, ?)"), ids.Add(1), name)
			return err
		},
		ExecBusiness: outboxsqltest.ExecIn(txOf),
		BusinessRows: func(t testing.TB) []string {
			var names []string
			if err := e.db.SelectContext(context.Background(), &names, "SELECT name FROM "+e.business+" ORDER BY id"); err != nil {
				t.Fatal(err)
			}
			return names
		},
	}
}

// txOf returns the sqlx transaction ctx carries.
func txOf(ctx context.Context) (*sqlx.Tx, error) {
	tx, ok := outboxsqlx.FromContext(ctx)
	if !ok {
		return nil, errors.New("no sqlx transaction in the context")
	}
	return tx, nil
}

func (s style) String() string { return s.name }

func TestSuites(t *testing.T) {
	outboxsqltest.RunAdapterSuites(t, styles, func(t *testing.T, b outboxsqltest.Backend, s style) outboxtest.AdapterFixture {
		return newEnv(t, b).fixture(s)
	})
}
