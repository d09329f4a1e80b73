package integration

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/sqlstore"
)

// Environment of TestExplainClaim (run it with make explain).
const (
	envExplain     = "OUTBOX_TEST_EXPLAIN"      // 1 runs the test
	envExplainRows = "OUTBOX_TEST_EXPLAIN_ROWS" // backlog size, default 1,000,000
)

// TestExplainClaim loads a backlog of pending rows (1M by default) with one
// server-side statement, claims a tenth of them as live claims of another
// owner and lets ten claims expire, then runs one claim and checks the
// database's plan of the very statements the store ran: the recovery must
// read the lease index from the oldest claim and the fresh claim the due
// index in order, each stopping after its rows — no sequential scan, sort
// or filesort, and no stepping over the claimed rows. PostgreSQL is checked
// in the custom and in the generic plan. The plans are logged so that they
// can be quoted.
func TestExplainClaim(t *testing.T) {
	rows := explainRows(t, "the claim's plans")
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		skipPartitioned(t, b)
		ctx := context.Background()
		db := b.Open(t)
		store := b.NewStore(t, db)
		base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		req := outbox.ClaimRequest{Owner: "explain", Now: base.Add(24 * time.Hour), Lease: 15 * time.Second, Limit: 50}
		const expired = 10
		live := rows / 10
		start := time.Now()
		bulkLoad(t, b, db, store, base, rows, live, expired, req.Now)
		t.Logf("%s: loaded %d pending rows (%d of them claimed, %d claims expired) in %v", b.Name, rows, live+expired, expired, time.Since(start).Round(time.Millisecond))

		// Capture the statements the store runs, with their arguments, in
		// a transaction that is rolled back.
		recorded, rec, rollback := recording(t, b, db, store.Table())
		start = time.Now()
		recs, err := recorded.Claim(ctx, req)
		took := time.Since(start)
		rollback()
		if err != nil {
			t.Fatal(err)
		}
		takenOver := 0
		for _, r := range recs {
			if r.LastError == outbox.ErrClaimExpired.Error() {
				takenOver++
			}
		}
		if len(recs) != req.Limit || takenOver != expired || len(rec.stmts) != 2 {
			t.Fatalf("claimed %d rows (%d taken over) in %d statements, want %d (%d) in 2", len(recs), takenOver, len(rec.stmts), req.Limit, expired)
		}
		t.Logf("%s: one claim of %d at a %d-row backlog took %v", b.Name, req.Limit, rows, took)
		for i, st := range rec.stmts {
			what, index := []string{"recovery", "fresh claim"}[i], []string{"lease", "due"}[i]
			t.Logf("%s statement:\n%s", what, st.query)
			switch b.Dialect {
			case outboxsql.PostgreSQL:
				explainPostgres(t, db, what, pgIndex(store.Table(), index), st)
			case outboxsql.MySQL:
				explainMySQL(t, db, what, "outbox_"+index+"_idx", st)
			case outboxsql.SQLite:
				plan := explain(t, db, st.query, st.args...)
				t.Logf("%s plan:\n%s", what, plan)
				if want := store.Table() + "_" + index + "_idx"; !strings.Contains(plan, want) || strings.Contains(plan, "TEMP B-TREE") {
					t.Errorf("%s plan does not walk %s in order", what, want)
				}
			default:
				t.Fatalf("no plan check for dialect %s", b.Dialect.Name())
			}
		}
		explainOrderedClaim(t, b, db, rows)
	})
}

// explainRows skips t unless OUTBOX_TEST_EXPLAIN=1 (make explain) and
// returns the size of the backlog to load: OUTBOX_TEST_EXPLAIN_ROWS, by
// default 1,000,000. what says what the test checks.
func explainRows(t *testing.T, what string) int {
	t.Helper()
	if os.Getenv(envExplain) != "1" {
		t.Skipf("set %s=1 (make explain) to load a 1M-row backlog per backend and check %s", envExplain, what)
	}
	rows := 1_000_000
	if v := os.Getenv(envExplainRows); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			t.Fatalf("%s=%q: want a number of rows, at least 1000", envExplainRows, v)
		}
		rows = n
	}
	return rows
}

