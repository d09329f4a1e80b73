package sqlstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

func TestValidateTableName(t *testing.T) {
	valid := []string{"outbox_event", "_x", "T1", "app.outbox_event", "orders", "order_events", "users", "events", "status", "public.outbox", "main._t", strings.Repeat("a", 64), strings.Repeat("s", 64) + "." + strings.Repeat("t", 64)}
	invalid := []string{"", "1abc", "outbox_event; DROP TABLE users", "outbox_event;--", "a.b.c", "x-y", "tbl name", strings.Repeat("a", 65),
		`"quoted"`, "`t`", "[t]", "a.", ".a", "tablé", "t\n", "t'", "t/*x*/", "a..b",
		"order", "select", "group", "user", "Order", "SELECT", "app.order", "table.outbox_event", "key", "rank", "transaction"}
	for _, name := range valid {
		if err := ValidateTableName(name); err != nil {
			t.Errorf("ValidateTableName(%q) = %v, want nil", name, err)
		}
		if _, err := New(noDB{}, WithDialect(SQLite), WithTable(name)); err != nil {
			t.Errorf("New with table %q: %v", name, err)
		}
	}
	for _, name := range invalid {
		err := ValidateTableName(name)
		if !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("ValidateTableName(%q) = %v, want ErrInvalidConfig", name, err)
		}
		s, err := New(noDB{}, WithDialect(SQLite), WithTable(name))
		if s != nil || !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("New with table %q = %v, %v; want ErrInvalidConfig", name, s, err)
		}
	}
	err := ValidateTableName("outbox_event; DROP TABLE users")
	if err == nil || !strings.Contains(err.Error(), "not allowed") || !strings.Contains(err.Error(), "letters, digits and underscores") {
		t.Errorf("error does not explain the rule: %v", err)
	}
	err = ValidateTableName("app.Order")
	if err == nil || !strings.Contains(err.Error(), `"order" is a reserved word`) || !strings.Contains(err.Error(), "PostgreSQL, MySQL, SQLite") {
		t.Errorf("error does not name the reserved word and its databases: %v", err)
	}
}

func TestNewRejectsNilDialect(t *testing.T) {
	if _, err := New(noDB{}); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("New without a dialect = %v, want ErrInvalidConfig", err)
	}
	if _, err := New(nil, WithDialect(SQLite)); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("New without a DB = %v, want ErrInvalidConfig", err)
	}
}

func TestSchemaUsesTheTableName(t *testing.T) {
	s, err := New(noDB{}, WithDialect(SQLite), WithTable("app.my_outbox"))
	if err != nil {
		t.Fatal(err)
	}
	stmts := s.Schema()
	if len(stmts) != 16 {
		t.Fatalf("%d statements, want table, drop of the old claim index, 9 indexes, 4 control tables, the wake-up signal's row:\n%s", len(stmts), strings.Join(stmts, "\n---\n"))
	}
	for i, name := range []string{"pauses", "nodes", "audit", "wake"} {
		if st := stmts[11+i]; !strings.HasPrefix(st, "CREATE TABLE IF NOT EXISTS app.my_outbox_"+name+" (") {
			t.Errorf("control table statement: %s", st)
		}
	}
	if got := s.ControlTables(); !slices.Equal(got, []string{"app.my_outbox_pauses", "app.my_outbox_nodes", "app.my_outbox_audit", "app.my_outbox_wake"}) {
		t.Errorf("ControlTables = %v", got)
	}
	stmts = stmts[:11]
	if !strings.HasPrefix(stmts[0], "CREATE TABLE IF NOT EXISTS app.my_outbox (") {
		t.Errorf("table statement: %s", stmts[0])
	}
	if stmts[1] != "DROP INDEX IF EXISTS app.my_outbox_claim_idx" {
		t.Errorf("drop statement: %s", stmts[1])
	}
	for _, st := range stmts[2:] {
		if !strings.HasPrefix(st, "CREATE INDEX IF NOT EXISTS app.my_outbox_") || !strings.Contains(st, " ON my_outbox (") {
			t.Errorf("index statement does not follow SQLite's schema syntax: %s", st)
		}
	}
	for _, st := range stmts {
		if strings.Contains(st, "{{") || strings.HasSuffix(st, ";") || strings.Contains(st, "--") {
			t.Errorf("statement not rendered cleanly: %s", st)
		}
	}
	stmts[0] = "changed"
	if s.Schema()[0] == "changed" {
		t.Error("Schema returns the store's own slice")
	}
	if d, _ := New(noDB{}, WithDialect(SQLite)); d.Table() != DefaultTable || d.Dialect() != SQLite || SQLite.Name() != "sqlite" {
		t.Error("defaults: table or dialect")
	}
}

