package outboxsqlx_test

import (
	"context"
	"errors"
	"testing"

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
		store := b.OpenWith(t, e.db.DB, func(opts ...outboxsql.Option) (*outboxsql.Store, error) { return outboxsqlx.Open(e.db, opts...) })
		if err := store.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		client, err := outbox.New(outbox.Config{Store: store, TxContext: e.tc, Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		ev := outbox.MustEnvelope(outbox.EventName("Opened"), outbox.WithJSON([]byte(`{}`)))
		outboxtest.DeliverOnce(t, client, ev, func(ctx context.Context, write func(context.Context) error) error {
			tx := e.db.MustBegin()
			tx.MustExec(tx.Rebind("INSERT INTO "+e.business+" (id, name) VALUES (?, ?)"), 1, "a")
			if err := write(outboxsqlx.WithTx(ctx, tx)); err != nil {
				_ = tx.Rollback()
				return err
			}
			return tx.Commit()
		})
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
	return sqlx.NewDb(outboxsqltest.UnknownDB(t), driverName)
}
