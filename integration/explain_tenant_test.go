package integration

import (
	"context"
	"database/sql"
	"regexp"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/sqlstore"
)

// explainTenant is the tenant whose admin queries TestExplainTenant checks.
const explainTenant = "t7"

// TestExplainTenant loads a table of 1M events (by default) of 45 tenants
// and none (a tenth), 90% DONE, 5% DEAD and 5% NEW, and checks the plans of
// the very statements the store runs for one tenant's admin queries: a
// page of its DEAD events after the first page, the count of its DEAD
// events, the count of all its events and a purge of its old DONE events.
// Each must read the tenant index (no sequential scan); the page must read
// it in id order (no sort) and stop after its rows. PostgreSQL is checked
// in the custom and in the generic plan. The plans and the time of each
// statement are logged so that they can be quoted (docs/databases.md).
func TestExplainTenant(t *testing.T) {
	rows := explainRows(t, "the plans of a tenant's admin queries")
	// The tenant has one DEAD event in 1,000 rows, and 17 DONE: the pages
	// and the purge are sized for 1M rows (100, 50 and 500 events) and
	// shrink with a smaller table.
	page := min(100, rows/10_000)
	if page < 2 {
		t.Skipf("%d rows give %s too few DEAD events to page through: want at least 20,000", rows, explainTenant)
	}
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		skipPartitioned(t, b)
		ctx := context.Background()
		db, store, base := tenantTable(t, b, rows)
		table := store.Table()

		dead := []outbox.Status{outbox.StatusDead}
		first, err := store.List(ctx, outbox.Query{TenantID: explainTenant, Statuses: dead, Limit: page})
		if err != nil || len(first) != page {
			t.Fatalf("the first page of %s's DEAD events: %d events, %v", explainTenant, len(first), err)
		}
		after := first[len(first)-1].ID
		for _, c := range []struct {
			what    string
			ordered bool // read in id order: no sort
			run     func(s *sqlstore.Store) error
		}{
			{"page of a tenant's DEAD events", true, func(s *sqlstore.Store) error {
				recs, err := s.List(ctx, outbox.Query{TenantID: explainTenant, Statuses: dead, AfterID: after, Limit: page / 2})
				if err == nil && (len(recs) != page/2 || recs[0].ID <= after || recs[0].Envelope.TenantID() != explainTenant) {
					t.Errorf("the page after %s: %d events", after, len(recs))
				}
				return err
			}},
			{"count of a tenant's DEAD events", false, func(s *sqlstore.Store) error {
				n, err := s.Count(ctx, outbox.Query{TenantID: explainTenant, Statuses: dead})
				t.Logf("%s has %d DEAD events", explainTenant, n)
				return err
			}},
			{"count of a tenant's events", false, func(s *sqlstore.Store) error {
				n, err := s.Count(ctx, outbox.Query{TenantID: explainTenant})
				t.Logf("%s has %d events", explainTenant, n)
				return err
			}},
			{"purge of a tenant's DONE events", false, func(s *sqlstore.Store) error {
				n, err := s.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDone, Before: base.Add(time.Duration(rows/2) * time.Millisecond),
					Limit: 5 * page, TenantID: explainTenant})
				if err == nil && n != int64(5*page) {
					t.Errorf("the purge deleted %d events, want %d", n, 5*page)
				}
				return err
			}},
		} {
			// The statement, as the store runs it, in a transaction that
			// is rolled back (the purge deletes nothing for good).
			recorded, rec, rollback := recording(t, b, db, table)
			start := time.Now()
			err := c.run(recorded)
			took := time.Since(start)
			rollback()
			if err != nil {
				t.Fatalf("%s: %v", c.what, err)
			}
			stmts := append(rec.stmts, rec.execs...)
			if len(stmts) != 1 {
				t.Fatalf("%s ran %d statements, want 1", c.what, len(stmts))
			}
			st := stmts[0]
			t.Logf("%s: %s at a %d-row table took %v; statement:\n%s", b.Name, c.what, rows, took, st.query)
			switch b.Dialect {
			case outboxsql.PostgreSQL:
				custom, generic := pgPlans(t, db, st)
				for kind, plan := range map[string]string{"custom": custom, "generic": generic} {
					t.Logf("%s %s plan:\n%s", kind, c.what, plan)
					checkTenantPlan(t, kind+" "+c.what, plan, pgIndex(table, "tnt"), c.ordered)
				}
			case outboxsql.MySQL:
				explainMySQL(t, db, c.what, "outbox_tnt_idx", st)
			case outboxsql.SQLite:
				plan := explain(t, db, st.query, st.args...)
				t.Logf("%s plan:\n%s", c.what, plan)
				checkTenantPlan(t, c.what, plan, table+"_tnt_idx", c.ordered)
			default:
				t.Fatalf("no plan check for dialect %s", b.Dialect.Name())
			}
		}
	})
}

