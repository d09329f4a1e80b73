package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-sql-driver/mysql"
)

// Every bad input exits with its code and one line on stderr, prints
// nothing on stdout, and changes nothing in the table.
func TestBadInputOnEveryBackend(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		t.Parallel()
		e := newEnv(t, b)
		s := e.seed()
		before := e.snapshot()
		table := e.store.Table()
		missing := outboxsqltest.TableName("outbox_missing")
		noTable := e.noTable(missing)
		const unknown = "01JD0000000000000000000000"
		for _, tc := range []struct {
			name string
			args []string
			code int
			msgs []string
		}{
			{"missing table: stats", []string{"--table", missing, "stats"}, exitNotFound, noTable},
			{"missing table: get", []string{"--table", missing, "get", s.placedOld}, exitNotFound, noTable},
			{"missing table: dead list", []string{"dead", "list", "--table", missing, "--older-than", "1h"}, exitNotFound, noTable},
			{"missing table: dead show", []string{"dead", "show", s.placedOld, "--table", missing}, exitNotFound, noTable},
			{"missing table: dead replay", []string{"--table", missing, "dead", "replay", "--yes", s.placedOld, s.placedNew}, exitNotFound, noTable},
			{"missing table: dead replay-all", []string{"--table", missing, "dead", "replay-all", "--yes"}, exitNotFound, noTable},
			{"missing table: dead delete", []string{"--table", missing, "dead", "delete", "--yes", s.placedOld}, exitNotFound, noTable},
			{"missing table: purge", []string{"--table", missing, "purge", "--status", "dead", "--older-than", "0s", "--yes"}, exitNotFound, noTable},

			{"unknown id: get", []string{"get", unknown}, exitNotFound, []string{"no event with id " + unknown + " in " + table}},
			{"unknown id: dead show", []string{"dead", "show", unknown}, exitNotFound, []string{"no event with id " + unknown}},
			{"not DEAD: dead show", []string{"dead", "show", s.doneNew}, exitNotFound, []string{"event " + s.doneNew + " is DONE, not DEAD (`outboxctl get " + s.doneNew + "` shows it)"}},
			{"unknown id: dead replay", []string{"dead", "replay", unknown}, exitNotFound, []string{"no event with id " + unknown + " in " + table + "; nothing changed"}},
			{"unknown ids: dead replay", []string{"dead", "replay", "--yes", unknown, s.placedOld, "x"}, exitNotFound, []string{"no event with id " + unknown, "(and 1 more of the ids are not DEAD events)"}},
			{"unknown id: dead delete", []string{"dead", "delete", "--yes", s.placedNew, unknown}, exitNotFound, []string{"no event with id " + unknown}},
			{"not DEAD: dead delete", []string{"dead", "delete", s.pending[1]}, exitNotFound, []string{"event " + s.pending[1] + " is NEW, not DEAD"}},

			{"refused: dead replay", []string{"dead", "replay", s.placedOld, s.placedNew}, exitRefused, []string{"without confirmation: stdin is not a terminal; pass --yes"}},
			{"refused: dead replay-all", []string{"dead", "replay-all", "--type", "OrderPlaced"}, exitRefused, []string{"refusing to replay 2 DEAD events of " + table + " (type OrderPlaced) without confirmation"}},
			{"refused: dead delete", []string{"dead", "delete", s.placedOld, s.placedNew}, exitRefused, []string{"refusing to delete 2 DEAD events of " + table + " for good without confirmation"}},
			{"refused: purge", []string{"purge", "--status", "done", "--older-than", "0s", "--limit", "1"}, exitRefused,
				[]string{"refusing to delete 1 DONE event of " + table + " completed before ", " for good (--limit 1 of the 3 that match) without confirmation"}},

			{"bad duration: dead list", []string{"dead", "list", "--older-than", "3x"}, exitUsage, []string{`invalid value "3x" for flag -older-than: bad duration "3x"`}},
			{"negative duration: purge", []string{"purge", "--status", "done", "--older-than", "-1h", "--yes"}, exitUsage, []string{"must not be negative"}},
			{"bad duration: replay-all", []string{"dead", "replay-all", "--older-than", "1.5d", "--yes"}, exitUsage, []string{`bad duration "1.5d"`}},
			{"bad limit", []string{"dead", "list", "--limit", "-1"}, exitUsage, []string{"--limit must not be negative"}},
			{"bad table name", []string{"--table", "x; DROP TABLE y", "stats"}, exitUsage, []string{"--table:", "is not allowed"}},
			{"missing --status", []string{"purge", "--older-than", "1h", "--yes"}, exitUsage, []string{"purge: missing --status done|dead"}},
			{"bad --status", []string{"purge", "--status", "new", "--older-than", "1h", "--yes"}, exitUsage, []string{`purge: --status "new": want done or dead`}},
			{"missing --older-than", []string{"purge", "--status", "done", "--yes"}, exitUsage, []string{"purge: missing --older-than"}},
			{"purge argument", []string{"purge", "--status", "done", "--older-than", "1h", "--yes", "extra"}, exitUsage, []string{`purge takes no arguments, got "extra"`}},
			{"missing id: get", []string{"get"}, exitUsage, []string{"get: missing event id"}},
			{"two ids: get", []string{"get", s.placedOld, s.placedNew}, exitUsage, []string{"get takes one event id, got 2"}},
			{"missing id: dead show", []string{"dead", "show"}, exitUsage, []string{"dead show: missing event id"}},
			{"missing ids: dead replay", []string{"dead", "replay", "--yes"}, exitUsage, []string{"dead replay: missing event ids"}},
			{"missing ids: dead delete", []string{"dead", "delete", "--yes"}, exitUsage, []string{"dead delete: missing event ids"}},
			{"stats argument", []string{"stats", "now"}, exitUsage, []string{`stats takes no arguments, got "now"`}},
			{"unknown flag", []string{"dead", "list", "--colour"}, exitUsage, []string{"outboxctl: dead list: flag provided but not defined: -colour (see `outboxctl dead list -h`)"}},
			{"unknown global flag", []string{"--colour", "stats"}, exitUsage, []string{"outboxctl: flag provided but not defined: -colour (see `outboxctl -h`)"}},
			{"--yes on a read", []string{"stats", "--yes"}, exitUsage, []string{"flag provided but not defined: -yes"}},
			{"unknown command", []string{"status"}, exitUsage, []string{`unknown command "status"`}},
			{"unknown dead command", []string{"dead", "purge"}, exitUsage, []string{`unknown command "dead purge": dead takes list, show, replay, replay-all or delete`}},
			{"dead alone", []string{"dead"}, exitUsage, []string{"dead: no subcommand"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				e.run(tc.args...).wantErr(t, tc.code, tc.msgs...)
				e.wantUnchanged(before)
			})
		}
	})
}

