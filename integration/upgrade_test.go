package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
)

// TestMigrateUpgradesAnEarlierTable: a table made by the schema of an
// earlier version (testdata/schema-v1: one claim index over every pending
// row, no ordering columns, no schema version, no subscribers), holding a
// pending event, is brought up to date by Migrate — twice, as at every
// start — and the event is then delivered; new events round-trip every new
// column.
func TestMigrateUpgradesAnEarlierTable(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		ctx := context.Background()
		db := b.Open(t)
		table := outboxsqltest.TableName("outbox_upg")
		t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table) })
		raw, err := os.ReadFile(filepath.Join("testdata", "schema-v1", b.Dialect.Name()+".sql"))
		if err != nil {
			t.Fatal(err)
		}
		ddl := strings.NewReplacer("{{table}}", table, "{{name}}", table, "{{schema}}", "").Replace(string(raw))
		for _, stmt := range strings.Split(ddl, ";\n") {
			var lines []string
			for _, l := range strings.Split(stmt, "\n") {
				if !strings.HasPrefix(strings.TrimSpace(l), "--") {
					lines = append(lines, l)
				}
			}
			if stmt := strings.TrimSpace(strings.Join(lines, "\n")); stmt != "" {
				if _, err := db.ExecContext(ctx, stmt); err != nil {
					t.Fatalf("schema v1: %v\n%s", err, stmt)
				}
			}
		}
		// A pending event written by the earlier version.
		now := time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)
		var at any = now
		insert := "INSERT INTO " + table + " (event_id, event_type, aggregate_type, aggregate_id, payload, occurred_at, available_at, created_at)" +
			" VALUES (?, 'Ping', 'Order', 'o-1', '{\"n\":1}', ?, ?, ?)"
		switch b.Dialect {
		case outboxsql.SQLite:
			at = now.UnixMicro()
		case outboxsql.PostgreSQL:
			insert = strings.NewReplacer("?, 'Ping'", "$1, 'Ping'", "?, ?, ?)", "$2, $3, $4)").Replace(insert)
		}
		old := outbox.NewULID()
		if _, err := db.ExecContext(ctx, insert, old, at, at, at); err != nil {
			t.Fatal(err)
		}

		store, err := outboxsql.Open(db, outboxsql.WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if err := store.Migrate(ctx); err != nil {
				t.Fatalf("Migrate #%d of a v1 table: %v", i+1, err)
			}
		}
		// The purge index of v1 had no status (Stats counts the DEAD rows
		// in it): Migrate rebuilt it with status first.
		purgeDef := map[outboxsql.Dialect]string{
			outboxsql.PostgreSQL: "SELECT indexdef FROM pg_indexes WHERE indexname = '" + table + "_purge_idx'",
			outboxsql.SQLite:     "SELECT sql FROM sqlite_master WHERE name = '" + table + "_purge_idx'",
			outboxsql.MySQL: "SELECT GROUP_CONCAT(column_name ORDER BY seq_in_index) FROM information_schema.statistics" +
				" WHERE table_schema = DATABASE() AND table_name = '" + table + "' AND index_name = 'outbox_purge_idx'",
		}[b.Dialect]
		var def string
		if err := db.QueryRowContext(ctx, purgeDef).Scan(&def); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.ReplaceAll(def, " ", ""), "(status,") && !strings.HasPrefix(def, "status,") {
			t.Errorf("the purge index after Migrate: %s; want status first", def)
		}
		txm := outboxsql.NewTxManager(db, outboxsql.WithTxLogger(quietLogger))
		c, err := outbox.New(outbox.Config{Store: store, TxContext: txm, Ordered: true, PollInterval: 20 * time.Millisecond, Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan outbox.Envelope, 4)
		if err := c.Handle(outbox.EventName("Ping"), func(_ context.Context, e outbox.Envelope) error {
			got <- e
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		fresh := outbox.MustEnvelope(outbox.EventName("Ping"), outbox.WithAggregate(outbox.AggregateName("Order"), "o-1"),
			outbox.WithSchemaVersion(2), outbox.WithJSON([]byte(`{"n":2}`)))
		if err := txm.InTx(ctx, func(ctx context.Context) error {
			_, err := c.Write(ctx, fresh)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		want := map[string]int{old: 1, fresh.ID(): 2} // id → schema version
		for range want {
			select {
			case e := <-got:
				if v, ok := want[e.ID()]; !ok || e.SchemaVersion() != v {
					t.Errorf("delivered %s with schema version %d, want one of %v", e.ID(), e.SchemaVersion(), want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the events of the upgraded table were not delivered")
			}
		}
		outboxtest.Eventually(t, 10*time.Second, "both DONE", func() bool {
			n, err := store.Count(ctx, outbox.Query{Statuses: []outbox.Status{outbox.StatusDone}})
			return err == nil && n == 2
		})
		r, err := store.Get(ctx, fresh.ID())
		if err != nil || r.Envelope.OrderingKey() != "Order/o-1" || !r.Envelope.Ordered() || r.Seq == 0 {
			t.Errorf("the event written after the upgrade: %+v, %v; want ordered on Order/o-1 with a sequence", r, err)
		}
	})
}
