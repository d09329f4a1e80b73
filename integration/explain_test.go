package integration

import (
	"context"
	"database/sql"
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
// server-side statement, runs a claim, and checks the database's plan of
// the very statement the store ran: the claim must read its index in order
// and stop after the batch — no sequential scan and sort on PostgreSQL (in
// the custom and in the generic plan), no full scan or filesort on MySQL.
// The plans are logged so that they can be quoted.
func TestExplainClaim(t *testing.T) {
	if os.Getenv(envExplain) != "1" {
		t.Skipf("set %s=1 (make explain) to load a 1M-row backlog per server backend and check the claim's plan", envExplain)
	}
	rows := 1_000_000
	if v := os.Getenv(envExplainRows); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			t.Fatalf("%s=%q: want a number of rows, at least 1000", envExplainRows, v)
		}
		rows = n
	}
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		if !b.IsServer() {
			t.Skip("the plan check is for the server databases")
		}
		ctx := context.Background()
		db := b.Open(t)
		store := b.NewStore(t, db)
		base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		start := time.Now()
		bulkLoad(t, b, db, store.Table(), base, rows)
		t.Logf("%s: loaded %d pending rows in %v", b.Name, rows, time.Since(start).Round(time.Millisecond))

		// Capture the statement the store runs, with its arguments, in a
		// transaction that is rolled back.
		req := outbox.ClaimRequest{Owner: "explain", Now: base.Add(24 * time.Hour), Lease: 5 * time.Minute,
			OwnReclaimAfter: time.Second, Limit: 50}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		rec := &stmtRecorder{tx: tx}
		recorded, err := sqlstore.New(rec, sqlstore.WithDialect(b.Dialect), sqlstore.WithTable(store.Table()))
		if err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		recs, err := recorded.Claim(ctx, req)
		took := time.Since(start)
		_ = tx.Rollback()
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != req.Limit {
			t.Fatalf("claimed %d rows, want %d", len(recs), req.Limit)
		}
		t.Logf("%s: one claim of %d at a %d-row backlog took %v; statement:\n%s", b.Name, req.Limit, rows, took, rec.query)

		switch b.Dialect {
		case outboxsql.PostgreSQL:
			explainPostgres(t, db, store.Table(), rec)
		case outboxsql.MySQL:
			explainMySQL(t, db, rec)
		default:
			t.Fatalf("no plan check for dialect %s", b.Dialect.Name())
		}
	})
}

// bulkLoad inserts n pending rows, due one millisecond apart from base, in
// one statement, and refreshes the table's statistics.
func bulkLoad(t *testing.T, b outboxsqltest.Backend, db *sql.DB, table string, base time.Time, n int) {
	t.Helper()
	ctx := context.Background()
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
		// A cross join of six digit tables counts to a million on MySQL and
		// MariaDB alike (MariaDB's seq_1_to_N engine is not in MySQL).
		digits := "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4" +
			" UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
		load = "INSERT INTO " + table + " (" + cols + ") SELECT LPAD(n, 26, '0'), 'Bulk', '__GLOBAL__', '{\"n\":1}', 0, 0, at, at, at" +
			" FROM (SELECT n, CAST(? AS DATETIME(6)) + INTERVAL n * 1000 MICROSECOND AS at FROM (SELECT " +
			"d0.d + 10 * d1.d + 100 * d2.d + 1000 * d3.d + 10000 * d4.d + 100000 * d5.d + 1 AS n FROM " +
			digits + " d0, " + digits + " d1, " + digits + " d2, " + digits + " d3, " + digits + " d4, " + digits + " d5" +
			") AS s WHERE n <= ?) AS r"
		args = []any{base.Format("2006-01-02 15:04:05"), n}
		analyze = "ANALYZE TABLE " + table
	default:
		t.Fatalf("no bulk load for dialect %s", b.Dialect.Name())
	}
	if n > 1_000_000 && b.Dialect == outboxsql.MySQL {
		t.Fatalf("the MySQL bulk load counts to 1,000,000 at most")
	}
	if _, err := db.ExecContext(ctx, load, args...); err != nil {
		t.Fatalf("bulk load: %v", err)
	}
	r, err := db.QueryContext(ctx, analyze)
	if err != nil {
		t.Fatalf("%s: %v", analyze, err)
	}
	_ = r.Close()
}

// stmtRecorder is a sqlstore.DB that runs everything in one transaction
// (which the test rolls back) and remembers the first query run through it.
type stmtRecorder struct {
	tx    *sql.Tx
	query string
	args  []any
}

func (r *stmtRecorder) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := r.tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (r *stmtRecorder) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	if r.query == "" {
		r.query, r.args = query, args
	}
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

// explainPostgres checks the custom plan (what lib/pq's unnamed statements
// get) and the generic plan (what a cached prepared statement, as pgx
// keeps them, may switch to after five runs).
func explainPostgres(t *testing.T, db *sql.DB, table string, rec *stmtRecorder) {
	ctx := context.Background()
	index := table + "_claim_idx"
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		index = table[i+1:] + "_claim_idx"
	}
	check := func(what, plan string) {
		t.Helper()
		t.Logf("%s plan of the claim:\n%s", what, plan)
		if !strings.Contains(plan, "Index Scan using "+index) {
			t.Errorf("%s plan does not scan %s", what, index)
		}
		if strings.Contains(plan, "Seq Scan") {
			t.Errorf("%s plan has a sequential scan", what)
		}
		if pgSortNode.MatchString(plan) {
			t.Errorf("%s plan sorts", what)
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }() // EXPLAIN ANALYZE runs the UPDATE: undo it
	check("custom", planText(t, tx, "EXPLAIN (ANALYZE, BUFFERS) "+rec.query, rec.args...))

	if _, err := tx.ExecContext(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "PREPARE outbox_claim_probe AS "+rec.query); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = tx.ExecContext(ctx, "DEALLOCATE outbox_claim_probe") }()
	// EXECUTE takes no bind parameters inside EXPLAIN: the arguments go in
	// as literals (the test's own values).
	params := make([]string, len(rec.args))
	for i, a := range rec.args {
		params[i] = pgLiteral(t, a)
	}
	check("generic", planText(t, tx, "EXPLAIN (ANALYZE, BUFFERS) EXECUTE outbox_claim_probe("+strings.Join(params, ", ")+")"))
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

// explainMySQL checks EXPLAIN FORMAT=JSON of the claim's locking SELECT and
// logs how many rows it really reads.
func explainMySQL(t *testing.T, db *sql.DB, rec *stmtRecorder) {
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	plan := planText(t, tx, "EXPLAIN FORMAT=JSON "+rec.query, rec.args...)
	t.Logf("EXPLAIN FORMAT=JSON of the claim:\n%s", plan)
	if !strings.Contains(plan, `"key": "outbox_claim_idx"`) {
		t.Errorf("the claim does not use outbox_claim_idx")
	}
	for _, bad := range []string{`"access_type": "ALL"`, `"filesort": {`, `"using_filesort": true`} {
		if strings.Contains(plan, bad) {
			t.Errorf("the claim's plan has %s", bad)
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
	t.Logf("%son %s (rows really read):\n%s", analyze, version, planText(t, tx, analyze+rec.query, rec.args...))
}
