package main

import (
	"strings"
	"testing"

	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-sql-driver/mysql"
)

// No secret of a database URL or driver DSN reaches outboxctl's output,
// whatever the form and whichever error path quotes it: a refused value,
// an unreachable server, a wrong password (MariaDB: the PostgreSQL of the
// tests trusts every password), a parameter the driver refuses.
func TestDSNSecretsNeverShown(t *testing.T) {
	t.Setenv("OUTBOX_DB", "")
	mysqlDSN, _ := outboxsqltest.ServerDSN(outboxsql.MySQL)
	cfg, err := mysql.ParseDSN(mysqlDSN)
	if err != nil {
		t.Fatal(err)
	}
	maria := cfg.Addr // the test server, with a wrong password
	for _, tc := range []struct {
		name    string
		db      string
		env     bool // in OUTBOX_DB, not --db
		code    int
		msgs    []string
		secrets []string
	}{
		{"key=value, unreachable", "host=127.0.0.1 port=1 user=u password=kw-secret dbname=x connect_timeout=5", false, exitFailed,
			[]string{"cannot connect to host=127.0.0.1 port=1 user=u password=xxxxx dbname=x connect_timeout=5"}, []string{"kw-secret"}},
		{"key=value, quoted", "host=127.0.0.1 port=1 password='kw secret\\' q' dbname=x connect_timeout=5", false, exitFailed,
			[]string{"password=xxxxx"}, []string{"kw secret", "secret\\' q"}},
		{"key=value, spaced", "host = 127.0.0.1 port = 1 password = kw-secret connect_timeout = 5", false, exitFailed,
			[]string{"password = xxxxx"}, []string{"kw-secret"}},
		{"key=value, bad parameter", "host=127.0.0.1 port=1 password=kw-secret sslmode=bogus", false, exitFailed,
			[]string{"sslmode"}, []string{"kw-secret"}},
		{"key=value in OUTBOX_DB", "host=127.0.0.1 port=1 user=u password=env-secret connect_timeout=5", true, exitFailed,
			[]string{"password=xxxxx"}, []string{"env-secret"}},
		{"MySQL DSN, wrong password", "root:my-secret@tcp(" + maria + ")/test", false, exitFailed,
			[]string{"cannot connect to root:xxxxx@tcp(" + maria + ")/test", "Access denied"}, []string{"my-secret"}},
		{"MySQL DSN, unreachable", "u:my-secret@tcp(127.0.0.1:1)/x?timeout=5s", false, exitFailed,
			[]string{"cannot connect to u:xxxxx@tcp(127.0.0.1:1)/x?timeout=5s"}, []string{"my-secret"}},
		{"MySQL DSN, @ and / in the password", "u:my@se/cret@tcp(127.0.0.1:1)/x?timeout=5s", false, exitUsage,
			[]string{"u:xxxxx@tcp(127.0.0.1:1)/x?timeout=5s"}, []string{"se/cret", "my@se"}},
		{"MySQL URL, wrong password", "mysql://root:url-secret@" + maria + "/test", false, exitFailed,
			[]string{"cannot connect to mysql://root:xxxxx@" + maria + "/test", "Access denied"}, []string{"url-secret"}},
		{"URL, password parameter", "postgres://127.0.0.1:1/x?password=q-secret&connect_timeout=5", false, exitFailed,
			[]string{"cannot connect to postgres://127.0.0.1:1/x?password=xxxxx&connect_timeout=5"}, []string{"q-secret"}},
		{"URL, sslpassword parameter", "postgres://u:pw-secret@127.0.0.1:1/x?sslpassword=ssl-secret&connect_timeout=5", false, exitFailed,
			[]string{"cannot connect to postgres://u:xxxxx@127.0.0.1:1/x"}, []string{"pw-secret", "ssl-secret"}},
		{"URL, escaped password", "postgres://u:p%40ss-secret@127.0.0.1:1/x?connect_timeout=5", false, exitFailed,
			[]string{"cannot connect to postgres://u:xxxxx@127.0.0.1:1/x"}, []string{"p%40ss-secret", "p@ss-secret"}},
		{"no scheme, a password", "u:bare-secret@db.internal:5432/db", false, exitUsage,
			[]string{`--db "u:xxxxx@db.internal:5432/db": not a URL`}, []string{"bare-secret"}},
		{"unknown scheme", "oracle://scott:tiger-secret@127.0.0.1/orcl", false, exitUsage,
			[]string{`unknown scheme "oracle"`}, []string{"tiger-secret"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--db", tc.db, "stats"}
			if tc.env {
				t.Setenv("OUTBOX_DB", tc.db)
				args = args[2:]
			}
			r := runCLI(t, nil, args...)
			r.wantErr(t, tc.code, tc.msgs...)
			for _, s := range tc.secrets {
				if strings.Contains(r.stderr+r.stdout, s) {
					t.Errorf("the output shows the secret %q: %q", s, r.stderr)
				}
			}
		})
	}
}

