package integration

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
)

// envBlockedKeys sets the number of blocked keys of TestExplainBlockedKeys.
const envBlockedKeys = "OUTBOX_TEST_BLOCKED_KEYS"

// TestExplainBlockedKeys measures what keys blocked by a DEAD head (each
// with an event waiting behind it; 100,000 by default, written straight
// into the table, not parked) cost the ordered claim: with one healthy key
// of ten events among them, it claims (100 at a time, DeadBlocksKey) and
// acknowledges until the healthy key's events are all DONE, and logs how
// many claims that took and how long — the first walks past the blocked
// keys park them — then does the same for ten more events of the healthy
// key, once the blocked keys are parked, and checks the plan of the walk
// of the keys: it reads the walk index and steps over none of the blocked
// keys. The healthy key's events must come one claim at a time, in order,
// and no event of a blocked key may be claimed.
func TestExplainBlockedKeys(t *testing.T) {
	explainRows(t, "the cost of blocked keys to the ordered claim")
	keys := 100_000
	if v := os.Getenv(envBlockedKeys); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1_000_000 {
			t.Fatalf("%s=%q: want a number of keys, 1 to 1,000,000", envBlockedKeys, v)
		}
		keys = n
	}
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		skipPartitioned(t, b)
		db := b.Open(t)
		store := b.NewStore(t, db)
		base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		start := time.Now()
		bulkLoadBlocked(t, b, db, store.Table(), base, keys)
		t.Logf("%s: loaded %d keys blocked by a DEAD head, each with an event behind it, in %v", b.Name, keys, time.Since(start).Round(time.Millisecond))
		now := time.Now().Add(time.Minute) // the healthy key's events are written now
		req := outbox.ClaimRequest{Owner: "explain", Now: now, Lease: time.Minute, Limit: 100, Ordered: true, NoRecovery: true}
		for _, phase := range []string{"blocked keys not parked yet", "blocked keys parked"} {
			claims, empty, took := claimHealthyKey(t, db, store, req, fmt.Sprintf("b%07d-ok", keys/2), 10*keys)
			t.Logf("%s: %s: the healthy key's 10 events past %d blocked keys took %d claims (%d of them empty) and %v",
				b.Name, phase, keys, claims, empty, took.Round(time.Millisecond))
		}
		outboxsqltest.Insert(t, db, store, outbox.MustEnvelope(outbox.EventName("Bulk"), outbox.WithOrderingKey(fmt.Sprintf("b%07d-ok", keys/2)),
			outbox.WithJSON([]byte(`{"n":1}`))))
		sweep := explainBlockedWalk(t, b, db, store.Table(), req)
		measureSweep(t, b, db, store.Table(), sweep, keys)
	})
}

// measureSweep runs sweep, the statement with which ordered claims unpark
// the keys no DEAD event holds back any more, on the table of keys
// parked keys: twice with nothing to unpark (what it costs a claim once
// per lease), once after every DEAD head was ended by SQL behind the
// store's back, when it must unpark every key, and once more with no key
// parked. It logs what each took and the plan of the statement, which
// must read the park index.
func measureSweep(t *testing.T, b outboxsqltest.Backend, db *sql.DB, table, sweep string, keys int) {
	t.Helper()
	ctx := context.Background()
	run := func(what string, want int64) {
		t.Helper()
		start := time.Now()
		res, err := db.ExecContext(ctx, sweep)
		if err != nil {
			t.Fatalf("the sweep: %v", err)
		}
		took := time.Since(start)
		if n, err := res.RowsAffected(); err != nil || n != want {
			t.Fatalf("the sweep %s unparked %d rows (%v), want %d", what, n, err, want)
		}
		t.Logf("%s: the sweep %s (%d blocked keys loaded): %v", b.Name, what, keys, took.Round(100*time.Microsecond))
	}
	var plan, index string
	switch b.Dialect {
	case outboxsql.PostgreSQL:
		plan, index = planText(t, db, "EXPLAIN "+sweep), "Index Scan using "+pgIndex(table, "park")
	case outboxsql.MySQL:
		plan, index = planText(t, db, "EXPLAIN FORMAT=JSON "+sweep), `"key": "outbox_park_idx"`
	case outboxsql.SQLite:
		plan, index = explain(t, db, sweep), "USING INDEX "+table+"_park_idx"
	}
	t.Logf("sweep plan:\n%s", plan)
	if !strings.Contains(plan, index) {
		t.Errorf("the sweep does not read the park index (%s)", index)
	}
	run("with nothing to unpark", 0)
	run("with nothing to unpark, again", 0)
	if _, err := db.ExecContext(ctx, "UPDATE "+table+" SET status = 1 WHERE status = 3"); err != nil {
		t.Fatalf("end the DEAD heads: %v", err)
	}
	run("after every DEAD head ended by SQL", int64(keys))
	run("with no key parked any more", 0)
}

