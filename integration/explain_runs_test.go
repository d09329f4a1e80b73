package integration

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
)

// TestExplainRuns checks the statements that runs add to the ordered
// claim (outbox.ClaimRequest.Run) at a backlog of ordered events over 10
// keys (the first tenth DONE, one key's head claimed by another owner):
// one claim of 100 with runs of 32 must take the 9 free keys' heads and
// their runs, each in order, reading the runs on the order index, a
// bounded range per key; and the recovery of the other owner's expired
// claim checks that it is a head on the order index too.
func TestExplainRuns(t *testing.T) {
	rows := explainRows(t, "the statements of runs")
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		ctx := context.Background()
		db := b.Open(t)
		store := b.NewStore(t, db)
		table := store.Table()
		base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		const keys = 10
		start := time.Now()
		bulkLoadOrdered(t, b, db, table, base, rows, keys)
		t.Logf("%s: loaded %d ordered events over %d keys in %v", b.Name, rows, keys, time.Since(start).Round(time.Millisecond))
		now := base.Add(24 * time.Hour)
		req := outbox.ClaimRequest{Owner: "explain", Now: now, Lease: 15 * time.Second, Limit: 100, Ordered: true, NoRecovery: true, Run: 32}
		recorded, rec, rollback := recording(t, b, db, table)
		start = time.Now()
		recs, err := recorded.Claim(ctx, req)
		took := time.Since(start)
		rollback()
		if err != nil {
			t.Fatal(err)
		}
		perKey := map[string][]int64{}
		for _, r := range recs {
			perKey[r.Envelope.OrderingKey()] = append(perKey[r.Envelope.OrderingKey()], r.Seq)
		}
		if len(recs) != req.Limit || len(perKey) != keys-1 {
			t.Fatalf("the claim took %d events of %d keys, want %d of %d", len(recs), len(perKey), req.Limit, keys-1)
		}
		t.Logf("%s: one ordered claim of %d with runs of %d at a %d-row backlog over %d keys took %v (%d statements)",
			b.Name, req.Limit, req.Run, rows, keys, took, len(rec.stmts))
		for i := range 3 { // the claim again, on the store's own connections, released after
			start := time.Now()
			got, err := store.Claim(ctx, req)
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			ids := make([]string, len(got))
			for j, r := range got {
				ids[j] = r.ID
			}
			if _, err := store.Release(ctx, req.Owner, ids); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: claim %d of %d events (runs of %d) took %v", b.Name, i+1, len(got), req.Run, took)
		}
		read := findStmt(rec.stmts, " AS part, ")
		if read == nil {
			t.Fatalf("no read of the runs among the claim's %d statements", len(rec.stmts))
		}
		// The recovery of the other owner's claim, once it expired.
		recorded, rec, rollback = recording(t, b, db, table)
		late := outbox.ClaimRequest{Owner: "explain", Now: now.Add(time.Hour), Lease: 15 * time.Second, Limit: 100, Ordered: true, Run: 32}
		if _, err := recorded.Claim(ctx, late); err != nil {
			rollback()
			t.Fatal(err)
		}
		rollback()
		heads := findStmt(rec.stmts, "SELECT r.event_id FROM")
		if heads == nil {
			t.Fatalf("no check of the recovered events among the claim's %d statements", len(rec.stmts))
		}
		checks := map[string]*recordedStmt{"read of the runs": read, "check of the recovered heads": heads}
		for what, st := range checks {
			t.Logf("%s statement:\n%s", what, st.query)
			switch b.Dialect {
			case outboxsql.PostgreSQL:
				custom, generic := pgPlans(t, db, *st)
				for kind, plan := range map[string]string{"custom": custom, "generic": generic} {
					t.Logf("%s %s plan:\n%s", kind, what, plan)
					if !strings.Contains(plan, " using "+pgIndex(table, "order")) || strings.Contains(plan, "Seq Scan") || pgSortNode.MatchString(plan) {
						t.Errorf("the %s %s plan does not read %s alone, or sorts", kind, what, pgIndex(table, "order"))
					}
				}
			case outboxsql.MySQL:
				// The read of the runs materializes each key's few events
				// (a derived table, read whole); the table itself is read on
				// the order index.
				plan := planText(t, db, "EXPLAIN FORMAT=JSON "+st.query, st.args...)
				t.Logf("EXPLAIN FORMAT=JSON of the %s:\n%s", what, plan)
				if !strings.Contains(plan, `"key": "outbox_order_idx"`) || strings.Contains(plan, `"filesort"`) ||
					regexp.MustCompile(`"table_name": "[^<"][^"]*",\s*"access_type": "ALL"`).MatchString(plan) {
					t.Errorf("the %s does not read the table on outbox_order_idx alone, or sorts", what)
				}
			case outboxsql.SQLite:
				plan := explain(t, db, st.query, st.args...)
				t.Logf("%s plan:\n%s", what, plan)
				if !strings.Contains(plan, table+"_order_idx") || strings.Contains(plan, "SCAN "+table) || strings.Contains(plan, "TEMP B-TREE") {
					t.Errorf("the %s does not read %s_order_idx alone", what, table)
				}
			}
		}
	})
}

// findStmt returns the last of stmts whose query contains s, or nil.
func findStmt(stmts []recordedStmt, s string) *recordedStmt {
	var found *recordedStmt
	for i, st := range stmts {
		if strings.Contains(st.query, s) {
			found = &stmts[i]
		}
	}
	return found
}