// explainOrderedClaim checks the ordered claim (Config.Ordered) at a backlog
// of rows ordered events over 10,000 keys, the first tenth of them DONE
// (their index entries dead until a vacuum) and the heads of a tenth of the
// keys claimed by another owner: one claim of 50 must take 50 heads, all
// of free keys, by walking the order index from key to key (PostgreSQL:
// custom and generic plan; MySQL and MariaDB: a loose index scan; SQLite:
// a recursive query over the index), and lock them by primary key.
func explainOrderedClaim(t *testing.T, b outboxsqltest.Backend, db *sql.DB, rows int) {
	ctx := context.Background()
	store := b.NewStore(t, db)
	table := store.Table()
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	const keys = 10_000
	start := time.Now()
	bulkLoadOrdered(t, b, db, table, base, rows, keys)
	t.Logf("%s: loaded %d ordered events over %d keys (the first %d DONE, the heads of %d keys claimed) in %v", b.Name, rows, keys, rows/10, keys/10,
		time.Since(start).Round(time.Millisecond))
	recorded, rec, rollback := recording(t, b, db, table)
	req := outbox.ClaimRequest{Owner: "explain", Now: base.Add(24 * time.Hour), Lease: 15 * time.Second, Limit: 50, Ordered: true, NoRecovery: true}
	start = time.Now()
	recs, err := recorded.Claim(ctx, req)
	took := time.Since(start)
	rollback()
	if err != nil {
		t.Fatal(err)
	}
	busy := map[string]bool{} // the keys whose heads another owner holds
	for i := 1; i <= keys/10; i++ {
		busy[fmt.Sprintf("k%d", (rows/10+i)%keys)] = true
	}
	seen := map[string]bool{}
	for _, r := range recs {
		k := r.Envelope.OrderingKey()
		if seen[k] || busy[k] {
			t.Errorf("claimed %s of key %s: a second event of the key, or the key's head is claimed", r.ID, k)
		}
		seen[k] = true
	}
	if len(recs) != req.Limit {
		t.Fatalf("the ordered claim took %d heads, want %d", len(recs), req.Limit)
	}
	t.Logf("%s: one ordered claim of %d at a %d-row backlog over %d keys took %v (%d statements)", b.Name, req.Limit, rows, keys, took, len(rec.stmts))
	var walk, lock *recordedStmt
	for i, st := range rec.stmts {
		switch {
		case strings.Contains(st.query, "WITH RECURSIVE") || strings.Contains(st.query, "GROUP BY walk_key"):
			walk = &rec.stmts[i]
		case strings.Contains(st.query, "locked_by IS NULL AND available_at <= ") && !strings.Contains(st.query, "ordering_key IS NULL") &&
			!strings.Contains(st.query, "due_at"):
			lock = &rec.stmts[i]
		}
	}
	if walk == nil || lock == nil {
		t.Fatalf("the ordered claim's statements: no walk of the keys or no lock of the heads among %d", len(rec.stmts))
	}
	t.Logf("walk statement:\n%s", walk.query)
	t.Logf("lock statement:\n%s", lock.query)
	switch b.Dialect {
	case outboxsql.PostgreSQL:
		explainPostgres(t, db, "walk of the keys", pgIndex(table, "walk"), *walk)
		explainPostgres(t, db, "lock of the heads", strings.TrimSuffix(pgIndex(table, "pkey"), "_idx"), *lock)
	case outboxsql.MySQL:
		explainMySQLWalk(t, db, "walk of the keys", *walk)
		explainMySQL(t, db, "lock of the heads", "PRIMARY", *lock)
	case outboxsql.SQLite:
		for what, st := range map[string]*recordedStmt{"walk of the keys": walk, "lock of the heads": lock} {
			plan := explain(t, db, st.query, st.args...)
			t.Logf("%s plan:\n%s", what, plan)
			if strings.Contains(plan, "TEMP B-TREE") || strings.Contains(plan, "SCAN "+table) {
				t.Errorf("%s scans the table or sorts", what)
			}
		}
		if plan := explain(t, db, walk.query, walk.args...); !strings.Contains(plan, table+"_walk_idx") {
			t.Errorf("the walk of the keys does not use %s_walk_idx", table)
		}
	}
}

