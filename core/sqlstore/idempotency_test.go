package sqlstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

func newTestIdempotency(t *testing.T, d Dialect, table string) (*Idempotency, *[]string) {
	t.Helper()
	var stmts []string
	s, err := New(stmtDB{&stmts}, WithDialect(d))
	if err != nil {
		t.Fatal(err)
	}
	i, err := NewIdempotency(s, table)
	if err != nil {
		t.Fatalf("NewIdempotency(%s, %q): %v", d.Name(), table, err)
	}
	return i, &stmts
}

func TestIdempotencySchema(t *testing.T) {
	for _, tc := range []struct {
		d     Dialect
		table string
		want  []string // the start of each statement
	}{
		{SQLite, "app.idem", []string{"CREATE TABLE IF NOT EXISTS app.idem (", "CREATE INDEX IF NOT EXISTS app.idem_created_idx ON idem (created_at)"}},
		{PostgreSQL, "app.idem", []string{"CREATE TABLE IF NOT EXISTS app.idem (", "CREATE INDEX IF NOT EXISTS idem_created_idx ON app.idem (created_at)"}},
		{MySQL, "idem", []string{"CREATE TABLE IF NOT EXISTS idem ("}},
		{PostgreSQL, "", []string{"CREATE TABLE IF NOT EXISTS " + DefaultIdempotencyTable + " (", "CREATE INDEX IF NOT EXISTS " + DefaultIdempotencyTable + "_created_idx"}},
	} {
		i, _ := newTestIdempotency(t, tc.d, tc.table)
		stmts := i.Schema()
		if len(stmts) != len(tc.want) {
			t.Fatalf("%s: %d statements, want %d:\n%s", tc.d.Name(), len(stmts), len(tc.want), strings.Join(stmts, "\n---\n"))
		}
		for n, st := range stmts {
			if !strings.HasPrefix(st, tc.want[n]) {
				t.Errorf("%s: statement %d = %s\nwant it to start with %s", tc.d.Name(), n, st, tc.want[n])
			}
			if strings.Contains(st, "{{") || strings.HasSuffix(st, ";") || strings.Contains(st, "--") {
				t.Errorf("%s: statement not rendered cleanly: %s", tc.d.Name(), st)
			}
		}
		for _, col := range []string{"scope", "idem_key", "fingerprint", "status", "headers", "body", "created_at", "completed_at", "PRIMARY KEY (scope, idem_key)"} {
			if !strings.Contains(stmts[0], col) {
				t.Errorf("%s: the table lacks %s: %s", tc.d.Name(), col, stmts[0])
			}
		}
		if want := tc.table; want != "" && i.Table() != want || i.Dialect() != tc.d {
			t.Errorf("%s: Table() = %q, Dialect() = %v", tc.d.Name(), i.Table(), i.Dialect())
		}
		stmts[0] = "changed"
		if i.Schema()[0] == "changed" {
			t.Errorf("%s: Schema returns the table's own slice", tc.d.Name())
		}
	}
	mysql, _ := newTestIdempotency(t, MySQL, "idem")
	if ddl := mysql.Schema()[0]; !strings.Contains(ddl, "KEY idempotency_created_idx (created_at)") || !strings.Contains(ddl, "VARBINARY(255)") {
		t.Errorf("mysql: the table declares no purge index or no byte-wise key: %s", ddl)
	}
}

func TestNewIdempotencyRejects(t *testing.T) {
	s, err := New(stmtDB{new([]string)}, WithDialect(PostgreSQL))
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"x; DROP TABLE y", "1x", "a.b.c", DefaultTable, strings.ToUpper(DefaultTable),
		strings.Repeat("i", 52)} { // PostgreSQL would cut its index name to 63 characters
		if i, err := NewIdempotency(s, table); i != nil || !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("NewIdempotency(%q) = %v, %v; want ErrInvalidConfig", table, i, err)
		}
	}
	if _, err := NewIdempotency(s, strings.Repeat("i", 51)); err != nil {
		t.Errorf("a 51-character name fits PostgreSQL's index names: %v", err)
	}
	if i, err := NewIdempotency(nil, ""); i != nil || !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Errorf("NewIdempotency(nil) = %v, %v; want ErrInvalidConfig", i, err)
	}
}