// Bad database URLs are usage errors, found before any connection; an
// unreachable server is a failed operation. Passwords never show.
func TestBadDatabaseURL(t *testing.T) {
	t.Setenv("OUTBOX_DB", "")
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
		msgs []string
	}{
		{"no database", []string{"stats"}, exitUsage, []string{"no database: pass --db URL or set OUTBOX_DB"}},
		{"unknown scheme", []string{"--db", "oracle://scott:tiger@127.0.0.1/orcl", "stats"}, exitUsage, []string{`--db: unknown scheme "oracle": use postgres://, postgresql://, mysql://, sqlite:, sqlite3:, file:`}},
		{"unknown scheme, migrate", []string{"--db", "mssql://127.0.0.1/db", "migrate"}, exitUsage, []string{`unknown scheme "mssql"`}},
		{"bad escape", []string{"--db", "postgres://u:secret@127.0.0.1/%zz", "stats"}, exitUsage, []string{"--db: bad PostgreSQL URL: invalid URL escape"}},
		{"postgres without //", []string{"--db", "postgres:secret", "stats"}, exitUsage, []string{"bad PostgreSQL URL"}},
		{"mysql without database", []string{"--db", "mysql://root:secret@127.0.0.1:3306", "stats"}, exitUsage, []string{"--db: MySQL URL \"mysql://root:xxxxx@127.0.0.1:3306\" names no database"}},
		{"mysql without host", []string{"--db", "mysql:///test", "stats"}, exitUsage, []string{"bad MySQL URL"}},
		{"mysql bad parameter", []string{"--db", "mysql://root@127.0.0.1/test?timeout=soon", "stats"}, exitUsage, []string{"--db mysql://root@127.0.0.1/test?timeout=soon: the driver refuses its parameters"}},
		{"sqlite with host", []string{"--db", "sqlite://db.example/x.db", "stats"}, exitUsage, []string{"has a host"}},
		{"sqlite with parameters", []string{"--db", "sqlite:x.db?mode=ro", "stats"}, exitUsage, []string{"takes no parameters"}},
		{"sqlite without file", []string{"--db", "sqlite:", "stats"}, exitUsage, []string{"names no file"}},
		{"sqlite directory", []string{"--db", "sqlite://" + dir, "stats"}, exitUsage, []string{"is not a file"}},
		{"not a file", []string{"--db", filepath.Join(dir, "nope.db"), "stats"}, exitUsage, []string{"not a URL (postgres://, postgresql://, mysql://, sqlite:, sqlite3:, file:), not a driver DSN", "and not an existing SQLite file"}},
		{"unreachable server", []string{"--db", "postgres://u:secret@127.0.0.1:1/x?connect_timeout=5", "stats"}, exitFailed, []string{"cannot connect to postgres://u:xxxxx@127.0.0.1:1/x"}},
		{"unreachable mysql", []string{"--db", "mysql://u:secret@127.0.0.1:1/x?timeout=5s", "dead", "list"}, exitFailed, []string{"cannot connect to mysql://u:xxxxx@127.0.0.1:1/x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, nil, tc.args...)
			r.wantErr(t, tc.code, tc.msgs...)
			if strings.Contains(r.stderr, "secret") {
				t.Errorf("stderr shows the password: %q", r.stderr)
			}
		})
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("files created: %v, %v", entries, err)
	}
}

