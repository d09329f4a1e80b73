package sqlstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// stmtDB is a DB that records the statements it is given and runs none.
type stmtDB struct{ stmts *[]string }

var errStmtDB = errors.New("stmtDB runs no SQL")

func (d stmtDB) Exec(_ context.Context, query string, _ ...any) (int64, error) {
	*d.stmts = append(*d.stmts, query)
	return 0, errStmtDB
}

func (d stmtDB) Query(_ context.Context, query string, _ ...any) (Rows, error) {
	*d.stmts = append(*d.stmts, query)
	return nil, errStmtDB
}

func (stmtDB) ReadCommitted(context.Context, func(tx Conn) error) error { return errStmtDB }

func newTestInbox(t *testing.T, d Dialect, table string) (*Inbox, *[]string) {
	t.Helper()
	var stmts []string
	s, err := New(stmtDB{&stmts}, WithDialect(d))
	if err != nil {
		t.Fatal(err)
	}
	in, err := NewInbox(s, table)
	if err != nil {
		t.Fatalf("NewInbox(%s, %q): %v", d.Name(), table, err)
	}
	return in, &stmts
}

func TestInboxSchema(t *testing.T) {
	for _, tc := range []struct {
		d     Dialect
		table string
		want  []string // the start of each statement
	}{
		{SQLite, "app.my_inbox", []string{"CREATE TABLE IF NOT EXISTS app.my_inbox (", "CREATE INDEX IF NOT EXISTS app.my_inbox_processed_idx ON my_inbox (processed_at)"}},
		{PostgreSQL, "app.my_inbox", []string{"CREATE TABLE IF NOT EXISTS app.my_inbox (", "CREATE INDEX IF NOT EXISTS my_inbox_processed_idx ON app.my_inbox (processed_at)"}},
		{MySQL, "my_inbox", []string{"CREATE TABLE IF NOT EXISTS my_inbox ("}},
		{SQLite, "", []string{"CREATE TABLE IF NOT EXISTS " + DefaultInboxTable + " (", "CREATE INDEX IF NOT EXISTS " + DefaultInboxTable + "_processed_idx"}},
	} {
		in, _ := newTestInbox(t, tc.d, tc.table)
		stmts := in.Schema()
		if len(stmts) != len(tc.want) {
			t.Fatalf("%s: %d statements, want %d:\n%s", tc.d.Name(), len(stmts), len(tc.want), strings.Join(stmts, "\n---\n"))
		}
		for i, st := range stmts {
			if !strings.HasPrefix(st, tc.want[i]) {
				t.Errorf("%s: statement %d = %s\nwant it to start with %s", tc.d.Name(), i, st, tc.want[i])
			}
			if strings.Contains(st, "{{") || strings.HasSuffix(st, ";") || strings.Contains(st, "--") {
				t.Errorf("%s: statement not rendered cleanly: %s", tc.d.Name(), st)
			}
		}
		if !strings.Contains(stmts[0], "event_id") || !strings.Contains(stmts[0], "processed_at") {
			t.Errorf("%s: table without its columns: %s", tc.d.Name(), stmts[0])
		}
		if want := tc.table; want != "" && in.Table() != want || in.Dialect() != tc.d {
			t.Errorf("%s: Table() = %q, Dialect() = %v", tc.d.Name(), in.Table(), in.Dialect())
		}
		stmts[0] = "changed"
		if in.Schema()[0] == "changed" {
			t.Errorf("%s: Schema returns the inbox's own slice", tc.d.Name())
		}
	}
	mysql, _ := newTestInbox(t, MySQL, "my_inbox")
	if ddl := mysql.Schema()[0]; !strings.Contains(ddl, "KEY inbox_processed_idx (processed_at)") || !strings.Contains(ddl, "VARBINARY(255)") {
		t.Errorf("mysql: the table declares no purge index or no byte-wise id: %s", ddl)
	}
}

func TestNewInboxRejects(t *testing.T) {
	s, err := New(stmtDB{new([]string)}, WithDialect(PostgreSQL))
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"x; DROP TABLE y", "1x", "a.b.c", DefaultTable, strings.ToUpper(DefaultTable),
		strings.Repeat("i", 50)} { // PostgreSQL would cut its index name to 63 characters
		if in, err := NewInbox(s, table); in != nil || !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("NewInbox(%q) = %v, %v; want ErrInvalidConfig", table, in, err)
		}
	}
	if _, err := NewInbox(s, strings.Repeat("i", 49)); err != nil {
		t.Errorf("a 49-character name fits PostgreSQL's index names: %v", err)
	}
	if in, err := NewInbox(nil, ""); in != nil || !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Errorf("NewInbox(nil) = %v, %v; want ErrInvalidConfig", in, err)
	}
}

func TestInboxStatements(t *testing.T) {
	ctx := context.Background()
	before := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		d      Dialect
		record string
		purge  string
	}{
		{SQLite, "INSERT INTO ib (event_id, processed_at) VALUES (?, ?)",
			"DELETE FROM ib WHERE event_id IN (SELECT event_id FROM ib WHERE processed_at < ? ORDER BY processed_at LIMIT ?)"},
		{PostgreSQL, "INSERT INTO ib (event_id, processed_at) VALUES ($1, $2) ON CONFLICT (event_id) DO NOTHING",
			"DELETE FROM ib WHERE event_id = ANY(ARRAY(SELECT event_id FROM ib WHERE processed_at < $1 ORDER BY processed_at LIMIT $2))"},
		{MySQL, "INSERT INTO ib (event_id, processed_at) VALUES (?, ?)",
			"DELETE FROM ib WHERE processed_at < ? ORDER BY processed_at LIMIT ?"},
	} {
		in, stmts := newTestInbox(t, tc.d, "ib")
		if in.record != tc.record {
			t.Errorf("%s: record = %s\nwant %s", tc.d.Name(), in.record, tc.record)
		}
		if n, err := in.Purge(ctx, before, 0); n != 0 || err != nil || len(*stmts) != 0 {
			t.Errorf("%s: Purge with limit 0 = %d, %v after %q; want nothing run", tc.d.Name(), n, err, *stmts)
		}
		if _, err := in.Purge(ctx, before, 10); !errors.Is(err, errStmtDB) || !strings.Contains(err.Error(), "purge inbox ib") {
			t.Errorf("%s: Purge error = %v", tc.d.Name(), err)
		}
		if len(*stmts) != 1 || (*stmts)[0] != tc.purge {
			t.Errorf("%s: purge ran %q\nwant %s", tc.d.Name(), *stmts, tc.purge)
		}
	}
}