func TestIdempotencyStatements(t *testing.T) {
	ctx := context.Background()
	before := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		d                   Dialect
		reserve, get, purge string
		complete, release   string
	}{
		{SQLite,
			"INSERT INTO ik (scope, idem_key, fingerprint, status, created_at) VALUES (?, ?, ?, 0, ?)",
			"SELECT scope, idem_key, fingerprint, status, headers, body, created_at, completed_at FROM ik WHERE scope = ? AND idem_key = ?",
			"DELETE FROM ik WHERE rowid IN (SELECT rowid FROM ik WHERE created_at < ? ORDER BY created_at LIMIT ?)",
			"UPDATE ik SET status = ?, headers = ?, body = ?, completed_at = ? WHERE scope = ? AND idem_key = ?",
			"DELETE FROM ik WHERE scope = ? AND idem_key = ?"},
		{PostgreSQL,
			"INSERT INTO ik (scope, idem_key, fingerprint, status, created_at) VALUES ($1, $2, $3, 0, $4) ON CONFLICT (scope, idem_key) DO NOTHING",
			"SELECT scope, idem_key, fingerprint, status, headers, body, created_at, completed_at FROM ik WHERE scope = $1 AND idem_key = $2",
			"DELETE FROM ik WHERE (scope, idem_key) IN (SELECT scope, idem_key FROM ik WHERE created_at < $1 ORDER BY created_at LIMIT $2)",
			"UPDATE ik SET status = $1, headers = $2, body = $3, completed_at = $4 WHERE scope = $5 AND idem_key = $6",
			"DELETE FROM ik WHERE scope = $1 AND idem_key = $2"},
		{MySQL,
			"INSERT INTO ik (scope, idem_key, fingerprint, status, created_at) VALUES (?, ?, ?, 0, ?)",
			"SELECT scope, idem_key, fingerprint, status, headers, body, created_at, completed_at FROM ik WHERE scope = ? AND idem_key = ? LOCK IN SHARE MODE",
			"DELETE FROM ik WHERE created_at < ? ORDER BY created_at LIMIT ?",
			"UPDATE ik SET status = ?, headers = ?, body = ?, completed_at = ? WHERE scope = ? AND idem_key = ?",
			"DELETE FROM ik WHERE scope = ? AND idem_key = ?"},
	} {
		i, stmts := newTestIdempotency(t, tc.d, "ik")
		for _, st := range []struct{ got, want string }{{i.reserve, tc.reserve}, {i.get, tc.get}, {i.complete, tc.complete}, {i.release, tc.release}} {
			if st.got != st.want {
				t.Errorf("%s: statement = %s\nwant %s", tc.d.Name(), st.got, st.want)
			}
		}
		if n, err := i.Purge(ctx, before, 0); n != 0 || err != nil || len(*stmts) != 0 {
			t.Errorf("%s: Purge with limit 0 = %d, %v after %q; want nothing run", tc.d.Name(), n, err, *stmts)
		}
		if _, err := i.Purge(ctx, before, 10); !errors.Is(err, errStmtDB) || !strings.Contains(err.Error(), "purge idempotency table ik") {
			t.Errorf("%s: Purge error = %v", tc.d.Name(), err)
		}
		if len(*stmts) != 1 || (*stmts)[0] != tc.purge {
			t.Errorf("%s: purge ran %q\nwant %s", tc.d.Name(), *stmts, tc.purge)
		}
		if err := i.Complete(ctx, stmtDB{stmts}, IdempotencyRecord{Scope: "s", Key: "k"}, before); !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("%s: Complete without a status = %v, want ErrInvalidConfig", tc.d.Name(), err)
		}
	}
}