// claimHealthyKey writes ten events of key, then claims with req and
// acknowledges until they are all DONE, at most limit claims; it returns
// the claims, the empty ones, and how long they took.
func claimHealthyKey(t *testing.T, db *sql.DB, store *outboxsql.Store, req outbox.ClaimRequest, key string, limit int) (claims, empty int, took time.Duration) {
	t.Helper()
	ctx := context.Background()
	healthy := make([]outbox.Envelope, 10)
	for i := range healthy {
		healthy[i] = outbox.MustEnvelope(outbox.EventName("Bulk"), outbox.WithOrderingKey(key), outbox.WithJSON([]byte(`{"n":1}`)))
	}
	outboxsqltest.Insert(t, db, store, healthy...)
	var got []string
	start := time.Now()
	for len(got) < len(healthy) {
		if claims == limit {
			t.Fatalf("after %d claims, %d of the healthy key's events were claimed", claims, len(got))
		}
		recs, err := store.Claim(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		claims++
		if len(recs) == 0 {
			empty++
		}
		if len(recs) > 1 {
			t.Fatalf("a claim took %d events, want the healthy key's head alone", len(recs))
		}
		for _, r := range recs {
			got = append(got, r.ID)
			if _, err := store.MarkDone(ctx, req.Owner, []string{r.ID}, req.Now); err != nil {
				t.Fatal(err)
			}
		}
	}
	took = time.Since(start)
	for i, e := range healthy {
		if got[i] != e.ID() {
			t.Fatalf("the healthy key's events were claimed in the order %v", got)
		}
	}
	return claims, empty, took
}

// explainBlockedWalk records the statements of one ordered claim of req
// (in a transaction rolled back), the blocked keys parked and an event of
// the healthy key pending, and checks the plan of the walk of the
// keys: the walk index, no blocked key stepped over. It returns the
// statement of the claim's sweep of parked keys (the first claim of the
// recording store sweeps).
func explainBlockedWalk(t *testing.T, b outboxsqltest.Backend, db *sql.DB, table string, req outbox.ClaimRequest) (sweep string) {
	ctx := context.Background()
	recorded, rec, rollback := recording(t, b, db, table)
	defer rollback()
	if _, err := recorded.Claim(ctx, req); err != nil {
		t.Fatal(err)
	}
	var walk *recordedStmt
	for i, st := range rec.stmts {
		if strings.Contains(st.query, "WITH RECURSIVE") || strings.Contains(st.query, "GROUP BY walk_key") {
			walk = &rec.stmts[i]
		}
	}
	if walk == nil {
		t.Fatalf("no walk of the keys among the claim's %d statements", len(rec.stmts))
	}
	for _, st := range rec.execs {
		if strings.HasSuffix(st.query, "u.parked = 1") || strings.HasSuffix(st.query, "u.park_key IS NOT NULL") {
			sweep = st.query
		} else if strings.Contains(st.query, "parked") {
			t.Errorf("the claim past parked keys parked again: %s", st.query)
		}
	}
	rollback()
	switch b.Dialect {
	case outboxsql.PostgreSQL:
		explainPostgres(t, db, "walk past parked keys", pgIndex(table, "walk"), *walk)
	case outboxsql.MySQL:
		explainMySQLWalk(t, db, "walk past parked keys", *walk)
	case outboxsql.SQLite:
		plan := explain(t, db, walk.query, walk.args...)
		t.Logf("walk past parked keys plan:\n%s", plan)
		if !strings.Contains(plan, table+"_walk_idx") || strings.Contains(plan, "SCAN "+table) {
			t.Errorf("the walk past parked keys does not use %s_walk_idx alone", table)
		}
	}
	if sweep == "" {
		t.Fatalf("no sweep of parked keys among the first claim's %d statements", len(rec.execs))
	}
	return sweep
}

// bulkLoadBlocked inserts, in two statements, n DEAD events on keys
// "b0000001" … (their heads), then an event pending behind each.
func bulkLoadBlocked(t *testing.T, b outboxsqltest.Backend, db *sql.DB, table string, base time.Time, n int) {
	t.Helper()
	const cols = "event_id, event_type, aggregate_type, payload, status, attempts, occurred_at, available_at, created_at, done_at, ordering_key"
	for _, part := range []struct {
		prefix string
		status int
	}{{"d", 3}, {"p", 0}} {
		var load, analyze string
		var args []any
		done := "NULL"
		if part.status == 3 {
			done = "at"
		}
		switch b.Dialect {
		case outboxsql.PostgreSQL:
			load = "INSERT INTO " + table + " (" + cols + ") SELECT '" + part.prefix + "' || lpad(i::text, 25, '0'), 'Bulk', '__GLOBAL__', '{\"n\":1}', " +
				strconv.Itoa(part.status) + ", 1, at, at, at, " + done + ", 'b' || lpad(i::text, 7, '0')" +
				" FROM (SELECT i, $1::timestamptz + i * interval '1 millisecond' AS at FROM generate_series(1, $2::int) AS g(i)) AS s ORDER BY i"
			args = []any{base, n}
			analyze = "ANALYZE " + table
		case outboxsql.MySQL:
			load = "INSERT INTO " + table + " (" + cols + ") SELECT CONCAT('" + part.prefix + "', LPAD(n, 25, '0')), 'Bulk', '__GLOBAL__', '{\"n\":1}', " +
				strconv.Itoa(part.status) + ", 1, at, at, at, " + done + ", CONCAT('b', LPAD(n, 7, '0'))" +
				" FROM " + mysqlNumbered
			args = []any{base.Format("2006-01-02 15:04:05"), n}
			analyze = "ANALYZE TABLE " + table
		case outboxsql.SQLite:
			load = "WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?) INSERT INTO " + table + " (" + cols + ")" +
				" SELECT '" + part.prefix + "' || printf('%025d', i), 'Bulk', '__GLOBAL__', '{\"n\":1}', " + strconv.Itoa(part.status) +
				", 1, at, at, at, " + done + ", 'b' || printf('%07d', i) FROM (SELECT i, ? + i * 1000 AS at FROM g)"
			args = []any{n, base.UnixMicro()}
			analyze = "ANALYZE"
		default:
			t.Fatalf("no bulk load for dialect %s", b.Dialect.Name())
		}
		bulkExec(t, db, load, args, analyze)
	}
}
