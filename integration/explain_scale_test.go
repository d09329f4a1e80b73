package integration

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
)

// envScaleRows lists the table sizes of TestExplainScale, comma-separated;
// the first is the reference the others are compared with.
const envScaleRows = "OUTBOX_TEST_SCALE_ROWS"

// The shape of the table of TestExplainScale, the same at every size: what
// grows with the table is the DONE rows a retention keeps, not the work in
// flight.
const (
	scalePending = 50_000 // the pending backlog: the newest rows
	scaleLive    = 1_000  // the oldest pending rows, claimed by another owner
	scaleExpired = 10     // the pending rows after them, their claims expired
	scaleDead    = 10_000 // DEAD rows, spread over the older rows
	scaleKeys    = 1_000  // ordering keys of every fourth row
	scalePurge   = 100_000
	scaleRuns    = 7 // timed runs of each query (after one to warm up)
)

// scaleResult is one query of TestExplainScale at one table size.
type scaleResult struct {
	query, db string
	rows      int
	took      time.Duration // the median of scaleRuns warm runs
	plan      string        // the plan's summary
}

// TestExplainScale measures the queries whose cost must not grow with the
// table — a claim of 50, the recovery of expired claims, an ordered claim
// of 50, Stats, a purge batch and CountPurgeable — on a table of each size
// of OUTBOX_TEST_SCALE_ROWS (make explain-10m: 1M and 10M rows), once per
// database. Each table holds the same work in flight (a pending backlog of
// 50,000 rows, a fourth of them ordered over 1,000 keys, 1,000 of them
// claimed and 10 claims expired; about 10,000 DEAD rows; 100,000 DONE rows past
// the purge's cutoff) and DONE rows for the rest. Every query's plan is
// checked (no full scan, no sort; see checkScalePlan) and logged, its time
// is the median of seven warm runs (in transactions rolled back), and the
// test ends with a table of the times, the ratio of each to the first
// size's and the plans' summaries (docs/benchmarks.md, "10M rows").
func TestExplainScale(t *testing.T) {
	explainRows(t, "the queries' cost as the table grows")
	sizes := []int{1_000_000, 10_000_000}
	if v := os.Getenv(envScaleRows); v != "" {
		sizes = nil
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 2*scalePurge+scalePending {
				t.Fatalf("%s=%q: want table sizes of at least %d rows, comma-separated", envScaleRows, v, 2*scalePurge+scalePending)
			}
			sizes = append(sizes, n)
		}
	}
	var results []scaleResult
	measured := map[outboxsql.Dialect]bool{}
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		if measured[b.Dialect] {
			t.Skipf("%s: the database is measured once, through its first driver", b.Name)
		}
		measured[b.Dialect] = true
		for _, n := range sizes {
			t.Run(strconv.Itoa(n), func(t *testing.T) {
				results = append(results, measureScale(t, b, n)...)
			})
		}
	})
	t.Logf("the queries at %v rows (median of %d warm runs; ratio to %d rows):\n%s", sizes, scaleRuns, sizes[0], scaleTable(results, sizes[0]))
}