func TestNoStatementReadsTheDatabaseClock(t *testing.T) {
	for _, d := range []Dialect{SQLite, PostgreSQL, MySQL} {
		s, err := New(noDB{}, WithDialect(d))
		if err != nil {
			t.Fatal(err)
		}
		q := s.q
		all := []string{q.recoverClaim, q.freshClaim, q.markRetry, q.markDead, q.get, q.statsPending, q.statsDead, q.statsDone, q.purge, q.purgeTenant, q.insert.sql(colAll, 3, true), q.insert.sql(0, 3, false)}
		c := s.ctl
		all = append(all, c.setPause, c.deletePause, c.listPauses, c.beat, c.forget, c.leave, c.listNodes, c.appendAudit, c.auditPage)
		for _, b := range []*idsSQL{q.markDone, q.renew, q.release, q.replay, q.deleteDead, q.existing, q.undoInsert, c.forceDead, c.skipPending} {
			query, _ := b.bind(nil, []string{"a", "b"})
			all = append(all, query)
		}
		if d != MySQL { // its DDL declares DATETIME(6) columns
			all = append(all, s.Schema()...)
		}
		noDatabaseClock(t, all)
	}
}

// TestIDsSQL: an IN list of placeholders by default; on PostgreSQL one
// array parameter, the same statement whatever the count, with every id
// quoted in the literal.
func TestIDsSQL(t *testing.T) {
	pg, _ := New(noDB{}, WithDialect(PostgreSQL), WithTable("t"))
	q1, a1 := pg.q.release.bind([]any{"owner"}, []string{"a"})
	q3, a3 := pg.q.release.bind([]any{"owner"}, []string{"a", `b"c`, `d\e`})
	if q1 != q3 || !strings.HasSuffix(q1, "event_id = ANY(CAST($2 AS TEXT[]))") {
		t.Errorf("postgres statements %q and %q, want one text with an array parameter", q1, q3)
	}
	if !slices.Equal(a1, []any{"owner", `{"a"}`}) || !slices.Equal(a3, []any{"owner", `{"a","b\"c","d\\e"}`}) {
		t.Errorf("postgres arguments %q and %q", a1, a3)
	}
	lite, _ := New(noDB{}, WithDialect(SQLite), WithTable("t"))
	q, a := lite.q.release.bind([]any{"owner"}, []string{"a", "b"})
	if !strings.HasSuffix(q, "event_id IN (?, ?)") || !slices.Equal(a, []any{"owner", "a", "b"}) {
		t.Errorf("sqlite: %q %v", q, a)
	}
}

func noDatabaseClock(t *testing.T, all []string) {
	t.Helper()
	for _, st := range all {
		up := strings.ToUpper(st)
		for _, bad := range []string{"CURRENT_TIMESTAMP", "NOW()", "DATETIME(", "LOCALTIMESTAMP", "UTC_TIMESTAMP"} {
			if strings.Contains(up, bad) {
				t.Errorf("statement uses the database clock (%s): %s", bad, st)
			}
		}
	}
}

