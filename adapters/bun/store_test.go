package outboxbun_test

import (
	"context"
	"errors"
	"testing"

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
		store := b.OpenWith(t, e.sqlDB, func(opts ...outboxsql.Option) (*outboxsql.Store, error) { return outboxbun.Open(e.db, opts...) })
		if err := store.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		client, err := outbox.New(outbox.Config{Store: store, TxContext: e.tc, Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		ev := outbox.MustEnvelope(outbox.EventName("Opened"), outbox.WithJSON([]byte(`{}`)))
		outboxtest.DeliverOnce(t, client, ev, func(ctx context.Context, write func(context.Context) error) error {
			return e.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
				if _, err := tx.NewInsert().Model(&order{Name: "a"}).ModelTableExpr(e.business).Exec(ctx); err != nil {
					return err
				}
				return write(outboxbun.WithTx(ctx, tx))
			})
		})
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
