package outboxbun_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/schema"

	outboxbun "github.com/go-outbox/outbox/adapters/bun"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/lib/pq"
	_ "modernc.org/sqlite"
)

var (
	_ outbox.TxContext = (*outboxbun.TxContext)(nil)
	_ bun.QueryHook    = (*outboxbun.TxContext)(nil)
)

var quietLogger = slog.New(slog.DiscardHandler)

// dialect returns bun's dialect for b.
func dialect(t testing.TB, b outboxsqltest.Backend) schema.Dialect {
	t.Helper()
	switch b.Dialect.Name() {
	case "sqlite":
		return sqlitedialect.New()
	case "postgres":
		return pgdialect.New()
	case "mysql":
		return mysqldialect.New()
	}
	t.Fatalf("no bun dialect for dialect %q", b.Dialect.Name())
	return nil
}

// env is one test's bun database with the hook installed, an outbox store
// on a fresh table and a fresh business table.
type env struct {
	sqlDB    *sql.DB
	db       *bun.DB
	tc       *outboxbun.TxContext
	store    *outboxsql.Store
	business string
	failSQL  string
}

// order is the business model of the tests.
type order struct {
	bun.BaseModel `bun:"table:orders"`
	ID            int64  `bun:",pk,autoincrement"`
	Name          string `bun:",notnull"`
}

func newEnv(t *testing.T, b outboxsqltest.Backend) *env {
	t.Helper()
	sqlDB := b.Open(t)
	tc := outboxbun.New(outboxbun.WithLogger(quietLogger))
	db := bun.NewDB(sqlDB, dialect(t, b)).WithQueryHook(tc)
	store := b.NewStore(t, sqlDB)
	business := outboxsqltest.TableName("orders")
	ctx := context.Background()
	if _, err := db.NewCreateTable().Model((*order)(nil)).ModelTableExpr(business).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.NewDropTable().ModelTableExpr(business).IfExists().Exec(ctx) })
	return &env{sqlDB: sqlDB, db: db, tc: tc, store: store, business: business, failSQL: b.CommitFailure(t, sqlDB)}
}

// style is one way applications run bun transactions; inTx runs fn in a
// transaction of e.db the way that style does, nesting when ctx carries one.
type style struct {
	name string
	inTx func(e *env) func(ctx context.Context, fn func(ctx context.Context) error) error
}

var styles = []style{
	{"RunInTx", func(e *env) func(context.Context, func(context.Context) error) error {
		return func(ctx context.Context, fn func(context.Context) error) error {
			if outer, ok := outboxbun.FromContext(ctx); ok {
				return outer.RunInTx(ctx, nil, func(_ context.Context, sp bun.Tx) error { return fn(outboxbun.WithTx(ctx, sp)) })
			}
			return e.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error { return fn(outboxbun.WithTx(ctx, tx)) })
		}
	}},
	{"Helper", func(e *env) func(context.Context, func(context.Context) error) error {
		return func(ctx context.Context, fn func(context.Context) error) error {
			return e.tc.RunInTx(ctx, e.db, nil, func(ctx context.Context, _ bun.Tx) error { return fn(ctx) })
		}
	}},
	{"BeginTx", func(e *env) func(context.Context, func(context.Context) error) error {
		return func(ctx context.Context, fn func(context.Context) error) (err error) {
			var tx bun.Tx
			if outer, ok := outboxbun.FromContext(ctx); ok {
				if tx, err = outer.BeginTx(ctx, nil); err != nil { // a savepoint
					return err
				}
				ctx = outboxbun.WithTx(ctx, tx)
			} else if ctx, tx, err = e.tc.BeginTx(ctx, e.db, nil); err != nil {
				return err
			}
			ok := false
			defer func() {
				if !ok {
					_ = tx.Rollback()
				}
			}()
			if err = fn(ctx); err != nil {
				return err
			}
			ok = true
			return tx.Commit()
		}
	}},
}

func (e *env) fixture(s style) outboxtest.AdapterFixture {
	return outboxtest.AdapterFixture{
		Fixture:       outboxsqltest.Fixture(e.sqlDB, e.store, e.tc, s.inTx(e)),
		FailCommitSQL: e.failSQL,
		InsertBusiness: func(ctx context.Context, name string) error {
			tx, err := txOf(ctx)
			if err != nil {
				return err
			}
			_, err = tx.NewInsert().Model(&order{Name: name}).ModelTableExpr(e.business).Exec(ctx)
			return err
		},
		ExecBusiness: outboxsqltest.ExecIn(txOf),
		BusinessRows: func(t testing.TB) []string {
			var names []string
			if err := e.db.NewSelect().TableExpr(e.business).Column("name").OrderExpr("id").Scan(context.Background(), &names); err != nil {
				t.Fatal(err)
			}
			return names
		},
	}
}

// txOf returns the bun transaction ctx carries.
func txOf(ctx context.Context) (bun.Tx, error) {
	tx, ok := outboxbun.FromContext(ctx)
	if !ok {
		return bun.Tx{}, errors.New("no bun transaction in the context")
	}
	return tx, nil
}

func (s style) String() string { return s.name }

func TestSuites(t *testing.T) {
	outboxsqltest.RunAdapterSuites(t, styles, func(t *testing.T, b outboxsqltest.Backend, s style) outboxtest.AdapterFixture {
		return newEnv(t, b).fixture(s)
	})
}