// explainMySQLWalk checks the plan of st, the walk of the keys of an
// ordered claim on MySQL or MariaDB.
func explainMySQLWalk(t *testing.T, db *sql.DB, what string, st recordedStmt) {
	plan := planText(t, db, "EXPLAIN FORMAT=JSON "+st.query, st.args...)
	t.Logf("EXPLAIN FORMAT=JSON of the %s:\n%s", what, plan)
	// A loose index scan (one entry per key) where the statistics say
	// keys have many entries, else a range scan of the index in order
	// that stops after the keys it needs: either reads the index only.
	t.Logf("loose index scan: %v", strings.Contains(plan, `"using_index_for_group_by": true`))
	for _, want := range []string{`"key": "outbox_walk_idx"`, `"using_index`, `"key": "outbox_seq_idx"`} {
		if !strings.Contains(plan, want) {
			t.Errorf("the %s: no %s in its plan", what, want)
		}
	}
	if strings.Contains(plan, `"filesort"`) || strings.Contains(plan, `"using_filesort": true`) {
		t.Errorf("the %s sorts", what)
	}
	t.Logf("ANALYZE of the %s (rows really read):\n%s", what, planText(t, db, mysqlAnalyze(t, db)+st.query, st.args...))
}

// mysqlAnalyze returns the statement prefix that runs a query and reports
// the rows it read: ANALYZE FORMAT=JSON on MariaDB, EXPLAIN ANALYZE on
// MySQL.
func mysqlAnalyze(t *testing.T, db *sql.DB) string {
	var version string
	if err := db.QueryRowContext(context.Background(), "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(version, "MariaDB") {
		return "ANALYZE FORMAT=JSON "
	}
	return "EXPLAIN ANALYZE "
}

// bulkLoadOrdered inserts n ordered events in one statement, event i on key
// "k<i mod keys>", due one millisecond apart from base; marks the first
// tenth DONE (their old index entries stay until a vacuum), claims the heads
// of keys 1 to keys/10 for another owner, and refreshes the statistics.
func bulkLoadOrdered(t *testing.T, b outboxsqltest.Backend, db *sql.DB, table string, base time.Time, n, keys int) {
	t.Helper()
	ctx := context.Background()
	const cols = "event_id, event_type, aggregate_type, payload, status, attempts, occurred_at, available_at, created_at, ordering_key"
	var load, analyze string
	var args []any
	switch b.Dialect {
	case outboxsql.PostgreSQL:
		load = "INSERT INTO " + table + " (" + cols + ") SELECT lpad(i::text, 26, '0'), 'Bulk', '__GLOBAL__', '{\"n\":1}', 0, 0, at, at, at, 'k' || (i % $3::int)" +
			" FROM (SELECT i, $1::timestamptz + i * interval '1 millisecond' AS at FROM generate_series(1, $2::int) AS g(i)) AS s"
		args = []any{base, n, keys}
		analyze = "ANALYZE " + table
	case outboxsql.MySQL:
		load = "INSERT INTO " + table + " (" + cols + ") SELECT LPAD(n, 26, '0'), 'Bulk', '__GLOBAL__', '{\"n\":1}', 0, 0, at, at, at, CONCAT('k', n % ?)" +
			" FROM " + mysqlNumbered
		args = []any{keys, base.Format("2006-01-02 15:04:05"), n}
		analyze = "ANALYZE TABLE " + table
	case outboxsql.SQLite:
		us := base.UnixMicro()
		load = "WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?) INSERT INTO " + table + " (" + cols + ")" +
			" SELECT printf('%026d', i), 'Bulk', '__GLOBAL__', '{\"n\":1}', 0, 0, ? + i * 1000, ? + i * 1000, ? + i * 1000, 'k' || (i % ?) FROM g"
		args = []any{n, us, us, us, keys}
		analyze = "ANALYZE"
	default:
		t.Fatalf("no bulk load for dialect %s", b.Dialect.Name())
	}
	if _, err := db.ExecContext(ctx, load, args...); err != nil {
		t.Fatalf("bulk load: %v", err)
	}
	done := outboxsql.Rebind(b.Dialect, "UPDATE "+table+" SET status = 1, done_at = created_at WHERE event_id <= ?")
	if _, err := db.ExecContext(ctx, done, fmt.Sprintf("%026d", n/10)); err != nil {
		t.Fatalf("mark the first tenth DONE: %v", err)
	}
	claim := outboxsql.Rebind(b.Dialect, "UPDATE "+table+" SET locked_by = 'busy', locked_at = ? WHERE event_id > ? AND event_id <= ?")
	now := map[string]any{"postgres": base.Add(24 * time.Hour), "mysql": base.Add(24 * time.Hour).Format("2006-01-02 15:04:05"),
		"sqlite": base.Add(24 * time.Hour).UnixMicro()}[b.Dialect.Name()]
	if _, err := db.ExecContext(ctx, claim, now, fmt.Sprintf("%026d", n/10), fmt.Sprintf("%026d", n/10+keys/10)); err != nil {
		t.Fatalf("claim the heads of a tenth of the keys: %v", err)
	}
	r, err := db.QueryContext(ctx, analyze)
	if err != nil {
		t.Fatalf("%s: %v", analyze, err)
	}
	_ = r.Close()
}

