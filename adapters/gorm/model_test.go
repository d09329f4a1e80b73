package outboxgorm_test

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
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

// TestModel checks the table AutoMigrate creates against outboxsql's DDL,
// in the database's catalog, and runs the store suite on it.
func TestModel(t *testing.T) {
	outboxsqltest.RunModelSuites(t, func(t *testing.T, b outboxsqltest.Backend, db *sql.DB) { migrateModel(t, b, db) })
}

// TestModelReadsRows reads through the model what the store wrote.
func TestModelReadsRows(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		sqlDB := b.OpenIsolated(t)
		db := migrateModel(t, b, sqlDB)
		store, err := outboxgorm.Open(db)
		if err != nil {
			t.Fatal(err)
		}
		e := outbox.MustEnvelope(outbox.EventName("Read"), outbox.WithJSON([]byte(`{"a":1}`)))
		outboxsqltest.Insert(t, sqlDB, store, e)
		model, _ := outboxgorm.Model(db)
		if err := db.First(model).Error; err != nil {
			t.Errorf("First(%T): %v", model, err)
		}
		var id, payload string
		row := db.Model(model).Select("event_id", "payload").Row()
		if err := row.Scan(&id, &payload); err != nil || id != e.ID() || payload != `{"a":1}` {
			t.Errorf("read back %q %q (%v), want %q %q", id, payload, err, e.ID(), `{"a":1}`)
		}
	})
}

func TestModelUnknownDialect(t *testing.T) {
	if _, err := outboxgorm.Model(nil); err == nil {
		t.Error("Model(nil) succeeded")
	}
}
