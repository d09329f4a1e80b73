package outboxgorm_test

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
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	outboxgorm "github.com/go-outbox/outbox/adapters/gorm"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/lib/pq"
	_ "modernc.org/sqlite"
)

var _ outbox.TxContext = (*outboxgorm.TxContext)(nil)

var quietLogger = slog.New(slog.DiscardHandler)

// dialector returns the official GORM dialector of b over the open pool db.
func dialector(t testing.TB, b outboxsqltest.Backend, db *sql.DB) gorm.Dialector {
	t.Helper()
	switch b.Dialect.Name() {
	case "sqlite":
		return sqlite.Dialector{DriverName: b.DriverName, Conn: db}
	case "postgres":
		return postgres.New(postgres.Config{DriverName: b.DriverName, Conn: db})
	case "mysql":
		return mysql.New(mysql.Config{Conn: db})
	}
	t.Fatalf("no GORM dialector for dialect %q", b.Dialect.Name())
	return nil
}

// env is one test's GORM database with the plugin installed, an outbox
// store on a fresh table and a fresh business table.
type env struct {
	sqlDB    *sql.DB
	db       *gorm.DB
	tc       *outboxgorm.TxContext
	store    *outboxsql.Store
	business string // the business table
	failSQL  string // see outboxtest.AdapterFixture.FailCommitSQL
}

// order is the business model of the tests.
type order struct {
	ID   uint   `gorm:"primaryKey"`
	Name string `gorm:"size:64"`
}

func newEnv(t *testing.T, b outboxsqltest.Backend, cfg *gorm.Config) *env {
	t.Helper()
	sqlDB := b.Open(t)
	if cfg == nil {
		cfg = &gorm.Config{}
	}
	cfg.Logger = logger.Default.LogMode(logger.Silent)
	db, err := gorm.Open(dialector(t, b, sqlDB), cfg)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := outboxgorm.New(db, outboxgorm.WithLogger(quietLogger))
	if err != nil {
		t.Fatal(err)
	}
	store := b.NewStore(t, sqlDB)
	business := outboxsqltest.TableName("orders")
	if err := db.Table(business).AutoMigrate(&order{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Migrator().DropTable(business) })
	return &env{sqlDB: sqlDB, db: db, tc: tc, store: store, business: business, failSQL: b.CommitFailure(t, sqlDB)}
}

// style is one way applications run GORM transactions; inTx runs fn in a
// transaction of e.db the way that style does, nesting when ctx carries one.
type style struct {
	name string
	inTx func(e *env) func(ctx context.Context, fn func(ctx context.Context) error) error
	// config returns the gorm.Config of the style's database (nil: default).
	config func() *gorm.Config
}

var styles = []style{
	{"Transaction", func(e *env) func(context.Context, func(context.Context) error) error {
		return gormTransaction(e.db)
	}, nil},
	{"Helper", func(e *env) func(context.Context, func(context.Context) error) error {
		return func(ctx context.Context, fn func(context.Context) error) error {
			return outboxgorm.Transaction(ctx, e.db, func(ctx context.Context, _ *gorm.DB) error { return fn(ctx) })
		}
	}, nil},
	{"BeginCommit", func(e *env) func(context.Context, func(context.Context) error) error {
		return beginCommit(e.db)
	}, nil},
	{"PreparedStatements", func(e *env) func(context.Context, func(context.Context) error) error {
		return gormTransaction(e.db)
	}, func() *gorm.Config { return &gorm.Config{PrepareStmt: true} }},
}

// gormTransaction runs fn in GORM's own db.Transaction, nesting with
// tx.Transaction when ctx carries a transaction.
func gormTransaction(db *gorm.DB) func(ctx context.Context, fn func(context.Context) error) error {
	return func(ctx context.Context, fn func(context.Context) error) error {
		base := db.WithContext(ctx)
		if outer, ok := outboxgorm.FromContext(ctx); ok {
			base = outer
		}
		return base.Transaction(func(tx *gorm.DB) error { return fn(outboxgorm.WithTx(ctx, tx)) })
	}
}

var savepoints atomic.Int64

// beginCommit runs fn between GORM's own db.Begin and tx.Commit (or
// tx.Rollback), nesting with tx.SavePoint and tx.RollbackTo.
func beginCommit(db *gorm.DB) func(ctx context.Context, fn func(context.Context) error) error {
	return func(ctx context.Context, fn func(context.Context) error) (err error) {
		if outer, ok := outboxgorm.FromContext(ctx); ok {
			name := fmt.Sprintf("sp%d", savepoints.Add(1))
			if err := outer.SavePoint(name).Error; err != nil {
				return err
			}
			ok := false
			defer func() {
				if !ok {
					outer.RollbackTo(name)
				}
			}()
			err = fn(ctx)
			ok = err == nil
			return err
		}
		tx := db.WithContext(ctx).Begin()
		if tx.Error != nil {
			return tx.Error
		}
		ok := false
		defer func() {
			if !ok {
				tx.Rollback()
			}
		}()
		if err = fn(outboxgorm.WithTx(ctx, tx)); err != nil {
			return err
		}
		ok = true
		return tx.Commit().Error
	}
}

// env returns a new env with the style's configuration.
func (s style) env(t *testing.T, b outboxsqltest.Backend) *env {
	var cfg *gorm.Config
	if s.config != nil {
		cfg = s.config()
	}
	return newEnv(t, b, cfg)
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
			return tx.Table(e.business).Create(&order{Name: name}).Error
		},
		ExecBusiness: func(ctx context.Context, query string) error {
			tx, err := txOf(ctx)
			if err != nil {
				return err
			}
			return tx.Exec(query).Error
		},
		BusinessRows: func(t testing.TB) []string {
			var names []string
			if err := e.db.Table(e.business).Order("id").Pluck("name", &names).Error; err != nil {
				t.Fatal(err)
			}
			return names
		},
	}
}

// txOf returns the GORM transaction ctx carries.
func txOf(ctx context.Context) (*gorm.DB, error) {
	tx, ok := outboxgorm.FromContext(ctx)
	if !ok {
		return nil, errors.New("no GORM transaction in the context")
	}
	return tx, nil
}

func (s style) String() string { return s.name }

func TestSuites(t *testing.T) {
	outboxsqltest.RunAdapterSuites(t, styles, func(t *testing.T, b outboxsqltest.Backend, s style) outboxtest.AdapterFixture {
		return s.env(t, b).fixture(s)
	})
}
