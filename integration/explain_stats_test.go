package integration

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
)

// sqliteWholeIndex is a SQLite plan line that reads a whole index of every
// row or of the terminal ones.
var sqliteWholeIndex = regexp.MustCompile(`(?m)^SCAN \w+ USING (COVERING )?INDEX \w+_(purge|tnt)_idx$`)

// sqliteTableScan reports whether a SQLite plan reads the whole table: a
// SCAN of it, or of an alias of it (a scan of the subquery p of pending
// rows reads what its own lines say).
func sqliteTableScan(plan, table string) bool {
	for _, m := range sqliteFullScan.FindAllString(plan, -1) {
		if m != "SCAN p" {
			return true
		}
	}
	return strings.Contains(plan, "SCAN "+table+"\n")
}

// TestExplainStats loads the table of TestExplainTenant (1M events by
// default: 90% DONE, 5% DEAD, 5% NEW) and checks the plans of the very
// statements Store.Stats runs: none may read the whole table (the counts
// of pending and DEAD events read their indexes; DONE is an estimate). It
// checks the figures against exact counts, the DONE estimate within a
// tenth, and logs how long Stats takes (the median of five) so that it can
// be quoted (docs/databases.md).
func TestExplainStats(t *testing.T) {
	rows := explainRows(t, "the plans of Stats")
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		skipPartitioned(t, b)
		ctx := context.Background()
		db, store, base := tenantTable(t, b, rows)
		table := store.Table()
		now := base.Add(time.Duration(rows/2) * time.Millisecond)

		var took []time.Duration
		var st outbox.Stats
		for range 5 {
			start := time.Now()
			var err error
			if st, err = store.Stats(ctx, now); err != nil {
				t.Fatal(err)
			}
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		t.Logf("%s: Stats at a %d-row table took %v (median of 5; min %v, max %v): %+v", b.Name, rows, took[2], took[0], took[4], st)

		// The exact figures, counted here the slow way.
		exact := map[outbox.Status]int64{}
		for s := outbox.StatusNew; s <= outbox.StatusDead; s++ {
			q := outboxsql.Rebind(b.Dialect, "SELECT COUNT(*) FROM "+table+" WHERE status = ?")
			var n int64
			if err := db.QueryRowContext(ctx, q, int(s)).Scan(&n); err != nil {
				t.Fatal(err)
			}
			exact[s] = n
		}
		for _, s := range []outbox.Status{outbox.StatusNew, outbox.StatusRetry, outbox.StatusDead} {
			if st.ByStatus[s] != exact[s] {
				t.Errorf("ByStatus[%v] = %d, want %d (exact)", s, st.ByStatus[s], exact[s])
			}
		}
		done := st.ByStatus[outbox.StatusDone]
		if !st.DoneEstimated && done != exact[outbox.StatusDone] {
			t.Errorf("ByStatus[DONE] = %d, want %d (exact, not marked as an estimate)", done, exact[outbox.StatusDone])
		}
		if diff := done - exact[outbox.StatusDone]; diff*10 > exact[outbox.StatusDone] || -diff*10 > exact[outbox.StatusDone] {
			t.Errorf("ByStatus[DONE] = %d, estimated %v, want within a tenth of %d", done, st.DoneEstimated, exact[outbox.StatusDone])
		}
		t.Logf("%s: DONE %d (estimated: %v), exactly %d", b.Name, done, st.DoneEstimated, exact[outbox.StatusDone])

		// The statements, as the store runs them, in a transaction rolled back.
		recorded, rec, rollback := recording(t, b, db, table)
		_, err := recorded.Stats(ctx, now)
		rollback()
		if err != nil {
			t.Fatal(err)
		}
		for i, st := range rec.stmts {
			t.Logf("%s: Stats statement %d:\n%s", b.Name, i+1, st.query)
			// Below 100,000 rows (sqlstore's exactDoneBelow) Stats counts
			// the DONE rows exactly, and a planner may rightly read the
			// whole small table for it.
			if rows < 100_000 && strings.HasSuffix(st.query, "status IN (1, 3) AND status = 1") {
				t.Logf("%s: Stats statement %d counts the DONE rows of a small table: its plan is not checked", b.Name, i+1)
				continue
			}
			switch b.Dialect {
			case outboxsql.PostgreSQL:
				custom, generic := pgPlans(t, db, st)
				for kind, plan := range map[string]string{"custom": custom, "generic": generic} {
					t.Logf("%s plan of Stats statement %d:\n%s", kind, i+1, plan)
					if strings.Contains(plan, "Seq Scan on "+table) {
						t.Errorf("the %s plan of Stats statement %d reads the whole table", kind, i+1)
					}
				}
			case outboxsql.MySQL:
				plan := planText(t, db, "EXPLAIN FORMAT=JSON "+st.query, st.args...)
				t.Logf("EXPLAIN FORMAT=JSON of Stats statement %d:\n%s", i+1, plan)
				if strings.Contains(plan, `"access_type": "ALL"`) || strings.Contains(plan, `"access_type": "index"`) {
					t.Errorf("Stats statement %d reads the whole table or a whole index", i+1)
				}
				t.Logf("ANALYZE of Stats statement %d (rows really read):\n%s", i+1, planText(t, db, mysqlAnalyze(t, db)+st.query, st.args...))
			case outboxsql.SQLite:
				plan := explain(t, db, st.query, st.args...)
				t.Logf("plan of Stats statement %d:\n%s", i+1, plan)
				// A scan of a partial index of pending rows is fine; of
				// the table, or of an index of every row or of the
				// terminal ones, it is not.
				if sqliteTableScan(plan, table) || sqliteWholeIndex.MatchString(plan) {
					t.Errorf("Stats statement %d reads the whole table", i+1)
				}
			default:
				t.Fatalf("no plan check for dialect %s", b.Dialect.Name())
			}
		}

		// The retention's purge of DONE events of every tenant (a batch
		// of the oldest tenth), and the count an operator is shown first.
		purge := outbox.PurgeRequest{Status: outbox.StatusDone, Before: base.Add(time.Duration(rows/10) * time.Millisecond), Limit: outbox.DefaultPurgeBatch}
		for _, q := range []scaleQuery{
			{what: "purge batch", run: func(s *outboxsql.Store) error {
				n, err := s.Purge(ctx, purge)
				if err == nil && n != int64(min(purge.Limit, rows/20)) {
					err = fmt.Errorf("the purge deleted %d events, want %d", n, min(purge.Limit, rows/20))
				}
				return err
			}},
			// A count reads every row it counts (a tenth of the table):
			// a planner may rightly read it all.
			{what: "CountPurgeable", scans: true, run: func(s *outboxsql.Store) error {
				_, err := s.CountPurgeable(ctx, purge)
				return err
			}},
		} {
			for _, st := range q.statements(t, b, db, table) {
				t.Logf("%s: %s statement:\n%s", b.Name, q.what, st.query)
				reads, _ := checkScalePlan(t, b, db, table, q.what, st, q.sorts, q.scans)
				t.Logf("%s: %s reads %v", b.Name, q.what, reads)
			}
		}
	})
}