func TestRebindNumbersPlaceholders(t *testing.T) {
	pg := &dialect{name: "pg", placeholder: dollar}
	if got := pg.rebind("a = ? AND b IN (?, ?)", 3); got != "a = $3 AND b IN ($4, $5)" {
		t.Errorf("rebind = %q", got)
	}
	b := newBatchSQL(pg, "UPDATE t SET x = ? WHERE y = ? AND id IN (", "?", 1, ", ", ")")
	if got := b.sql(3); got != "UPDATE t SET x = $1 WHERE y = $2 AND id IN ($3, $4, $5)" {
		t.Errorf("batch = %q", got)
	}
	ins := newBatchSQL(pg, "INSERT INTO t (a, b, c) VALUES ", "(?, 0, ?)", 2, ", ", "")
	if got := ins.sql(2); got != "INSERT INTO t (a, b, c) VALUES ($1, 0, $2), ($3, 0, $4)" {
		t.Errorf("insert = %q", got)
	}
	if n := strings.Count(ins.sql(500), "$"); n != 1000 {
		t.Errorf("a 500-row insert has %d placeholders, want 1000", n)
	}
	s, err := New(noDB{}, WithDialect(SQLite))
	if err != nil {
		t.Fatal(err)
	}
	for cols := range colAll + 1 {
		per := len(cols.columns())
		if n, want := strings.Count(s.q.insert.sql(cols, 7, false), "?"), 7*per; n != want {
			t.Errorf("insert of 7 rows binding %07b has %d placeholders, want %d", cols, n, want)
		}
		if n, want := len(s.appendInsertArgs(nil, cols, outbox.MustEnvelope(outbox.EventName("E"), outbox.WithJSON([]byte(`{}`))), time.Now(), "o")), per; n != want {
			t.Errorf("a row binding %07b has %d arguments, want %d", cols, n, want)
		}
	}
	all := colAll.columns()
	named := map[string]bool{}
	for _, c := range all {
		if !slices.Contains(strings.Split(columns, ", "), c) || named[c] {
			t.Errorf("insert column %s: not a column of the table, or named twice", c)
		}
		named[c] = true
	}
	if len(all) != 15 {
		t.Errorf("an insert of every column names %d, want 15 (all but status, attempts, done_at, last_error and subscribers)", len(all))
	}
	a := s.claimArgs(outbox.ClaimRequest{Owner: "o", Limit: 1})
	for _, c := range []struct {
		query string
		args  int
	}{{s.q.recoverClaim, len(a.recoverSet) + len(a.recoverWhere) + 1}, {s.q.freshClaim, len(a.freshSet) + len(a.freshWhere) + 1}} {
		if n := strings.Count(c.query, "?"); n != c.args {
			t.Errorf("%s: %d placeholders, %d arguments", c.query, n, c.args)
		}
	}
}

// TestWhereStatusSlots: the status slots of List and Count hold the
// wanted statuses, repeated to fill them; one wanted status is an
// equality; only the filters a query sets are written out, the tenant's
// last.
func TestWhereStatusSlots(t *testing.T) {
	s, err := New(noDB{}, WithDialect(SQLite))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   []outbox.Status
		want []any
	}{
		{nil, []any{0, 1, 2, 3}},
		{[]outbox.Status{outbox.StatusDead}, []any{3}},
		{[]outbox.Status{outbox.StatusDead, outbox.StatusDead}, []any{3}},
		{[]outbox.Status{outbox.StatusNew, outbox.StatusRetry, outbox.StatusNew}, []any{0, 2, 0, 2}},
		{[]outbox.Status{outbox.Status(7)}, []any{-1}},
		{[]outbox.Status{9, outbox.StatusDone, 8, outbox.StatusDone, outbox.StatusDead, outbox.StatusNew, outbox.StatusRetry}, []any{1, 3, 0, 2}},
	} {
		for _, f := range []struct {
			q     outbox.Query
			conds string
			args  []any
		}{
			{outbox.Query{}, "", nil},
			{outbox.Query{AggregateType: "A", EventType: "E", AfterID: "id"}, " AND aggregate_type = ? AND event_type = ? AND event_id > ?", []any{"A", "E", "id"}},
			{outbox.Query{EventType: "E", TenantID: "acme"}, " AND event_type = ?" + tenantWhere, []any{"E", "acme"}},
			{outbox.Query{AfterID: "id", TenantID: "acme"}, " AND event_id > ?" + tenantWhere, []any{"id", "acme"}},
		} {
			q := f.q
			q.Statuses = tc.in
			where, got := s.where(q)
			status := " WHERE status IN (?, ?, ?, ?)"
			if len(tc.want) == 1 {
				status = " WHERE status = ?"
			}
			if want := append(slices.Clone(tc.want), f.args...); where != status+f.conds || !slices.Equal(got, want) {
				t.Errorf("where(%+v) = %q %v, want %q %v", q, where, got, status+f.conds, want)
			}
		}
	}
}