// measureScale loads a table of n rows on b (see TestExplainScale), checks
// and times each query on it, and drops it.
func measureScale(t *testing.T, b outboxsqltest.Backend, n int) []scaleResult {
	ctx := context.Background()
	db := b.Open(t)
	store := b.NewStore(t, db)
	table := store.Table()
	defer outboxsqltest.DropTables(db, store)
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	now := base.Add(time.Duration(n)*time.Millisecond + time.Hour)
	start := time.Now()
	bulkLoadScale(t, b, db, table, base, n, now)
	t.Logf("%s: loaded %d rows in %v", b.Name, n, time.Since(start).Round(time.Second))

	dbName := map[string]string{"postgres": "PostgreSQL", "mysql": "MariaDB", "sqlite": "SQLite"}[b.Dialect.Name()]
	var out []scaleResult
	claim := outbox.ClaimRequest{Owner: "explain", Now: now, Lease: time.Minute, Limit: 50}
	purge := outbox.PurgeRequest{Status: outbox.StatusDone, Before: base.Add(scalePurge * time.Millisecond), Limit: outbox.DefaultPurgeBatch}
	dead, purgeable := int64(scaleDeadUpTo(n, n-scalePending)), int64(scalePurge-1-scaleDeadUpTo(n, scalePurge-1))
	ordered := claim
	ordered.Ordered, ordered.NoRecovery = true, true
	for _, q := range []scaleQuery{
		{what: "claim of 50", run: func(s *outboxsql.Store) error {
			req := claim
			req.NoRecovery = true
			return wantClaimed(s.Claim(ctx, req))(claim.Limit)
		}},
		{what: "recovery", alone: true, run: func(s *outboxsql.Store) error {
			return wantClaimed(s.Claim(ctx, claim))(claim.Limit)
		}, pick: func(st recordedStmt) bool {
			return strings.Contains(st.query, "locked_at <=") || strings.Contains(st.query, "lease_at <=")
		}},
		// A Store's ordered claims take turns starting with the heads of
		// keys or with unordered rows: the first (not timed) starts with
		// unordered rows, the second with heads.
		{what: "ordered claim of 50", sorts: true, prepare: func(s *outboxsql.Store) error {
			_, err := s.Claim(ctx, ordered)
			return err
		}, run: func(s *outboxsql.Store) error {
			recs, err := s.Claim(ctx, ordered)
			for _, r := range recs {
				if err == nil && r.Envelope.OrderingKey() == "" {
					err = fmt.Errorf("the ordered claim took %s, of no key, before 50 heads", r.ID)
				}
			}
			return wantClaimed(recs, err)(claim.Limit)
		}},
		{what: "Stats", sorts: true, run: func(s *outboxsql.Store) error {
			st, err := s.Stats(ctx, now)
			if err == nil && st.ByStatus[outbox.StatusDead] != dead {
				err = fmt.Errorf("Stats counted %d DEAD events, want %d", st.ByStatus[outbox.StatusDead], dead)
			}
			return err
		}},
		{what: "purge batch", run: func(s *outboxsql.Store) error {
			n, err := s.Purge(ctx, purge)
			if err == nil && n != int64(purge.Limit) {
				err = fmt.Errorf("the purge deleted %d rows, want %d", n, purge.Limit)
			}
			return err
		}},
		// A count reads every row it counts: where they are a large share
		// of the table, a planner may rightly read it all.
		{what: "CountPurgeable", scans: true, run: func(s *outboxsql.Store) error {
			n, err := s.CountPurgeable(ctx, purge)
			if err == nil && n != purgeable {
				err = fmt.Errorf("CountPurgeable = %d, want %d", n, purgeable)
			}
			return err
		}},
	} {
		stmts := q.statements(t, b, db, table)
		var reads []string // the indexes read, each once
		buffers := 0
		for i, st := range stmts {
			what := fmt.Sprintf("%s (statement %d of %d)", q.what, i+1, len(stmts))
			t.Logf("%s: %s at %d rows:\n%s", b.Name, what, n, st.query)
			r, buf := checkScalePlan(t, b, db, table, what, st, q.sorts, q.scans)
			for _, r := range r {
				if !slices.Contains(reads, r) {
					reads = append(reads, r)
				}
			}
			buffers += buf
		}
		summary := strings.Join(reads, ", ")
		if buffers > 0 {
			summary += fmt.Sprintf("; %d buffers", buffers)
		}
		if len(stmts) > 1 {
			summary = fmt.Sprintf("%d statements: %s", len(stmts), summary)
		}
		took := medianRun(t, func() (time.Duration, error) {
			if q.alone {
				return timeStatement(db, stmts[0])
			}
			s, _, rollback := recording(t, b, db, table)
			defer rollback()
			if q.prepare != nil {
				if err := q.prepare(s); err != nil {
					return 0, err
				}
			}
			start := time.Now()
			err := q.run(s)
			return time.Since(start), err
		})
		t.Logf("%s: %s at %d rows: %v (median of %d)", b.Name, q.what, n, took, scaleRuns)
		out = append(out, scaleResult{query: q.what, db: dbName, rows: n, took: took, plan: summary})
	}
	return out
}

