package integration

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/sqlstore"
)

// partitionedStore returns a store made WithPartitions(every) on a fresh
// PostgreSQL table (pgx), migrated and dropped at cleanup, and its pool.
func partitionedStore(t *testing.T, every time.Duration) (*sql.DB, *outboxsql.Store) {
	t.Helper()
	for _, b := range outboxsqltest.Backends() {
		if b.Dialect == outboxsql.PostgreSQL && b.DriverName == "pgx" && len(b.Options) == 0 {
			db := b.Open(t)
			return db, b.NewStore(t, db, outboxsql.WithPartitions(every))
		}
	}
	t.Fatal("no PostgreSQL backend through pgx")
	return nil, nil
}

// skipPartitioned skips a test of the plain table's plans on the
// partitioned backend: its plans walk one index per partition (see
// docs/databases.md).
func skipPartitioned(t *testing.T, b outboxsqltest.Backend) {
	t.Helper()
	if len(b.Options) > 0 {
		t.Skip("checks the plain table's plans; the partitioned table's claim plan is in docs/databases.md")
	}
}

// relOf returns the partition that holds the row of id.
func relOf(t *testing.T, db *sql.DB, store *outboxsql.Store, id string) string {
	t.Helper()
	var rel string
	if err := db.QueryRow("SELECT CAST(tableoid::regclass AS TEXT) FROM "+store.Table()+" WHERE event_id = $1", id).Scan(&rel); err != nil {
		t.Fatalf("the partition of %s: %v", id, err)
	}
	return rel
}

// partitionCount returns how many partitions the table has, DEFAULT included.
func partitionCount(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	return queryCount(t, db, "SELECT COUNT(*) FROM pg_inherits WHERE inhparent = to_regclass($1)", table)
}

// queryCount runs query, which returns one number, on db.
func queryCount(t *testing.T, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPartitionsConfig: the mode is PostgreSQL's, its interval whole
// seconds, its table name short enough for the partitions' names, and a
// plain table of the same name is not taken for a partitioned one.
func TestPartitionsConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []sqlstore.Option
		wrong string
	}{
		{"sqlite", []sqlstore.Option{sqlstore.WithDialect(sqlstore.SQLite), sqlstore.WithPartitions(time.Hour)}, "not PostgreSQL"},
		{"sub-second", []sqlstore.Option{sqlstore.WithDialect(sqlstore.PostgreSQL), sqlstore.WithPartitions(1500 * time.Millisecond)}, "not whole seconds"},
		{"long name", []sqlstore.Option{sqlstore.WithDialect(sqlstore.PostgreSQL), sqlstore.WithPartitions(time.Hour),
			sqlstore.WithTable("outbox_event_of_a_long_name_for_the_partitions_xyz")}, "too long"},
	} {
		if _, err := outboxsql.Open(&sql.DB{}, tc.opts...); !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("%s: Open = %v, want ErrInvalidConfig (%s)", tc.name, err, tc.wrong)
		}
	}
	db, plain := partitionedStore(t, time.Hour)
	_, _ = db.Exec("DROP TABLE " + plain.Table())
	if _, err := db.Exec("CREATE TABLE " + plain.Table() + " (event_id TEXT)"); err != nil {
		t.Fatal(err)
	}
	if err := plain.Migrate(context.Background()); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("Migrate of a plain table WithPartitions = %v, want ErrInvalidConfig", err)
	}
}