// noDB is a DB for tests that build statements and never run them.
type noDB struct{}

var errNoDB = errors.New("noDB runs no SQL")

func (noDB) Exec(context.Context, string, ...any) (int64, error)      { return 0, errNoDB }
func (noDB) Query(context.Context, string, ...any) (Rows, error)      { return nil, errNoDB }
func (noDB) ReadCommitted(context.Context, func(tx Conn) error) error { return errNoDB }

// TestIdentifierLimits: a table name whose derived index or control
// table names the database would cut (PostgreSQL keeps 63 characters; two
// cut names collide and an index is silently not created) or refuse
// (MySQL keeps 64) is refused up front.
func TestIdentifierLimits(t *testing.T) {
	for _, tc := range []struct {
		d       Dialect
		table   string
		ok      bool
		indexes []string
	}{
		{PostgreSQL, strings.Repeat("p", 53), true, []string{strings.Repeat("p", 53) + "_due_idx", strings.Repeat("p", 53) + "_lease_idx", strings.Repeat("p", 53) + "_type_idx", strings.Repeat("p", 53) + "_purge_idx",
			strings.Repeat("p", 53) + "_owed_idx", strings.Repeat("p", 53) + "_order_idx", strings.Repeat("p", 53) + "_walk_idx", strings.Repeat("p", 53) + "_park_idx", strings.Repeat("p", 53) + "_tnt_idx"}},
		{PostgreSQL, strings.Repeat("p", 54), false, nil},
		{PostgreSQL, "app." + strings.Repeat("p", 53), true, nil},
		{PostgreSQL, strings.Repeat("s", 64) + ".t", false, nil},
		{MySQL, strings.Repeat("m", 58), false, nil}, // its control table m…m_pauses would have 65 characters
		{MySQL, strings.Repeat("m", 57), true, []string{"outbox_seq_idx", "outbox_due_idx", "outbox_type_idx", "outbox_lease_idx", "outbox_purge_idx", "outbox_order_idx", "outbox_walk_idx", "outbox_park_idx", "outbox_tnt_idx"}},
		{SQLite, strings.Repeat("q", 64), true, []string{strings.Repeat("q", 64) + "_due_idx", strings.Repeat("q", 64) + "_lease_idx", strings.Repeat("q", 64) + "_type_idx", strings.Repeat("q", 64) + "_purge_idx",
			strings.Repeat("q", 64) + "_owed_idx", strings.Repeat("q", 64) + "_order_idx", strings.Repeat("q", 64) + "_walk_idx", strings.Repeat("q", 64) + "_park_idx", strings.Repeat("q", 64) + "_tnt_idx"}},
	} {
		s, err := New(noDB{}, WithDialect(tc.d), WithTable(tc.table))
		if !tc.ok {
			if !errors.Is(err, outbox.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.d.Name()) {
				t.Errorf("%s table %q: %v, want ErrInvalidConfig naming the database", tc.d.Name(), tc.table, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s table %q: %v", tc.d.Name(), tc.table, err)
			continue
		}
		if tc.indexes != nil && !slices.Equal(s.indexes, tc.indexes) {
			t.Errorf("%s table %q: indexes %v, want %v", tc.d.Name(), tc.table, s.indexes, tc.indexes)
		}
	}
}