// scaleQuery is one query of TestExplainScale.
type scaleQuery struct {
	what string
	// prepare, if set, runs on the store before run, not timed.
	prepare func(s *outboxsql.Store) error
	// run runs the query on s and checks its result.
	run func(s *outboxsql.Store) error
	// pick selects the statements whose plans are checked among those
	// run ran, if not all.
	pick func(st recordedStmt) bool
	// alone times the one statement picked (run again as recorded), not
	// the whole call.
	alone bool
	// sorts allows sorts in the plans (of a few rows: groups, parked keys),
	// scans full scans (see checkScalePlan).
	sorts, scans bool
}

// statements runs q on a store on table of b in a transaction rolled back
// and returns the statements it ran that q picks.
func (q scaleQuery) statements(t *testing.T, b outboxsqltest.Backend, db *sql.DB, table string) []recordedStmt {
	t.Helper()
	recorded, rec, rollback := recording(t, b, db, table)
	defer rollback()
	if q.prepare != nil {
		if err := q.prepare(recorded); err != nil {
			t.Fatalf("%s: %v", q.what, err)
		}
		rec.stmts, rec.execs = nil, nil
	}
	if err := q.run(recorded); err != nil {
		t.Fatalf("%s: %v", q.what, err)
	}
	var stmts []recordedStmt
	for _, st := range slices.Concat(rec.stmts, rec.execs) {
		if q.pick == nil || q.pick(st) {
			stmts = append(stmts, st)
		}
	}
	if len(stmts) == 0 || q.alone && len(stmts) != 1 {
		t.Fatalf("%s: %d statements picked among %d", q.what, len(stmts), len(rec.stmts)+len(rec.execs))
	}
	return stmts
}

// scaleDeadUpTo returns how many of the rows 1 to i of the table of
// TestExplainScale at n rows are DEAD, if none of them is pending.
func scaleDeadUpTo(n, i int) int { return (i-7)/(n/scaleDead) + 1 }

// wantClaimed returns a check that a claim's result has want records.
func wantClaimed(recs []outbox.Record, err error) func(want int) error {
	return func(want int) error {
		if err == nil && len(recs) != want {
			err = fmt.Errorf("claimed %d rows, want %d", len(recs), want)
		}
		return err
	}
}

// timeStatement runs st as the store ran it, in a transaction rolled back.
// It returns how long the statement took.
func timeStatement(db *sql.DB, st recordedStmt) (time.Duration, error) {
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	start := time.Now()
	rows, err := tx.QueryContext(ctx, st.query, st.args...)
	if err != nil {
		return 0, err
	}
	for rows.Next() {
	}
	_ = rows.Close()
	return time.Since(start), rows.Err()
}

// medianRun runs fn once to warm up, then scaleRuns times, and returns the
// median of the times it returned.
func medianRun(t *testing.T, fn func() (time.Duration, error)) time.Duration {
	t.Helper()
	var took []time.Duration
	for i := range scaleRuns + 1 {
		d, err := fn()
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			took = append(took, d)
		}
	}
	slices.Sort(took)
	return took[len(took)/2]
}

var (
	pgScanNode = regexp.MustCompile(`(Index Only Scan|Index Scan|Bitmap Index Scan|Seq Scan)( Backward)?( using (\S+))? on (\S+)`)
	pgBuffers  = regexp.MustCompile(`Buffers: shared hit=(\d+)(?: read=(\d+))?`)
)

