package integration

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
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
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		ctx := context.Background()
		db := b.Open(t)
		table := scratchTable(t, db, "outbox_upg")
		raw, err := os.ReadFile(filepath.Join("testdata", "schema-v1", b.Dialect.Name()+".sql"))
		if err != nil {
			t.Fatal(err)
		}
		ddl := strings.NewReplacer("{{table}}", table, "{{name}}", table, "{{schema}}", "").Replace(string(raw))
		execSchema(t, db, "schema v1", strings.Split(ddl, ";\n"), func(line string) bool {
			return !strings.HasPrefix(strings.TrimSpace(line), "--")
		})
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

// TestMigrateAddsParking: a table made by the schema before parking (the
// current one without parked, walk_key, park_key and the walk and park
// indexes), or before the sweep of parked keys (without park_key and the
// park index), holding a key blocked by a DEAD head with an event behind
// it and a healthy key, is brought up to date by Migrate — twice — and the
// ordered claim (which sweeps the parked keys first) then takes the
// healthy key's event alone; once the DEAD head is skipped, the event
// behind it.
func TestMigrateAddsParking(t *testing.T) {
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		for _, before := range []struct {
			name string
			drop []string // the schema's lines (and index statements) that name them are left out
		}{
			{"parking", []string{"parked", "park_key", "_park_idx", "walk"}},
			{"the sweep", []string{"park_key", "_park_idx", "parked = 1"}},
		} {
			t.Run("before "+before.name, func(t *testing.T) { migrateAddsParking(t, b, "before "+before.name, before.drop) })
		}
	})
}

// migrateAddsParking runs TestMigrateAddsParking on a table made by the
// schema without the lines that name one of drop (the schema of a version
// before).
func migrateAddsParking(t *testing.T, b outboxsqltest.Backend, before string, drop []string) {
	ctx := context.Background()
	db, store := tableBefore(t, b, "outbox_park", "the schema "+before, drop)
	// Written by the version before parking: it names no parking column.
	now := time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)
	ev := func(key string) outbox.Envelope {
		return outbox.MustEnvelope(outbox.EventName("Ping"), outbox.WithOrderingKey(key), outbox.WithJSON([]byte(`{"n":1}`)))
	}
	dead, behind, healthy := ev("blocked"), ev("blocked"), ev("healthy")
	write := func(owner string, evs ...outbox.Envelope) { outboxsqltest.InsertAt(t, db, store, now, owner, evs...) }
	write("old", dead)
	if ok, err := store.MarkDead(ctx, outbox.Outcome{Owner: "old", ID: dead.ID(), At: now, Error: "poison", CountAttempt: true}); err != nil || !ok {
		t.Fatalf("MarkDead = %v, %v", ok, err)
	}
	write("", behind, healthy)

	for i := range 2 {
		if err := store.Migrate(ctx); err != nil {
			t.Fatalf("Migrate #%d of a table made %s: %v", i+1, before, err)
		}
	}
	req := outbox.ClaimRequest{Owner: "new", Now: now.Add(time.Minute), Lease: time.Hour, Limit: 10, Ordered: true}
	claimIDs := func(what string, want ...outbox.Envelope) {
		t.Helper()
		recs, err := store.Claim(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var got, w []string
		for _, r := range recs {
			got = append(got, r.ID)
		}
		for _, e := range want {
			w = append(w, e.ID())
		}
		if strings.Join(got, ",") != strings.Join(w, ",") {
			t.Fatalf("%s: claimed %v, want %v", what, got, w)
		}
	}
	claimIDs("the first ordered claim after the upgrade", healthy)
	claimIDs("the second (the blocked key parked)")
	if n, err := store.Skip(ctx, []string{dead.ID()}, req.Now, "skipped by the test"); err != nil || n != 1 {
		t.Fatalf("Skip = %d, %v", n, err)
	}
	claimIDs("after the DEAD head was skipped", behind)
}

// tableBefore returns a store of b on a new table (named with prefix) made
// by the current schema without the lines that name one of drop — the
// schema of a version before them, which what names — and its database.
func tableBefore(t *testing.T, b outboxsqltest.Backend, prefix, what string, drop []string) (*sql.DB, *outboxsql.Store) {
	t.Helper()
	db := b.Open(t)
	store, err := outboxsql.Open(db, outboxsql.WithDialect(b.Dialect), outboxsql.WithTable(scratchTable(t, db, prefix)))
	if err != nil {
		t.Fatal(err)
	}
	execSchema(t, db, what, store.Schema(), func(line string) bool {
		return !slices.ContainsFunc(drop, func(name string) bool { return strings.Contains(line, name) })
	})
	return db, store
}

// scratchTable returns a new table name with prefix, the table dropped at
// cleanup.
func scratchTable(t *testing.T, db *sql.DB, prefix string) string {
	table := outboxsqltest.TableName(prefix)
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table) })
	return table
}

// execSchema runs the statements stmts with the lines keep keeps; what
// names them in a failure.
func execSchema(t *testing.T, db *sql.DB, what string, stmts []string, keep func(line string) bool) {
	t.Helper()
	for _, stmt := range stmts {
		var lines []string
		for _, l := range strings.Split(stmt, "\n") {
			if keep(l) {
				lines = append(lines, l)
			}
		}
		if stmt := strings.TrimSpace(strings.Join(lines, "\n")); stmt != "" {
			if _, err := db.ExecContext(context.Background(), stmt); err != nil {
				t.Fatalf("%s: %v\n%s", what, err, stmt)
			}
		}
	}
}

// TestMigrateAddsTypeIndex: a table made by the schema before the claim's
// type filters (the current one without the type index), holding events
// of two types, is brought up to date by Migrate — twice; Migrate checks
// that the type index exists, and a claim of one type then takes that
// type's event alone.
func TestMigrateAddsTypeIndex(t *testing.T) {
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		ctx := context.Background()
		db, store := tableBefore(t, b, "outbox_typ", "the schema before the type index", []string{"_type_idx", "(event_type, ", "pending_type"})
		now := time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)
		mine := outbox.MustEnvelope(outbox.EventName("Mine"), outbox.WithJSON([]byte(`{"n":1}`)))
		other := outbox.MustEnvelope(outbox.EventName("Other"), outbox.WithJSON([]byte(`{"n":2}`)))
		outboxsqltest.InsertAt(t, db, store, now, "", other, mine)
		for i := range 2 {
			if err := store.Migrate(ctx); err != nil {
				t.Fatalf("Migrate #%d of a table made before the type index: %v", i+1, err)
			}
		}
		recs, err := store.Claim(ctx, outbox.ClaimRequest{Owner: "new", Now: now.Add(time.Minute), Lease: time.Hour, Limit: 10, Types: []string{"Mine"}})
		if err != nil || len(recs) != 1 || recs[0].ID != mine.ID() {
			t.Fatalf("claim of type Mine after the upgrade: %d events, %v; want %s", len(recs), err, mine.ID())
		}
	})
}