// An empty or blank --tenant is refused, on every command that takes it:
// it is never "every tenant". Without --tenant, commands act on every
// tenant.
func TestEmptyTenantRefused(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		t.Parallel()
		e := newEnv(t, b)
		s := e.seed()
		before := e.snapshot()
		commands := [][]string{
			{"stats"}, {"dead", "list"}, {"dead", "replay-all", "--yes"}, {"dead", "replay", "--yes", s.placedOld, s.placedNew},
			{"dead", "delete", "--yes", s.placedOld}, {"purge", "--status", "dead", "--older-than", "0s", "--yes"},
		}
		for _, tc := range []struct {
			name  string
			flags []string
			msg   string
		}{
			{"empty", []string{"--tenant", ""}, "--tenant is empty: name a tenant, or leave --tenant out for the events of every tenant"},
			{"empty, =", []string{"--tenant="}, "--tenant is empty"},
			{"a space", []string{"--tenant", " "}, `--tenant " " is blank`},
			{"a tab", []string{"--tenant", "\t"}, `--tenant "\t" is blank`},
			{"NUL", []string{"--tenant", "acme\x00"}, "is not a tenant id an event can carry"},
			{"not UTF-8", []string{"--tenant", "acme\xff"}, "is not a tenant id an event can carry"},
			{"too long", []string{"--tenant", strings.Repeat("t", 65)}, "longer than a tenant id can be"},
		} {
			for _, cmd := range commands {
				t.Run(tc.name+"/"+strings.Join(cmd[:min(2, len(cmd))], " "), func(t *testing.T) {
					args := append(append([]string(nil), cmd...), tc.flags...)
					e.run(args...).wantErr(t, exitUsage, tc.msg)
					e.wantUnchanged(before)
				})
			}
		}
	})
}

// A missing table's message says first to check --table (OUTBOX_TABLE),
// listing the outbox tables the database has, and only then to migrate;
// OUTBOX_TABLE names the table when --table is not given.
func TestMissingTableHint(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		e := newEnv(t, b)
		e.seed()
		missing := outboxsqltest.TableName("outbox_other")
		r := e.run("--table", missing, "stats")
		r.wantErr(t, exitNotFound, e.noTable(missing)...)
		if strings.Index(r.stderr, "--table NAME") > strings.Index(r.stderr, "migrate --apply") {
			t.Errorf("the hint says to migrate before it says to check --table: %q", r.stderr)
		}
		// Following the hint: OUTBOX_TABLE, or --table, names the service's table.
		t.Setenv("OUTBOX_TABLE", e.store.Table())
		runCLI(t, nil, "--db", e.url, "stats").wantOK(t)
		t.Setenv("OUTBOX_TABLE", missing)
		runCLI(t, nil, "--db", e.url, "stats").wantErr(t, exitNotFound, "table "+missing+" does not exist")
		runCLI(t, nil, "--db", e.url, "--table", e.store.Table(), "stats").wantOK(t)
	})
}

// The purge prompt says how many events it deletes.
func TestPurgePromptCounts(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		t.Parallel()
		e := newEnv(t, b)
		e.seed()
		before := e.snapshot()
		table := e.store.Table()
		for _, tc := range []struct {
			args []string
			msg  string
		}{
			{[]string{"--status", "done", "--older-than", "24h"}, "refusing to delete 2 DONE events of " + table + " completed before "},
			{[]string{"--status", "done", "--older-than", "30m"}, "refusing to delete 3 DONE events of " + table + " completed before "},
			{[]string{"--status", "done", "--older-than", "24h", "--tenant", "acme"}, "refusing to delete 1 DONE event of tenant acme of " + table},
			{[]string{"--status", "dead", "--older-than", "24h"}, "refusing to delete 2 DEAD events of " + table},
			{[]string{"--status", "dead", "--older-than", "0s", "--limit", "3"}, "refusing to delete 3 DEAD events of " + table + " completed before "},
		} {
			e.run(append([]string{"purge"}, tc.args...)...).wantErr(t, exitRefused, tc.msg, "without confirmation")
			e.wantUnchanged(before)
		}
		// What the prompt counted is what goes.
		r := e.run("purge", "--status", "done", "--older-than", "24h", "--yes").wantOK(t)
		if !strings.HasPrefix(r.stdout, "purged 2 DONE events") {
			t.Errorf("purge: %q, want 2 purged", r.stdout)
		}
	})
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 12: "12", 999: "999", 1000: "1,000", 12345: "12,345", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