// checkScalePlan checks the plan of st, a statement of one of
// TestExplainScale's queries on table: unless scans, it reads no whole
// table (nor, on MySQL and SQLite, a whole index), and unless sorts, it
// sorts nothing; PostgreSQL's custom and generic plans are checked. It
// logs the plan and returns how it reads the table (the indexes, in
// short) and, on PostgreSQL, the buffers the statement touched.
func checkScalePlan(t *testing.T, b outboxsqltest.Backend, db *sql.DB, table, what string, st recordedStmt, sorts, scans bool) (reads []string, buffers int) {
	t.Helper()
	short := func(name string) string { return strings.TrimPrefix(strings.TrimPrefix(name, table), "_") }
	switch b.Dialect {
	case outboxsql.PostgreSQL:
		custom, generic := pgPlans(t, db, st)
		for kind, plan := range map[string]string{"custom": custom, "generic": generic} {
			t.Logf("%s plan of the %s:\n%s", kind, what, plan)
			if !scans && strings.Contains(plan, "Seq Scan on "+strings.TrimPrefix(table, "public.")) {
				t.Errorf("the %s plan of the %s reads the whole table", kind, what)
			}
			if !sorts && pgSortNode.MatchString(plan) {
				t.Errorf("the %s plan of the %s sorts", kind, what)
			}
		}
		for _, m := range pgScanNode.FindAllStringSubmatch(custom, -1) {
			switch {
			case m[4] != "":
				reads = append(reads, m[1]+m[2]+" "+short(m[4]))
			case m[1] == "Bitmap Index Scan":
				reads = append(reads, m[1]+" "+short(m[5]))
			default:
				reads = append(reads, m[1]+m[2])
			}
		}
		if m := pgBuffers.FindStringSubmatch(custom); m != nil {
			hit, _ := strconv.Atoi(m[1])
			read, _ := strconv.Atoi(m[2])
			buffers = hit + read
		}
		return reads, buffers
	case outboxsql.MySQL:
		plan := planText(t, db, "EXPLAIN FORMAT=JSON "+st.query, st.args...)
		t.Logf("EXPLAIN FORMAT=JSON of the %s:\n%s", what, plan)
		if !sorts && (strings.Contains(plan, `"filesort"`) || strings.Contains(plan, `"using_filesort": true`)) {
			t.Errorf("the %s sorts", what)
		}
		var tree any
		if err := json.Unmarshal([]byte(plan), &tree); err != nil {
			t.Fatalf("the plan of the %s: %v", what, err)
		}
		for _, a := range mysqlAccesses(tree) {
			if strings.HasPrefix(a.table, "<") { // a derived table, materialized
				continue
			}
			// The walk of the keys reads the walk index "whole" in a loose
			// index scan, one entry per key (see explainMySQLWalk).
			if !scans && (a.typ == "ALL" || a.typ == "index" && a.key != "outbox_walk_idx") {
				t.Errorf("the %s reads the whole table or a whole index (%s %s)", what, a.typ, a.key)
			}
			reads = append(reads, strings.TrimSpace(a.typ+" "+strings.TrimPrefix(a.key, "outbox_")))
		}
		return reads, 0
	case outboxsql.SQLite:
		plan := explain(t, db, st.query, st.args...)
		t.Logf("plan of the %s:\n%s", what, plan)
		if !scans && (sqliteScansTable(plan, table, st.query) || sqliteWholeIndex.MatchString(plan)) {
			t.Errorf("the %s reads the whole table", what)
		}
		if !sorts && strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("the %s sorts", what)
		}
		for _, m := range sqliteIndexRead.FindAllStringSubmatch(plan, -1) {
			if strings.HasPrefix(m[2], "sqlite_autoindex_") {
				reads = append(reads, "pk")
			} else {
				reads = append(reads, short(m[2]))
			}
		}
		return reads, 0
	}
	t.Fatalf("no plan check for dialect %s", b.Dialect.Name())
	return nil, 0
}

// sqliteIndexRead is the index a line of a SQLite plan reads.
var sqliteIndexRead = regexp.MustCompile(`(?m)^(SEARCH|SCAN) \w+ USING (?:COVERING )?INDEX (\w+)`)

