package outboxsqlx_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
	"github.com/jmoiron/sqlx"

	outboxsqlx "github.com/go-outbox/outbox/adapters/sqlx"
)

// TestOpen runs the quick start on every backend: the Store that Open
// builds from the *sqlx.DB delivers an event written in a sqlx
// transaction.
func TestOpen(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		table := outboxsqltest.TableName("outbox_open")
		store, err := outboxsqlx.Open(e.db, outboxsql.WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = e.db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table) })
		if store.Dialect() != b.Dialect || store.Table() != table {
			t.Fatalf("Open: dialect %v, table %q; want %v, %q", store.Dialect(), store.Table(), b.Dialect, table)
		}
		if err := store.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		client, err := outbox.New(outbox.Config{Store: store, TxContext: e.tc, Logger: quietLogger})
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
		tx := e.db.MustBegin()
		tx.MustExec(tx.Rebind("INSERT INTO "+e.business+" (id, name) VALUES (?, ?)"), 1, "a")
		ev := outbox.MustEnvelope(outbox.EventName("Opened"), outbox.WithJSON([]byte(`{}`)))
		ids, err := client.Write(outboxsqlx.WithTx(ctx, tx), ev)
		if err != nil {
			_ = tx.Rollback()
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		outboxtest.Eventually(t, 10*time.Second, "the event delivered", func() bool { return l.Count(ids[0]) == 1 })
	})
}

// TestOpenDialect checks where Open takes the dialect from, without
// touching a database: the driver, else the driver name.
func TestOpenDialect(t *testing.T) {
	for name, want := range map[string]outboxsql.Dialect{
		"sqlite3":  outboxsql.SQLite,
		"postgres": outboxsql.PostgreSQL,
		"mysql":    outboxsql.MySQL,
	} {
		db := unknownDB(t, name)
		if store, err := outboxsqlx.Open(db); err != nil || store.Dialect() != want {
			t.Errorf("Open of an unknown driver named %q = %v, %v; want %v", name, store, err, want)
		}
	}
	db := unknownDB(t, "no-such-driver")
	if _, err := outboxsqlx.Open(db); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Errorf("Open of an unknown driver under an unknown name = %v, want ErrInvalidConfig", err)
	}
	if store, err := outboxsqlx.Open(db, outboxsql.WithDialect(outboxsql.MySQL)); err != nil || store.Dialect() != outboxsql.MySQL {
		t.Errorf("Open with WithDialect(MySQL) = %v, %v; want MySQL", store, err)
	}
	// A known driver under a misleading name: the driver decides.
	b := outboxsqltest.Backends()[0]
	if store, err := outboxsqlx.Open(sqlx.NewDb(b.Open(t), "mysql")); err != nil || store.Dialect() != b.Dialect {
		t.Errorf("Open of %s's driver named mysql = %v, %v; want %v", b.Name, store, err, b.Dialect)
	}
	if _, err := outboxsqlx.Open(db, outboxsql.WithTable("no such table")); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Errorf("Open with an invalid table name = %v, want ErrInvalidConfig", err)
	}
	if _, err := outboxsqlx.Open(nil); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Errorf("Open(nil) = %v, want ErrInvalidConfig", err)
	}
}

// unknownDB returns a *sqlx.DB, opened under driverName, whose driver
// outboxsql does not recognize and which cannot connect.
func unknownDB(t *testing.T, driverName string) *sqlx.DB {
	t.Helper()
	sqlDB := sql.OpenDB(unknownConnector{})
	t.Cleanup(func() { _ = sqlDB.Close() })
	return sqlx.NewDb(sqlDB, driverName)
}

var errNotADatabase = errors.New("not a database")

type unknownConnector struct{}

func (unknownConnector) Connect(context.Context) (driver.Conn, error) { return nil, errNotADatabase }
func (unknownConnector) Driver() driver.Driver                        { return unknownDriver{} }

type unknownDriver struct{}

func (unknownDriver) Open(string) (driver.Conn, error) { return nil, errNotADatabase }