// bulkExec runs the bulk load statement load with args, then analyze,
// the statement that refreshes the table's statistics.
func bulkExec(t *testing.T, db *sql.DB, load string, args []any, analyze string) {
	t.Helper()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, load, args...); err != nil {
		t.Fatalf("bulk load: %v", err)
	}
	r, err := db.QueryContext(ctx, analyze)
	if err != nil {
		t.Fatalf("%s: %v", analyze, err)
	}
	_ = r.Close()
}

// mysqlNumbered is a derived table of the numbers n from 1 to its second
// argument (at most 1,000,000), each with at, its first argument (a
// DATETIME) plus n milliseconds, in n order: a cross join of six digit
// tables, which counts to a million on MySQL and MariaDB alike (MariaDB's
// seq_1_to_N engine is not in MySQL).
const mysqlNumbered = "(SELECT n, CAST(? AS DATETIME(6)) + INTERVAL n * 1000 MICROSECOND AS at FROM (SELECT " +
	"d0.d + 10 * d1.d + 100 * d2.d + 1000 * d3.d + 10000 * d4.d + 100000 * d5.d + 1 AS n FROM " +
	mysqlDigits + " d0, " + mysqlDigits + " d1, " + mysqlDigits + " d2, " + mysqlDigits + " d3, " + mysqlDigits + " d4, " + mysqlDigits + " d5" +
	") AS s WHERE n <= ? ORDER BY n) AS r"

// mysqlDigits is a table of the digits 0 to 9.
const mysqlDigits = "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4" +
	" UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"

// pgIndex names a PostgreSQL index of the schema: {name}_{kind}_idx.
func pgIndex(table, kind string) string {
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		table = table[i+1:]
	}
	return table + "_" + kind + "_idx"
}

