package outboxbun_test

import (
	"context"
	"database/sql"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/uptrace/bun"

	outboxbun "github.com/go-outbox/outbox/adapters/bun"
)

// createModel creates the outbox table in sqlDB with bun's CREATE TABLE.
func createModel(t *testing.T, b outboxsqltest.Backend, sqlDB *sql.DB) *bun.DB {
	t.Helper()
	db := bun.NewDB(sqlDB, dialect(t, b))
	model, err := outboxbun.Model(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.NewCreateTable().Model(model).IfNotExists().Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestModel checks the table bun creates against outboxsql's DDL, in the
// database's catalog, and runs the store suite on it.
func TestModel(t *testing.T) {
	outboxsqltest.RunModelSuites(t, func(t *testing.T, b outboxsqltest.Backend, db *sql.DB) { createModel(t, b, db) })
}

// TestModelReadsRows reads through the model what the store wrote.
func TestModelReadsRows(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		ctx := context.Background()
		sqlDB := b.OpenIsolated(t)
		db := createModel(t, b, sqlDB)
		store, err := outboxbun.Open(db)
		if err != nil {
			t.Fatal(err)
		}
		e := outbox.MustEnvelope(outbox.EventName("Read"), outbox.WithJSON([]byte(`{"a":1}`)))
		outboxsqltest.Insert(t, sqlDB, store, e)
		model, _ := outboxbun.Model(db)
		if err := db.NewSelect().Model(model).Limit(1).Scan(ctx); err != nil {
			t.Errorf("select into %T: %v", model, err)
		}
		var id, payload string
		if err := db.NewSelect().Model(model).Column("event_id", "payload").Limit(1).Scan(ctx, &id, &payload); err != nil ||
			id != e.ID() || payload != `{"a":1}` {
			t.Errorf("read back %q %q (%v), want %q %q", id, payload, err, e.ID(), `{"a":1}`)
		}
	})
}

func TestModelUnknownDialect(t *testing.T) {
	if _, err := outboxbun.Model(nil); err == nil {
		t.Error("Model(nil) succeeded")
	}
}