// sqliteFullScan is a SQLite plan line that reads the whole table.
var sqliteFullScan = regexp.MustCompile(`(?m)^SCAN \w+$`)

// checkTenantPlan checks a PostgreSQL or SQLite plan of a tenant's query:
// it reads index, never the whole table, and, when ordered, sorts nothing.
func checkTenantPlan(t *testing.T, what, plan, index string, ordered bool) {
	t.Helper()
	if !strings.Contains(plan, index) {
		t.Errorf("%s plan does not read %s", what, index)
	}
	if strings.Contains(plan, "Seq Scan") || sqliteFullScan.MatchString(plan) {
		t.Errorf("%s plan reads the whole table", what)
	}
	if ordered && (pgSortNode.MatchString(plan) || strings.Contains(plan, "TEMP B-TREE")) {
		t.Errorf("%s plan sorts", what)
	}
}

// tenantTable returns a store on a new table of b loaded by
// bulkLoadTenants with rows events from base, and its database.
func tenantTable(t *testing.T, b outboxsqltest.Backend, rows int) (*sql.DB, *outboxsql.Store, time.Time) {
	t.Helper()
	db := b.Open(t)
	store := b.NewStore(t, db)
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	start := time.Now()
	bulkLoadTenants(t, b, db, store.Table(), base, rows)
	t.Logf("%s: loaded %d events of 45 tenants and none in %v", b.Name, rows, time.Since(start).Round(time.Millisecond))
	return db, store, base
}

// bulkLoadTenants inserts n events in one statement, created one
// millisecond apart from base: event i is of tenant "t<(i/20)%50>", or of
// none when (i/20)%10 is 0 (so 45 tenants), and DEAD when i%20 is 1, NEW
// when it is 2, else DONE (ended when created); then it refreshes the
// statistics (PostgreSQL: VACUUM ANALYZE, for index-only counts).
func bulkLoadTenants(t *testing.T, b outboxsqltest.Backend, db *sql.DB, table string, base time.Time, n int) {
	t.Helper()
	const cols = "event_id, event_type, aggregate_type, payload, tenant_id, status, attempts, occurred_at, available_at, created_at, done_at"
	var load, analyze string
	var args []any
	switch b.Dialect {
	case outboxsql.PostgreSQL:
		load = "INSERT INTO " + table + " (" + cols + ") SELECT lpad(i::text, 26, '0'), 'Bulk', '__GLOBAL__', '{\"n\":1}'," +
			" CASE WHEN (i / 20) % 10 = 0 THEN '' ELSE 't' || ((i / 20) % 50) END," +
			" CASE i % 20 WHEN 1 THEN 3 WHEN 2 THEN 0 ELSE 1 END, 0, at, at, at, CASE i % 20 WHEN 2 THEN NULL ELSE at END" +
			" FROM (SELECT i, $1::timestamptz + i * interval '1 millisecond' AS at FROM generate_series(1, $2::int) AS g(i)) AS s"
		args = []any{base, n}
		analyze = "VACUUM ANALYZE " + table
	case outboxsql.MySQL:
		load = "INSERT INTO " + table + " (" + cols + ") SELECT LPAD(n, 26, '0'), 'Bulk', '__GLOBAL__', '{\"n\":1}'," +
			" CASE WHEN (n DIV 20) % 10 = 0 THEN '' ELSE CONCAT('t', (n DIV 20) % 50) END," +
			" CASE n % 20 WHEN 1 THEN 3 WHEN 2 THEN 0 ELSE 1 END, 0, at, at, at, CASE n % 20 WHEN 2 THEN NULL ELSE at END" +
			" FROM " + mysqlNumbered
		args = []any{base.Format("2006-01-02 15:04:05"), n}
		analyze = "ANALYZE TABLE " + table
		if n > 1_000_000 {
			t.Fatalf("the MySQL bulk load counts to 1,000,000 at most")
		}
	case outboxsql.SQLite:
		us := base.UnixMicro()
		load = "WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?) INSERT INTO " + table + " (" + cols + ")" +
			" SELECT printf('%026d', i), 'Bulk', '__GLOBAL__', '{\"n\":1}'," +
			" CASE WHEN (i / 20) % 10 = 0 THEN '' ELSE 't' || ((i / 20) % 50) END," +
			" CASE i % 20 WHEN 1 THEN 3 WHEN 2 THEN 0 ELSE 1 END, 0, ? + i * 1000, ? + i * 1000, ? + i * 1000," +
			" CASE i % 20 WHEN 2 THEN NULL ELSE ? + i * 1000 END FROM g"
		args = []any{n, us, us, us, us}
		analyze = "ANALYZE"
	default:
		t.Fatalf("no bulk load for dialect %s", b.Dialect.Name())
	}
	bulkExec(t, db, load, args, analyze)
}