// bulkLoad inserts n pending rows, due one millisecond apart from base, in
// one statement; claims the first live of them for another owner at now
// and the next expired ones a day before; and refreshes the statistics.
func bulkLoad(t *testing.T, b outboxsqltest.Backend, db *sql.DB, store *outboxsql.Store, base time.Time, n, live, expired int, now time.Time) {
	t.Helper()
	ctx := context.Background()
	table := store.Table()
	const cols = "event_id, event_type, aggregate_type, payload, status, attempts, occurred_at, available_at, created_at"
	var load, analyze string
	var args []any
	switch b.Dialect {
	case outboxsql.PostgreSQL:
		load = "INSERT INTO " + table + " (" + cols + ") SELECT lpad(i::text, 26, '0'), 'Bulk', '__GLOBAL__', '{\"n\":1}', 0, 0, at, at, at" +
			" FROM (SELECT i, $1::timestamptz + i * interval '1 millisecond' AS at FROM generate_series(1, $2::int) AS g(i)) AS s"
		args = []any{base, n}
		analyze = "ANALYZE " + table
	case outboxsql.MySQL:
		load = "INSERT INTO " + table + " (" + cols + ") SELECT LPAD(n, 26, '0'), 'Bulk', '__GLOBAL__', '{\"n\":1}', 0, 0, at, at, at" +
			" FROM " + mysqlNumbered
		args = []any{base.Format("2006-01-02 15:04:05"), n}
		analyze = "ANALYZE TABLE " + table
		if n > 1_000_000 {
			t.Fatalf("the MySQL bulk load counts to 1,000,000 at most")
		}
	case outboxsql.SQLite:
		us := base.UnixMicro()
		load = "WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?) INSERT INTO " + table + " (" + cols + ")" +
			" SELECT printf('%026d', i), 'Bulk', '__GLOBAL__', '{\"n\":1}', 0, 0, ? + i * 1000, ? + i * 1000, ? + i * 1000 FROM g"
		args = []any{n, us, us, us}
		analyze = "ANALYZE"
	default:
		t.Fatalf("no bulk load for dialect %s", b.Dialect.Name())
	}
	if _, err := db.ExecContext(ctx, load, args...); err != nil {
		t.Fatalf("bulk load: %v", err)
	}
	// The claims, through the store's own statements: Renew sets the claim
	// time of rows claimed by their owner.
	ids := func(from, to int) []string {
		out := make([]string, 0, to-from)
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("%026d", i+1))
		}
		return out
	}
	claim := outboxsql.Rebind(b.Dialect, "UPDATE "+table+" SET locked_by = ? WHERE event_id <= ?")
	if _, err := db.ExecContext(ctx, claim, "busy", fmt.Sprintf("%026d", live+expired)); err != nil {
		t.Fatalf("claim the first rows: %v", err)
	}
	if _, err := store.Renew(ctx, "busy", ids(0, live), now); err != nil {
		t.Fatalf("renew the live claims: %v", err)
	}
	if _, err := store.Renew(ctx, "busy", ids(live, live+expired), now.Add(-24*time.Hour)); err != nil {
		t.Fatalf("renew the expired claims: %v", err)
	}
	r, err := db.QueryContext(ctx, analyze)
	if err != nil {
		t.Fatalf("%s: %v", analyze, err)
	}
	_ = r.Close()
}

// recording returns a store on table of b whose statements run through
// rec in one transaction of db, and rollback, which ends it (undoing what
// they wrote).
func recording(t *testing.T, b outboxsqltest.Backend, db *sql.DB, table string) (s *sqlstore.Store, rec *stmtRecorder, rollback func()) {
	t.Helper()
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rec = &stmtRecorder{tx: tx}
	s, err = sqlstore.New(rec, sqlstore.WithDialect(b.Dialect), sqlstore.WithTable(table))
	if err != nil {
		_ = tx.Rollback()
		t.Fatal(err)
	}
	return s, rec, func() { _ = tx.Rollback() }
}

// stmtRecorder is a sqlstore.DB that runs everything in one transaction
// (which the test rolls back) and remembers the queries run through it.
type stmtRecorder struct {
	tx    *sql.Tx
	stmts []recordedStmt // the queries
	execs []recordedStmt // the statements run with Exec
}

type recordedStmt struct {
	query string
	args  []any
}

func (r *stmtRecorder) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	r.execs = append(r.execs, recordedStmt{query, args})
	res, err := r.tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (r *stmtRecorder) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	r.stmts = append(r.stmts, recordedStmt{query, args})
	return r.tx.QueryContext(ctx, query, args...)
}

// ReadCommitted runs fn in the recorder's own transaction.
func (r *stmtRecorder) ReadCommitted(_ context.Context, fn func(tx sqlstore.Conn) error) error {
	return fn(r)
}

