package outboxgorm_test

import (
	"context"
	"errors"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	outboxgorm "github.com/go-outbox/outbox/adapters/gorm"
)

func TestCurrentErrors(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		e := newEnv(t, b, nil)
		ctx := context.Background()
		outboxtest.WantNoTransaction(t, ctx, e.tc, "outboxgorm.WithTx")
		outboxtest.WantNoTransaction(t, outboxgorm.WithTx(ctx, e.db), e.tc, "not in a transaction")

		// A *gorm.DB over the same pool without the plugin.
		bare, err := gorm.Open(dialector(t, b, e.sqlDB), &gorm.Config{Logger: logger.Discard})
		if err != nil {
			t.Fatal(err)
		}
		err = bare.Transaction(func(tx *gorm.DB) error {
			outboxtest.WantNoTransaction(t, outboxgorm.WithTx(ctx, tx), e.tc, "not begun through the outboxgorm plugin")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}

		// A transaction of another TxContext's database.
		other := newEnv(t, b, nil)
		err = other.db.Transaction(func(tx *gorm.DB) error {
			outboxtest.WantNoTransaction(t, outboxgorm.WithTx(ctx, tx), e.tc, "another TxContext")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}

		// A transaction that ended.
		tx := e.db.Begin()
		if err := tx.Commit().Error; err != nil {
			t.Fatal(err)
		}
		outboxtest.WantNoTransaction(t, outboxgorm.WithTx(ctx, tx), e.tc, "already ended")

		// db.Connection pins a *sql.Conn that the plugin does not wrap.
		err = e.db.Connection(func(conn *gorm.DB) error {
			return conn.Transaction(func(tx *gorm.DB) error {
				outboxtest.WantNoTransaction(t, outboxgorm.WithTx(ctx, tx), e.tc, "db.Connection")
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestNew(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		e := newEnv(t, b, nil)
		again, err := outboxgorm.New(e.db)
		if err != nil || again != e.tc {
			t.Errorf("New on a database with the plugin = %p, %v; want the installed %p", again, err, e.tc)
		}
		if _, err := outboxgorm.New(nil); !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("New(nil) = %v, want ErrInvalidConfig", err)
		}
		sqlDB, err := e.db.DB()
		if err != nil || sqlDB != e.sqlDB {
			t.Errorf("db.DB() through the plugin = %p, %v; want %p", sqlDB, err, e.sqlDB)
		}
		err = e.db.Transaction(func(tx *gorm.DB) error {
			inner, err := tx.DB()
			if err != nil || inner != e.sqlDB {
				t.Errorf("tx.DB() = %p, %v; want %p", inner, err, e.sqlDB)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.db.Exec("SELECT 1").Error; err != nil {
			t.Errorf("a plain statement through the plugin: %v", err)
		}
	})
}

// clash is a plugin registered under the outbox plugin's name.
type clash struct{}

func (clash) Name() string              { return outboxgorm.PluginName }
func (clash) Initialize(*gorm.DB) error { return nil }

func TestNewNameClash(t *testing.T) {
	b := outboxsqltest.Backends()[0]
	db, err := gorm.Open(dialector(t, b, b.Open(t)), &gorm.Config{Logger: logger.Discard, Plugins: map[string]gorm.Plugin{outboxgorm.PluginName: clash{}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outboxgorm.New(db); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("New with another plugin of the same name = %v, want ErrInvalidConfig", err)
	}
}

// TestPluginInConfig installs the TxContext through gorm.Config.Plugins.
func TestPluginInConfig(t *testing.T) {
	b := outboxsqltest.Backends()[0]
	sqlDB := b.Open(t)
	tc := &outboxgorm.TxContext{}
	db, err := gorm.Open(dialector(t, b, sqlDB), &gorm.Config{Logger: logger.Discard, Plugins: map[string]gorm.Plugin{tc.Name(): tc}})
	if err != nil {
		t.Fatal(err)
	}
	committed := false
	err = db.Transaction(func(tx *gorm.DB) error {
		cur, err := tc.Current(outboxgorm.WithTx(context.Background(), tx))
		if err != nil {
			return err
		}
		cur.AfterCommit(func() { committed = true })
		return nil
	})
	if err != nil || !committed {
		t.Fatalf("Transaction = %v, committed = %v; want nil, true", err, committed)
	}
}

// TestTransactionAfterEnd: a context that carries a transaction that ended
// carries none, so Transaction begins a new transaction instead of nesting.
func TestTransactionAfterEnd(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		e := newEnv(t, b, nil)
		outboxtest.WantNewTxAfterEnd(t, e.tc, func(ctx context.Context, fn func(context.Context) error) error {
			return outboxgorm.Transaction(ctx, e.db, func(ctx context.Context, _ *gorm.DB) error { return fn(ctx) })
		})
	})
}
