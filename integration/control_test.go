package integration

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/sqlstore"
)

// TestMigrateAddsControlTables: on an outbox table made by the schema
// before the control tables, the control calls fail with ErrNoTable,
// naming the missing table; Migrate creates the tables, and a second
// Migrate keeps what they hold.
func TestMigrateAddsControlTables(t *testing.T) {
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		ctx := context.Background()
		db := b.Open(t)
		store, err := outboxsql.Open(db, outboxsql.WithDialect(b.Dialect), outboxsql.WithTable(outboxsqltest.TableName("outbox_ctl")))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { outboxsqltest.DropTables(db, store) })
		controls := store.ControlTables()
		for _, stmt := range store.Schema() {
			if slices.ContainsFunc(controls, func(c string) bool { return strings.Contains(stmt, c+" ") }) {
				continue // the schema before
			}
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				t.Fatalf("the schema before: %v", err)
			}
		}
		at := time.Now().UTC().Truncate(time.Millisecond)
		pause := outbox.Pause{Scope: "Billing", By: "alice", Reason: "maintenance", At: at}
		if err := store.SetPause(ctx, pause); !errors.Is(err, sqlstore.ErrNoTable) || !strings.Contains(err.Error(), controls[0]) {
			t.Fatalf("SetPause before Migrate = %v; want ErrNoTable naming %s", err, controls[0])
		}
		if err := store.Migrate(ctx); err != nil {
			t.Fatalf("Migrate of a table made before the control tables: %v", err)
		}
		if err := store.SetPause(ctx, pause); err != nil {
			t.Fatal(err)
		}
		id, err := store.AppendAudit(ctx, outbox.AuditEntry{At: at, Actor: "alice", Action: "pause", Target: "Billing", Count: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Beat(ctx, outbox.Node{Owner: "n1", Mode: "full", Started: at, Seen: at}, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if err := store.Migrate(ctx); err != nil {
			t.Fatalf("a second Migrate: %v", err)
		}
		ps, err := store.Pauses(ctx)
		if err != nil || len(ps) != 1 || ps[0].Scope != "Billing" || !ps[0].At.Equal(at) {
			t.Errorf("pauses after a second Migrate: %+v, %v", ps, err)
		}
		es, err := store.Audit(ctx, outbox.AuditQuery{})
		if err != nil || len(es) != 1 || es[0].ID != id {
			t.Errorf("audit trail after a second Migrate: %+v, %v", es, err)
		}
		ns, err := store.Nodes(ctx, at)
		if err != nil || len(ns) != 1 || ns[0].Owner != "n1" {
			t.Errorf("nodes after a second Migrate: %+v, %v", ns, err)
		}
	})
}