// sqliteScansTable reports whether a SQLite plan of query reads the whole
// of table: a SCAN of it, or of one of its aliases in query (not of the
// query's own CTEs and subqueries).
func sqliteScansTable(plan, table, query string) bool {
	names := map[string]bool{table: true}
	for _, m := range regexp.MustCompile(regexp.QuoteMeta(table)+` (?:AS )?(\w+)`).FindAllStringSubmatch(query, -1) {
		names[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`(?m)^SCAN (\w+)$`).FindAllStringSubmatch(plan, -1) {
		if names[m[1]] {
			return true
		}
	}
	return false
}

// mysqlAccess is how a MySQL or MariaDB plan reads a table.
type mysqlAccess struct{ table, typ, key string }

// mysqlAccesses returns how each table is read in a MySQL or MariaDB
// EXPLAIN FORMAT=JSON tree.
func mysqlAccesses(node any) []mysqlAccess {
	var out []mysqlAccess
	switch v := node.(type) {
	case map[string]any:
		if typ, ok := v["access_type"].(string); ok {
			table, _ := v["table_name"].(string)
			key, _ := v["key"].(string)
			out = append(out, mysqlAccess{table, typ, key})
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			out = append(out, mysqlAccesses(v[k])...)
		}
	case []any:
		for _, e := range v {
			out = append(out, mysqlAccesses(e)...)
		}
	}
	return out
}

// scaleTable writes results as a Markdown table: per query and database,
// each size's time, its ratio to the time at rows0, and the plan.
func scaleTable(results []scaleResult, rows0 int) string {
	var b strings.Builder
	b.WriteString("| query | database | rows | time | ratio | plan |\n|---|---|--:|--:|--:|---|\n")
	ref := map[string]time.Duration{}
	for _, r := range results {
		if r.rows == rows0 {
			ref[r.query+" "+r.db] = r.took
		}
	}
	for _, r := range results {
		ratio := "—"
		if r0, ok := ref[r.query+" "+r.db]; ok && r.rows != rows0 && r0 > 0 {
			ratio = fmt.Sprintf("%.2f×", float64(r.took)/float64(r0))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.query, r.db, humanRows(r.rows), r.took.Round(10*time.Microsecond), ratio, r.plan)
	}
	return b.String()
}

// humanRows writes n as 1M, 10M or the number.
func humanRows(n int) string {
	if n%1_000_000 == 0 {
		return strconv.Itoa(n/1_000_000) + "M"
	}
	return strconv.Itoa(n)
}

// bulkLoadScale loads the table of TestExplainScale: n rows created one
// millisecond apart from base (row i has id i, zero-padded); the last
// scalePending are pending (one in fifty a RETRY), the rest DONE but for
// about scaleDead DEAD rows spread over them (none ordered); every fourth row carries one of
// scaleKeys ordering keys; the oldest scaleLive pending rows are claimed at
// now by another owner and the scaleExpired after them were claimed a day
// before. Each database loads with server-side statements: PostgreSQL
// from generate_series, MySQL and MariaDB in chunks of a million rows,
// SQLite from a recursive CTE in one transaction. Then the statistics are
// refreshed (PostgreSQL: VACUUM ANALYZE, as autovacuum would have).
func bulkLoadScale(t *testing.T, b outboxsqltest.Backend, db *sql.DB, table string, base time.Time, n int, now time.Time) {
	t.Helper()
	ctx := context.Background()
	const cols = "event_id, event_type, aggregate_type, payload, status, attempts, occurred_at, available_at, created_at, done_at, ordering_key"
	step := n / scaleDead
	// The columns after event_id, of row i created at at, in the
	// dialect's SQL: id is its id's text and cat concatenates.
	values := func(id string, cat func(a, b string) string, div string) string {
		r := strings.NewReplacer("{N}", strconv.Itoa(n-scalePending), "{step}", strconv.Itoa(step), "{keys}", strconv.Itoa(scaleKeys), "{div}", div)
		return r.Replace(id + ", " + cat("'T'", "i % 5") + ", 'Order', '{\"n\":1}'," +
			" CASE WHEN i > {N} THEN CASE WHEN i % 50 = 1 THEN 2 ELSE 0 END WHEN i % {step} = 7 THEN 3 ELSE 1 END," +
			" CASE WHEN i > {N} AND i % 50 <> 1 THEN 0 ELSE 1 END, at, at, at, CASE WHEN i > {N} THEN NULL ELSE at END," +
			" CASE WHEN i % 4 = 0 AND (i > {N} OR i % {step} <> 7) THEN " + cat("'k'", "(i {div} 4) % {keys}") + " END")
	}
	var stmts []string
	var args [][]any
	var analyze string
	switch b.Dialect {
	case outboxsql.PostgreSQL:
		cat := func(a, b string) string { return a + " || (" + b + ")" }
		stmts = []string{"INSERT INTO " + table + " (" + cols + ") SELECT " + values("lpad(i::text, 26, '0')", cat, "/") +
			" FROM (SELECT i, $1::timestamptz + i * interval '1 millisecond' AS at FROM generate_series(1, $2::int) AS g(i)) AS s ORDER BY i"}
		args = [][]any{{base, n}}
		analyze = "VACUUM ANALYZE " + table
	case outboxsql.MySQL:
		cat := func(a, b string) string { return "CONCAT(" + a + ", " + b + ")" }
		const chunk = 1_000_000
		for from := 0; from < n; from += chunk {
			stmts = append(stmts, "INSERT INTO "+table+" ("+cols+") SELECT "+values("LPAD(i, 26, '0')", cat, "DIV")+
				" FROM (SELECT n + ? AS i, at FROM "+mysqlNumbered+") AS c ORDER BY i")
			at := base.Add(time.Duration(from) * time.Millisecond).Format("2006-01-02 15:04:05.000000")
			args = append(args, []any{from, at, min(chunk, n-from)})
		}
		analyze = "ANALYZE TABLE " + table
	case outboxsql.SQLite:
		cat := func(a, b string) string { return a + " || (" + b + ")" }
		stmts = []string{"WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?) INSERT INTO " + table + " (" + cols + ")" +
			" SELECT " + values("printf('%026d', i)", cat, "/") + " FROM (SELECT i, ? + i * 1000 AS at FROM g)"}
		args = [][]any{{n, base.UnixMicro()}}
		analyze = "ANALYZE"
	default:
		t.Fatalf("no bulk load for dialect %s", b.Dialect.Name())
	}
	for i, st := range stmts {
		if _, err := db.ExecContext(ctx, st, args[i]...); err != nil {
			t.Fatalf("bulk load: %v", err)
		}
	}
	at := map[string]func(time.Time) any{
		"postgres": func(t time.Time) any { return t },
		"mysql":    func(t time.Time) any { return t.Format("2006-01-02 15:04:05.000000") },
		"sqlite":   func(t time.Time) any { return t.UnixMicro() },
	}[b.Dialect.Name()]
	claim := outboxsql.Rebind(b.Dialect, "UPDATE "+table+" SET locked_by = 'busy', locked_at = ? WHERE event_id > ? AND event_id <= ?")
	first := n - scalePending
	for _, c := range []struct {
		at       time.Time
		from, to int
	}{{now, first, first + scaleLive}, {now.Add(-24 * time.Hour), first + scaleLive, first + scaleLive + scaleExpired}} {
		if _, err := db.ExecContext(ctx, claim, at(c.at), fmt.Sprintf("%026d", c.from), fmt.Sprintf("%026d", c.to)); err != nil {
			t.Fatalf("claim rows: %v", err)
		}
	}
	r, err := db.QueryContext(ctx, analyze)
	if err != nil {
		t.Fatalf("%s: %v", analyze, err)
	}
	_ = r.Close()
}