// The database URL comes from OUTBOX_DB when --db is not given.
func TestDatabaseFromEnvironment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "env.db")
	t.Setenv("OUTBOX_DB", "sqlite://"+path)
	runCLI(t, nil, "migrate", "--apply").wantOK(t)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("migrate --apply with OUTBOX_DB: %v", err)
	}
	runCLI(t, nil, "--db", filepath.Join(t.TempDir(), "other.db"), "stats").wantErr(t, exitUsage, "not an existing SQLite file")
}

func TestParseDBURL(t *testing.T) {
	for _, tc := range []struct {
		url, dialect, display string
	}{
		{"postgres://u:pw@127.0.0.1:5432/app?sslmode=disable", "postgres", "postgres://u:xxxxx@127.0.0.1:5432/app?sslmode=disable"},
		{"postgresql://127.0.0.1/app", "postgres", "postgresql://127.0.0.1/app"},
		{"POSTGRES://127.0.0.1/app", "postgres", "POSTGRES://127.0.0.1/app"},
		{"mysql://app:p%40ss@db.internal/app?tls=skip-verify", "mysql", "mysql://app:xxxxx@db.internal/app?tls=skip-verify"},
		{"sqlite:///var/lib/app.db", "sqlite", "sqlite:///var/lib/app.db"},
		{"sqlite:app.db", "sqlite", "sqlite:app.db"},
		{"sqlite3:app.db", "sqlite", "sqlite3:app.db"},
	} {
		tgt, err := parseDBURL(tc.url)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if tgt.dialect.Name() != tc.dialect || tgt.display != tc.display {
			t.Errorf("%s: dialect %s, display %q; want %s, %q", tc.url, tgt.dialect.Name(), tgt.display, tc.dialect, tc.display)
		}
	}
	for url, path := range map[string]string{"sqlite:///var/lib/app.db": "/var/lib/app.db", "sqlite:app.db": "app.db",
		"sqlite://localhost/tmp/a%20b.db": "/tmp/a b.db", "sqlite:dir/a%20b.db": "dir/a b.db"} {
		if tgt, err := parseDBURL(url); err != nil || tgt.sqlitePath != path {
			t.Errorf("%s: path %q, %v; want %q", url, tgt.sqlitePath, err, path)
		}
	}
}

// The mysql:// URL becomes the go-sql-driver configuration the docs
// describe: credentials, TCP address with port 3306 by default, database,
// the driver's parameters (parseTime as the URL sets it: the store reads
// DATETIME either way), loc UTC.
func TestMySQLURL(t *testing.T) {
	tgt, err := parseDBURL("mysql://app:p%40ss:w@db.internal/shop?parseTime=false&timeout=3s&charset=utf8mb4")
	if err != nil {
		t.Fatal(err)
	}
	if tgt.display != "mysql://app:xxxxx@db.internal/shop?parseTime=false&timeout=3s&charset=utf8mb4" {
		t.Errorf("display %q", tgt.display)
	}
	cfg, err := mysql.ParseDSN(tgt.dsn)
	if err != nil {
		t.Fatal(err)
	}
	if tgt.driver != "mysql" || cfg.User != "app" || cfg.Passwd != "p@ss:w" || cfg.Net != "tcp" || cfg.Addr != "db.internal:3306" || cfg.DBName != "shop" ||
		cfg.ParseTime || cfg.Timeout.String() != "3s" || !strings.Contains(cfg.FormatDSN(), "charset=utf8mb4") || cfg.Loc.String() != "UTC" {
		t.Errorf("driver %q, config %+v", tgt.driver, cfg)
	}
	if _, err := parseDBURL("mysql://app:hunter2@db.internal/shop?loc=Local"); err == nil || !strings.Contains(err.Error(), "remove loc") ||
		strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a loc other than UTC: %v", err)
	}
}
