package outboxbun_test

import (
	"context"
	"errors"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
	"github.com/uptrace/bun"
	bundialect "github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/schema"

	outboxbun "github.com/go-outbox/outbox/adapters/bun"
)

// TestOpen runs the quick start on every backend: the Store that Open
// builds from the *bun.DB alone delivers an event written in a bun
// transaction.
func TestOpen(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		table := outboxsqltest.TableName("outbox_open")
		store, err := outboxbun.Open(e.db, outboxsql.WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = e.sqlDB.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table) })
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
		var ids []string
		err = e.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			if _, err := tx.NewInsert().Model(&order{Name: "a"}).ModelTableExpr(e.business).Exec(ctx); err != nil {
				return err
			}
			ev := outbox.MustEnvelope(outbox.EventName("Opened"), outbox.WithJSON([]byte(`{}`)))
			ids, err = client.Write(outboxbun.WithTx(ctx, tx), ev)
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
	b := outboxsqltest.Backends()[0] // SQLite: a driver outboxsql knows
	sqlDB := b.Open(t)
	// bun's dialect wins over the driver, and WithDialect over both.
	pg := bun.NewDB(sqlDB, pgdialect.New())
	if store, err := outboxbun.Open(pg); err != nil || store.Dialect() != outboxsql.PostgreSQL {
		t.Errorf("Open with bun's PostgreSQL dialect = %v, %v; want PostgreSQL", store, err)
	}
	if store, err := outboxbun.Open(pg, outboxsql.WithDialect(outboxsql.MySQL)); err != nil || store.Dialect() != outboxsql.MySQL {
		t.Errorf("Open with WithDialect(MySQL) = %v, %v; want MySQL", store, err)
	}
	// A bun dialect Open does not know: the driver decides.
	other := bun.NewDB(sqlDB, renamed{pgdialect.New()})
	if store, err := outboxbun.Open(other); err != nil || store.Dialect() != outboxsql.SQLite {
		t.Errorf("Open with an unknown bun dialect over modernc.org/sqlite = %v, %v; want SQLite", store, err)
	}
	if _, err := outboxbun.Open(pg, outboxsql.WithTable("no such table")); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Errorf("Open with an invalid table name = %v, want ErrInvalidConfig", err)
	}
	if _, err := outboxbun.Open(nil); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Errorf("Open(nil) = %v, want ErrInvalidConfig", err)
	}
}

// renamed is a bun dialect Open does not know.
type renamed struct{ schema.Dialect }

func (renamed) Name() bundialect.Name { return bundialect.Invalid }
