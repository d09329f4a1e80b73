package outboxgorm_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	outboxgorm "github.com/go-outbox/outbox/adapters/gorm"
)

// TestQuickStart runs the README's quick start on every backend:
// gorm.Open, New, Open, Migrate, outbox.New, Handle, Start,
// db.Transaction, Write — and the event is delivered. Open takes the
// dialect from GORM's dialector.
func TestQuickStart(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		e := newEnv(t, b, nil)
		tc, err := outboxgorm.New(e.db)
		if err != nil {
			t.Fatal(err)
		}
		store := b.OpenWith(t, e.sqlDB, func(opts ...outboxsql.Option) (*outboxsql.Store, error) { return outboxgorm.Open(e.db, opts...) })
		if err := store.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		client, err := outbox.New(outbox.Config{Store: store, TxContext: tc, Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		ev := outbox.MustEnvelope(outbox.EventName("Opened"), outbox.WithJSON([]byte(`{}`)))
		outboxtest.DeliverOnce(t, client, ev, func(ctx context.Context, write func(context.Context) error) error {
			return e.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
				if err := tx.Table(e.business).Create(&order{Name: "a"}).Error; err != nil {
					return err
				}
				return write(outboxgorm.WithTx(ctx, tx))
			})
		})
	})
}

// TestOpenDialect checks where Open takes the dialect from, without
// touching a database.
func TestOpenDialect(t *testing.T) {
	open := func(t *testing.T, d gorm.Dialector) *gorm.DB {
		t.Helper()
		db, err := gorm.Open(d, &gorm.Config{Logger: logger.Discard, DisableAutomaticPing: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if sqlDB, err := db.DB(); err == nil {
				_ = sqlDB.Close()
			}
		})
		return db
	}
	path := filepath.Join(t.TempDir(), "app.db")

	// A driver outboxsql cannot recognize: the dialector's name says
	// PostgreSQL.
	pg := open(t, postgres.New(postgres.Config{Conn: outboxsqltest.UnknownDB(t)}))
	if store, err := outboxgorm.Open(pg); err != nil || store.Dialect() != outboxsql.PostgreSQL {
		t.Errorf("Open with GORM's PostgreSQL dialector over an unknown driver = %v, %v; want the PostgreSQL dialect", store, err)
	}
	// WithDialect wins.
	if store, err := outboxgorm.Open(pg, outboxsql.WithDialect(outboxsql.MySQL)); err != nil || store.Dialect() != outboxsql.MySQL {
		t.Errorf("Open with WithDialect(MySQL) = %v, %v; want the MySQL dialect", store, err)
	}
	// GORM's default SQLite driver (mattn/go-sqlite3).
	mattn := open(t, sqlite.Open(path))
	if store, err := outboxgorm.Open(mattn); err != nil || store.Dialect() != outboxsql.SQLite {
		t.Errorf("Open over mattn/go-sqlite3 = %v, %v; want the SQLite dialect", store, err)
	}
	// A dialector Open does not know: the driver decides.
	modernc := open(t, renamed{sqlite.Dialector{DriverName: "sqlite", DSN: outboxsql.SQLiteDSN(path)}})
	if store, err := outboxgorm.Open(modernc); err != nil || store.Dialect() != outboxsql.SQLite {
		t.Errorf("Open over modernc.org/sqlite with an unknown dialector = %v, %v; want the SQLite dialect", store, err)
	}
	unknown := open(t, renamed{postgres.New(postgres.Config{Conn: outboxsqltest.UnknownDB(t)})})
	if _, err := outboxgorm.Open(unknown); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Errorf("Open with an unknown dialector and driver = %v, want ErrInvalidConfig", err)
	}
	if _, err := outboxgorm.Open(mattn, outboxsql.WithTable("no such table")); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Errorf("Open with an invalid table name = %v, want ErrInvalidConfig", err)
	}
	if _, err := outboxgorm.Open(nil); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Errorf("Open(nil) = %v, want ErrInvalidConfig", err)
	}
}

// renamed is a dialector under a name Open does not know.
type renamed struct{ gorm.Dialector }

func (renamed) Name() string { return "renamed" }
