package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
)

// TestMigrateVerifiesItsIndexes: when an index name the schema uses is
// taken by another table (index names are per schema on PostgreSQL and
// SQLite), CREATE INDEX IF NOT EXISTS silently creates nothing; Migrate
// must notice that the outbox table lacks its index and fail, naming it.
func TestMigrateVerifiesItsIndexes(t *testing.T) {
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		if b.Dialect == outboxsql.MySQL {
			t.Skip("MySQL index names belong to their table: another table's index cannot take one")
		}
		ctx := context.Background()
		db := b.Open(t)
		table := outboxsqltest.TableName("outbox_idx")
		other := table + "_other"
		if _, err := db.ExecContext(ctx, "CREATE TABLE "+other+" (x INTEGER)"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = db.ExecContext(ctx, "DROP TABLE IF EXISTS "+other)
			_, _ = db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table)
		})
		if _, err := db.ExecContext(ctx, "CREATE INDEX "+table+"_due_idx ON "+other+" (x)"); err != nil {
			t.Fatal(err)
		}
		store, err := outboxsql.Open(db, outboxsql.WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		err = store.Migrate(ctx)
		if err == nil || !strings.Contains(err.Error(), table+"_due_idx") || !strings.Contains(err.Error(), "missing") {
			t.Fatalf("Migrate = %v, want an error naming the missing index %s_due_idx", err, table)
		}
		// Once the name is free, Migrate creates it and passes.
		if _, err := db.ExecContext(ctx, "DROP TABLE "+other); err != nil {
			t.Fatal(err)
		}
		if err := store.Migrate(ctx); err != nil {
			t.Fatalf("Migrate after the name was freed: %v", err)
		}
	})
}
