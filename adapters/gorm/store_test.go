package outboxgorm_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	outboxgorm "github.com/go-outbox/outbox/adapters/gorm"
)

// TestSetup runs the README's quick start on every backend: gorm.Open,
// Setup, Handle, Start, db.Transaction, Write — and the event is delivered.
// Open, which Setup calls, takes the dialect from GORM's dialector.
func TestSetup(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		e := newEnv(t, b, nil)
		ctx := context.Background()
		table := outboxsqltest.TableName("outbox_open")
		store, err := outboxgorm.Open(e.db, outboxsql.WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.db.Migrator().DropTable(table) })
		if store.Dialect() != b.Dialect || store.Table() != table {
			t.Fatalf("Open: dialect %v, table %q; want %v, %q", store.Dialect(), store.Table(), b.Dialect, table)
		}
		client, err := outboxgorm.Setup(ctx, e.db, outbox.Config{Logger: quietLogger}, outboxsql.WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		l := outboxtest.NewLedger()
		if err := client.Handle(outbox.EventName("Opened"), l.Listener().Handle); err != nil {
			t.Fatal(err)
		}
		if err := client.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := client.Close(ctx); err != nil {
				t.Error(err)
			}
		}()
		var ids []string
		err = e.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Table(e.business).Create(&order{Name: "a"}).Error; err != nil {
				return err
			}
			ids, err = client.Write(outboxgorm.WithTx(ctx, tx), outbox.MustEnvelope(outbox.EventName("Opened"), outbox.WithJSON([]byte(`{}`))))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		outboxtest.Eventually(t, 10*time.Second, "the event delivered", func() bool { return l.Count(ids[0]) == 1 })
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

	// GORM's default SQLite driver (mattn/go-sqlite3), which outboxsql
	// cannot recognize: the dialector's name says SQLite.
	mattn := open(t, sqlite.Open(path))
	sqlDB, err := mattn.DB()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outboxsql.DetectDialect(sqlDB); err == nil {
		t.Fatal("outboxsql detects mattn/go-sqlite3: this test no longer shows what Open adds")
	}
	if store, err := outboxgorm.Open(mattn); err != nil || store.Dialect() != outboxsql.SQLite {
		t.Errorf("Open over mattn/go-sqlite3 = %v, %v; want the SQLite dialect", store, err)
	}
	// WithDialect wins.
	if store, err := outboxgorm.Open(mattn, outboxsql.WithDialect(outboxsql.MySQL)); err != nil || store.Dialect() != outboxsql.MySQL {
		t.Errorf("Open with WithDialect(MySQL) = %v, %v; want the MySQL dialect", store, err)
	}
	// A dialector Open does not know: the driver decides.
	modernc := open(t, renamed{sqlite.Dialector{DriverName: "sqlite", DSN: outboxsql.SQLiteDSN(path)}})
	if store, err := outboxgorm.Open(modernc); err != nil || store.Dialect() != outboxsql.SQLite {
		t.Errorf("Open over modernc.org/sqlite with an unknown dialector = %v, %v; want the SQLite dialect", store, err)
	}
	unknown := open(t, renamed{sqlite.Open(path)})
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