// planText runs an EXPLAIN and joins its rows (one column each).
func planText(t *testing.T, ex interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string, args ...any) string {
	t.Helper()
	rows, err := ex.QueryContext(context.Background(), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, v := range vals {
			parts = append(parts, v.String)
		}
		lines = append(lines, strings.Join(parts, " | "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

var pgSortNode = regexp.MustCompile(`(?m)^\s*(->\s+)?(Incremental )?Sort\b`)

var pgRowsRemoved = regexp.MustCompile(`Rows Removed by Filter: (\d+)`)

// explainPostgres checks the custom plan (what lib/pq's unnamed statements
// get) and the generic plan (what a cached prepared statement, as pgx
// keeps them, may switch to after five runs) of one claim statement.
func explainPostgres(t *testing.T, db *sql.DB, what, index string, st recordedStmt) {
	check := func(plan string, kind string) {
		t.Helper()
		t.Logf("%s %s plan:\n%s", kind, what, plan)
		// A bitmap scan (which PostgreSQL may prefer on a small table)
		// reads the index too; it loses its order, which the sort check
		// below then catches where the order matters.
		if !strings.Contains(plan, "Index Scan using "+index) && !strings.Contains(plan, "Bitmap Index Scan on "+index) {
			t.Errorf("%s %s plan does not scan %s", kind, what, index)
		}
		if strings.Contains(plan, "Seq Scan") {
			t.Errorf("%s %s plan has a sequential scan", kind, what)
		}
		if pgSortNode.MatchString(plan) {
			t.Errorf("%s %s plan sorts", kind, what)
		}
		for _, m := range pgRowsRemoved.FindAllStringSubmatch(plan, -1) {
			if n, _ := strconv.Atoi(m[1]); n > 1000 {
				t.Errorf("%s %s plan steps over %d rows", kind, what, n)
			}
		}
	}
	custom, generic := pgPlans(t, db, st)
	check(custom, "custom")
	check(generic, "generic")
}

// pgPlans returns EXPLAIN (ANALYZE, BUFFERS) of st in its custom plan (what
// lib/pq's unnamed statements get) and in its generic plan (what a cached
// prepared statement, as pgx keeps them, may switch to after five runs),
// in a transaction that is rolled back.
func pgPlans(t *testing.T, db *sql.DB, st recordedStmt) (custom, generic string) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }() // EXPLAIN ANALYZE runs an UPDATE or DELETE: undo it
	custom = planText(t, tx, "EXPLAIN (ANALYZE, BUFFERS) "+st.query, st.args...)

	if _, err := tx.ExecContext(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "PREPARE outbox_claim_probe AS "+st.query); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = tx.ExecContext(ctx, "DEALLOCATE outbox_claim_probe") }()
	// EXECUTE takes no bind parameters inside EXPLAIN: the arguments go in
	// as literals (the test's own values).
	params := make([]string, len(st.args))
	for i, a := range st.args {
		params[i] = pgLiteral(t, a)
	}
	execute := "EXECUTE outbox_claim_probe"
	if len(params) > 0 {
		execute += "(" + strings.Join(params, ", ") + ")"
	}
	generic = planText(t, tx, "EXPLAIN (ANALYZE, BUFFERS) "+execute)
	return custom, generic
}

// pgLiteral writes one of the claim's arguments as a PostgreSQL literal.
func pgLiteral(t *testing.T, v any) string {
	t.Helper()
	switch v := v.(type) {
	case string:
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	case time.Time:
		return "'" + v.UTC().Format(time.RFC3339Nano) + "'"
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	}
	t.Fatalf("no literal for %T", v)
	return ""
}

// explainMySQL checks EXPLAIN FORMAT=JSON of one of the claim's locking
// SELECTs and logs how many rows it really reads.
func explainMySQL(t *testing.T, db *sql.DB, what, index string, st recordedStmt) {
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	plan := planText(t, tx, "EXPLAIN FORMAT=JSON "+st.query, st.args...)
	t.Logf("EXPLAIN FORMAT=JSON of the %s:\n%s", what, plan)
	if !strings.Contains(plan, `"key": "`+index+`"`) {
		t.Errorf("the %s does not use %s", what, index)
	}
	for _, bad := range []string{`"access_type": "ALL"`, `"filesort": {`, `"using_filesort": true`} {
		if strings.Contains(plan, bad) {
			t.Errorf("the %s plan has %s", what, bad)
		}
	}
	var version string
	if err := tx.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	analyze := "EXPLAIN ANALYZE " // MySQL 8.0.18+
	if strings.Contains(version, "MariaDB") {
		analyze = "ANALYZE FORMAT=JSON "
	}
	t.Logf("%s%s on %s (rows really read):\n%s", analyze, what, version, planText(t, tx, analyze+st.query, st.args...))
}
