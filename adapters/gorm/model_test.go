package outboxgorm_test

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	outboxgorm "github.com/go-outbox/outbox/adapters/gorm"
)

// migrateModel creates the outbox table in sqlDB with GORM's AutoMigrate.
func migrateModel(t *testing.T, b outboxsqltest.Backend, sqlDB *sql.DB) *gorm.DB {
	t.Helper()
	db, err := gorm.Open(dialector(t, b, sqlDB), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	model, err := outboxgorm.Model(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.AutoMigrate(model); err != nil {
		t.Fatal(err)
	}
	rec := &ddlRecorder{Interface: logger.Discard}
	if err := db.Session(&gorm.Session{Logger: rec}).AutoMigrate(model); err != nil {
		t.Fatal(err)
	}
	if len(rec.ddl) > 0 {
		t.Errorf("AutoMigrate on the table it created changed it again: %q", rec.ddl)
	}
	return db
}

// ddlRecorder is a GORM logger that records the DDL statements run.
type ddlRecorder struct {
	logger.Interface
	mu  sync.Mutex
	ddl []string
}

func (r *ddlRecorder) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	stmt, _ := fc()
	switch strings.ToUpper(strings.Fields(stmt + " x")[0]) {
	case "CREATE", "ALTER", "DROP":
		r.mu.Lock()
		r.ddl = append(r.ddl, stmt)
		r.mu.Unlock()
	}
}

// TestModelMatchesDDL compares the table AutoMigrate creates with the one
// outboxsql's DDL creates, in the database's catalog.
func TestModelMatchesDDL(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		ctx := context.Background()
		got := b.OpenIsolated(t)
		db := migrateModel(t, b, got)
		b.CompareWithDDL(t, got, outboxsql.DefaultTable)

		// The model reads what the store writes.
		e := outbox.MustEnvelope(outbox.EventName("Read"), outbox.WithJSON([]byte(`{"a":1}`)))
		store, err := outboxsql.New(b.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Insert(ctx, got, time.Now(), "", []outbox.Envelope{e}); err != nil {
			t.Fatal(err)
		}
		var id, payload string
		row := db.Table(outboxsql.DefaultTable).Select("event_id", "payload").Row()
		if err := row.Scan(&id, &payload); err != nil || id != e.ID() || payload != `{"a":1}` {
			t.Errorf("read back %q %q (%v), want %q %q", id, payload, err, e.ID(), `{"a":1}`)
		}
		model, _ := outboxgorm.Model(db)
		if err := db.First(model).Error; err != nil {
			t.Errorf("First(%T): %v", model, err)
		}
	})
}

// TestStoreSuiteOnModelTable runs the store conformance suite on tables
// that GORM's AutoMigrate created.
func TestStoreSuiteOnModelTable(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		outboxtest.RunStoreSuite(t, func(t *testing.T) outboxtest.Fixture {
			sqlDB := b.OpenIsolated(t)
			migrateModel(t, b, sqlDB)
			store, err := outboxsql.New(b.Dialect)
			if err != nil {
				t.Fatal(err)
			}
			txm := outboxsql.NewTxManager(sqlDB, outboxsql.WithTxLogger(quietLogger))
			return outboxtest.Fixture{Store: store, Purger: store, DB: sqlDB, TxContext: txm, InTx: txm.InTx, Table: store.Table()}
		})
	})
}

func TestModelUnknownDialect(t *testing.T) {
	if _, err := outboxgorm.Model(nil); err == nil {
		t.Error("Model(nil) succeeded")
	}
}
