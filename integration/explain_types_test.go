package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
)

// TestExplainTypedClaim loads the backlog of TestExplainClaim (1M pending
// rows by default, none claimed), all of one type ("Bulk", another
// service's) but the last tenth, which is of two types a Client routes
// ("Mine0", "Mine1", interleaved), and runs one claim of 2000 rows of
// those two types (ClaimRequest.Types): it must read the type index once
// per type in due order and stop after its rows — never the 900k rows of
// the other type that come first in due order, nor the due index — and
// claim the first 2000 of the routed types. PostgreSQL is checked in the
// custom and in the generic plan. The plans and the claim's time are
// logged so that they can be quoted (docs/databases.md).
func TestExplainTypedClaim(t *testing.T) {
	rows := explainRows(t, "the plans of a claim of some event types")
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		skipPartitioned(t, b)
		ctx := context.Background()
		db := b.Open(t)
		store := b.NewStore(t, db)
		table := store.Table()
		base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		now := base.Add(24 * time.Hour)
		start := time.Now()
		bulkLoad(t, b, db, store, base, rows, 0, 0, now)
		// The last tenth: two routed types, interleaved (odd and even ids).
		mine := rows - rows/10
		retype := outboxsql.Rebind(b.Dialect, "UPDATE "+table+" SET event_type = CASE WHEN "+
			map[string]string{"postgres": "right(event_id, 1)", "mysql": "RIGHT(event_id, 1)", "sqlite": "substr(event_id, -1)"}[b.Dialect.Name()]+
			" IN ('0', '2', '4', '6', '8') THEN 'Mine0' ELSE 'Mine1' END WHERE event_id > ?")
		bulkExec(t, db, retype, []any{fmt.Sprintf("%026d", mine)},
			map[string]string{"postgres": "ANALYZE " + table, "mysql": "ANALYZE TABLE " + table, "sqlite": "ANALYZE"}[b.Dialect.Name()])
		t.Logf("%s: loaded %d pending rows, the last %d of types Mine0 and Mine1, in %v", b.Name, rows, rows-mine, time.Since(start).Round(time.Millisecond))

		recorded, rec, rollback := recording(t, b, db, table)
		req := outbox.ClaimRequest{Owner: "explain", Now: now, Lease: 15 * time.Second, Limit: 2000, NoRecovery: true, Types: []string{"Mine0", "Mine1"}}
		start = time.Now()
		recs, err := recorded.Claim(ctx, req)
		took := time.Since(start)
		rollback()
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != req.Limit {
			t.Fatalf("claimed %d rows, want %d", len(recs), req.Limit)
		}
		for i, r := range recs {
			if want := fmt.Sprintf("%026d", mine+i+1); r.ID != want {
				t.Fatalf("claimed %s (type %s) at %d, want %s: the routed types' rows in due order", r.ID, r.Envelope.Type(), i, want)
			}
		}
		t.Logf("%s: one claim of %d rows of 2 types past %d rows of another type took %v (%d statements)", b.Name, req.Limit, mine, took, len(rec.stmts))
		for i, st := range rec.stmts {
			what := "typed claim statement " + strconv.Itoa(i+1)
			t.Logf("%s:\n%s", what, st.query)
			switch b.Dialect {
			case outboxsql.PostgreSQL:
				custom, generic := pgPlans(t, db, st)
				for kind, plan := range map[string]string{"custom": custom, "generic": generic} {
					t.Logf("%s plan of the %s:\n%s", kind, what, plan)
					checkTypedPlan(t, kind+" "+what, plan, pgIndex(table, "type"), pgIndex(table, "due"))
				}
			case outboxsql.MySQL:
				if strings.Contains(st.query, "pending_type = ?") {
					explainMySQL(t, db, what, "outbox_type_idx", st)
				} else {
					explainMySQL(t, db, what, "PRIMARY", st)
				}
			case outboxsql.SQLite:
				plan := explain(t, db, st.query, st.args...)
				t.Logf("plan of the %s:\n%s", what, plan)
				checkTypedPlan(t, what, plan, table+"_type_idx", table+"_due_idx")
			default:
				t.Fatalf("no plan check for dialect %s", b.Dialect.Name())
			}
		}
	})
}

// checkTypedPlan checks a PostgreSQL or SQLite plan of a claim of some
// types: it reads the type index, neither the table nor the due index, and
// steps over few rows.
func checkTypedPlan(t *testing.T, what, plan, typeIndex, dueIndex string) {
	t.Helper()
	if !strings.Contains(plan, typeIndex) {
		t.Errorf("the %s does not read %s", what, typeIndex)
	}
	if strings.Contains(plan, dueIndex) {
		t.Errorf("the %s reads the due index %s", what, dueIndex)
	}
	if strings.Contains(plan, "Seq Scan") || sqliteFullScan.MatchString(plan) {
		t.Errorf("the %s reads the whole table", what)
	}
	for _, m := range pgRowsRemoved.FindAllStringSubmatch(plan, -1) {
		if n, _ := strconv.Atoi(m[1]); n > 1000 {
			t.Errorf("the %s steps over %d rows", what, n)
		}
	}
}