// TestPartitionsRetention: Migrate makes the current partition and
// PartitionsAhead more (again at every run, idempotent); the retention's
// purge drops whole partitions, and what a purge keeps — pending, claimed,
// DEAD and recently DONE events — survives in the DEFAULT partition with
// its id, seq and state, claimable and acknowledged as before; the next
// maintenance moves it into the partition of its range again.
func TestPartitionsRetention(t *testing.T) {
	ctx := context.Background()
	db, store := partitionedStore(t, time.Hour)
	table := store.Table()
	if got, want := partitionCount(t, db, table), sqlstore.PartitionsAhead+2; got != want {
		t.Fatalf("%d partitions after Migrate, want %d (the current one, %d ahead, DEFAULT)", got, want, sqlstore.PartitionsAhead)
	}
	if err := store.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	now := time.Now().UTC()
	ev := func() outbox.Envelope {
		return outbox.MustEnvelope(outbox.EventName("E"), outbox.WithJSON([]byte(`{}`)))
	}
	done1, done2, doneLate, dead, retry, claimed, fresh := ev(), ev(), ev(), ev(), ev(), ev(), ev()
	outboxsqltest.InsertAt(t, db, store, now, "a", done1, done2, doneLate, dead, retry, claimed)
	outboxsqltest.InsertAt(t, db, store, now, "", fresh)
	current := relOf(t, db, store, fresh.ID())
	if current == table+"_default" {
		t.Fatalf("a new event is in the DEFAULT partition, want the current one")
	}
	before := now.Add(time.Duration(sqlstore.PartitionsAhead+2) * time.Hour) // past every partition's end
	if n, err := store.MarkDone(ctx, "a", []string{done1.ID(), done2.ID()}, now); err != nil || n != 2 {
		t.Fatal(n, err)
	}
	if n, err := store.MarkDone(ctx, "a", []string{doneLate.ID()}, before.Add(time.Minute)); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	if ok, err := store.MarkDead(ctx, outbox.Outcome{Owner: "a", ID: dead.ID(), At: now, Error: "x"}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, err := store.MarkRetry(ctx, outbox.Outcome{Owner: "a", ID: retry.ID(), At: now, Error: "x"}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	kept := []outbox.Envelope{doneLate, dead, retry, claimed, fresh}
	was := map[string]outbox.Record{}
	for _, e := range kept {
		was[e.ID()] = mustGet(t, store, e.ID())
	}
	if n, err := store.CountPurgeable(ctx, outbox.PurgeRequest{Status: outbox.StatusDone, Before: before}); err != nil || n != 2 {
		t.Fatalf("CountPurgeable = %d, %v; want 2", n, err)
	}

	n, err := store.PurgeRetention(ctx, outbox.PurgeRequest{Status: outbox.StatusDone, Before: before, Limit: 1})
	if err != nil || n != 2 {
		t.Fatalf("PurgeRetention = %d, %v; want the 2 DONE events dropped with their partition", n, err)
	}
	if got := partitionCount(t, db, table); got != 1 {
		t.Fatalf("%d partitions after dropping every interval before the cutoff, want the DEFAULT one", got)
	}
	for _, e := range []outbox.Envelope{done1, done2} {
		if _, err := store.Get(ctx, e.ID()); !errors.Is(err, outbox.ErrNotFound) {
			t.Fatalf("Get(dropped DONE event) = %v, want ErrNotFound", err)
		}
	}
	same := func(when string) {
		t.Helper()
		for _, e := range kept {
			got, old := mustGet(t, store, e.ID()), was[e.ID()]
			if got.Seq != old.Seq || got.Status != old.Status || got.LockedBy != old.LockedBy || got.Attempts != old.Attempts || !got.DoneAt.Equal(old.DoneAt) {
				t.Fatalf("%s: %s is %+v, was %+v", when, e.ID(), got, old)
			}
		}
	}
	same("after the drop")
	for _, e := range kept {
		if rel := relOf(t, db, store, e.ID()); rel != table+"_default" {
			t.Fatalf("a kept event is in %s, want the DEFAULT partition", rel)
		}
	}

	if _, err := store.MaintainPartitions(ctx, now, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got, want := partitionCount(t, db, table), sqlstore.PartitionsAhead+2; got != want {
		t.Fatalf("%d partitions after the maintenance, want %d", got, want)
	}
	same("back in their partition")
	if rel := relOf(t, db, store, fresh.ID()); rel != current {
		t.Fatalf("the pending event is in %s after the maintenance, want %s again", rel, current)
	}
	recs, err := store.Claim(ctx, outbox.ClaimRequest{Owner: "b", Now: now.Add(time.Second), Lease: time.Hour, Limit: 10})
	if err != nil || len(recs) != 2 {
		t.Fatalf("Claim = %d records, %v; want the fresh and the retried events", len(recs), err)
	}
	if n, err := store.MarkDone(ctx, "a", []string{claimed.ID()}, now); err != nil || n != 1 {
		t.Fatalf("MarkDone of the event claimed before the drop = %d, %v", n, err)
	}
}

// TestPartitionsConcurrentMaintenance: stores maintaining one table at
// once do not fail: one does the work.
func TestPartitionsConcurrentMaintenance(t *testing.T) {
	db, store := partitionedStore(t, time.Second)
	now := time.Now().Add(time.Hour)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := outboxsql.Open(db, outboxsql.WithTable(store.Table()), outboxsql.WithPartitions(time.Second))
			if err == nil {
				_, err = s.MaintainPartitions(context.Background(), now, now.Add(-time.Minute))
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.MaintainPartitions(context.Background(), now, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if n := partitionCount(t, db, store.Table()); n < sqlstore.PartitionsAhead+2 {
		t.Fatalf("%d partitions, want at least %d", n, sqlstore.PartitionsAhead+2)
	}
}

func mustGet(t *testing.T, store *outboxsql.Store, id string) outbox.Record {
	t.Helper()
	r, err := store.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return r
}
