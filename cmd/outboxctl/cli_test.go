package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
)

func TestMigrate(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		t.Parallel()
		e := newEnv(t, b)
		table := outboxsqltest.TableName("outbox_ctl")
		t.Cleanup(func() { _, _ = e.db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table) })
		ref, err := outboxsql.Open(e.db, outboxsql.WithDialect(b.Dialect), outboxsql.WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		args := func(more ...string) []string { return append([]string{"--db", e.url, "--table", table}, more...) }

		// Printing the DDL creates nothing.
		r := runCLI(t, nil, args("migrate")...).wantOK(t)
		for _, stmt := range ref.Schema() {
			if !strings.Contains(r.stdout, stmt+";\n") {
				t.Errorf("migrate printed\n%s\nwithout the statement\n%s", r.stdout, stmt)
			}
		}
		var doc migrateJSON
		runCLI(t, nil, args("migrate", "--json")...).wantOK(t).decode(t, &doc)
		if want := (migrateJSON{Dialect: b.Dialect.Name(), Table: table, Statements: ref.Schema()}); !jsonEqual(doc, want) {
			t.Errorf("migrate --json: %+v, want %+v", doc, want)
		}
		runCLI(t, nil, args("stats")...).wantErr(t, exitNotFound, e.noTable(table)...)

		// --apply creates the table, and again changes nothing.
		for range 2 {
			runCLI(t, nil, args("--json", "migrate", "--apply")...).wantOK(t).decode(t, &doc)
			if !doc.Applied || doc.Table != table {
				t.Errorf("migrate --apply --json: %+v", doc)
			}
		}
		if n, err := ref.Count(context.Background(), outbox.Query{}); err != nil || n != 0 {
			t.Fatalf("count after migrate --apply: %d, %v", n, err)
		}
		r = runCLI(t, nil, args("migrate", "--apply")...).wantOK(t)
		if want := "table " + table + " and its indexes are in place (" + b.Dialect.Name() + ")\n"; r.stdout != want {
			t.Errorf("migrate --apply printed %q, want %q", r.stdout, want)
		}
		runCLI(t, nil, args("stats")...).wantOK(t)
	})
}

// A SQLite file is created by migrate --apply only: other commands leave a
// missing file missing.
func TestMigrateCreatesSQLiteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "new.db")
	exists := func() bool { _, err := os.Stat(path); return err == nil }
	for _, args := range [][]string{{"stats"}, {"get", "x"}, {"dead", "list"}, {"purge", "--status", "done", "--older-than", "1h", "--yes"}} {
		runCLI(t, nil, append([]string{"--db", "sqlite://" + path}, args...)...).wantErr(t, exitNotFound,
			"database file "+path+" does not exist; run `outboxctl migrate --apply` to create it")
	}
	runCLI(t, nil, "--db", "sqlite://"+path, "migrate").wantOK(t)
	if exists() {
		t.Fatal("migrate without --apply created the SQLite file")
	}
	runCLI(t, nil, "--db", "sqlite://"+path, "migrate", "--apply").wantOK(t)
	if !exists() {
		t.Fatal("migrate --apply created no SQLite file")
	}
	// The other URL forms name the same file.
	t.Chdir(dir)
	for _, db := range []string{"sqlite:new.db", "new.db", path, "sqlite:///" + strings.TrimPrefix(path, "/")} {
		runCLI(t, nil, "--db", db, "stats").wantOK(t)
	}
}

func TestStats(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		t.Parallel()
		e := newEnv(t, b)
		var empty statsJSON
		e.run("stats", "--json").wantOK(t).decode(t, &empty)
		if empty.Total != 0 || empty.OldestPendingAt != nil || empty.OldestPendingAgeSeconds != nil || len(empty.Counts) != 4 {
			t.Errorf("stats of an empty table: %+v", empty)
		}
		before := time.Now()
		e.seed()
		var st statsJSON
		e.run("--json", "stats").wantOK(t).decode(t, &st)
		want := map[string]int64{"NEW": 2, "RETRY": 0, "DONE": 3, "DEAD": 4}
		if !jsonEqual(st.Counts, want) || st.Total != 9 || st.Pending != 2 || st.Due != 2 || st.Table != e.store.Table() {
			t.Errorf("stats: %+v, want counts %v, total 9, pending 2, due 2", st, want)
		}
		if st.OldestPendingAt == nil || st.OldestPendingAt.Before(before.Add(-time.Second)) || st.OldestPendingAgeSeconds == nil || *st.OldestPendingAgeSeconds < 0 {
			t.Errorf("stats: oldest pending %v, age %v; want a time after %v", st.OldestPendingAt, st.OldestPendingAgeSeconds, before)
		}
		r := e.run("stats").wantOK(t)
		for _, re := range []string{`(?m)^STATUS +EVENTS$`, `(?m)^NEW +2$`, `(?m)^RETRY +0$`, `(?m)^DONE +3$`, `(?m)^DEAD +4$`, `(?m)^total +9$`, `(?m)^oldest pending: created \S+, \d+s ago$`, `(?m)^due now: 2$`} {
			if !regexp.MustCompile(re).MatchString(r.stdout) {
				t.Errorf("stats output does not match %s:\n%s", re, r.stdout)
			}
		}
		// The horizon guard's figures, on PostgreSQL only.
		storage := regexp.MustCompile(`(?m)^storage: \d+ dead tuples, \d+ live, \d+ bytes with indexes, last vacuumed `)
		if pg := b.Dialect == outboxsql.PostgreSQL; pg != (st.Horizon != nil && st.Horizon.TableBytes > 0) || pg != storage.MatchString(r.stdout) {
			t.Errorf("horizon of %s: %+v\n%s", b.Name, st.Horizon, r.stdout)
		}
	})
}

func TestGet(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		t.Parallel()
		e := newEnv(t, b)
		s := e.seed()
		for _, cmd := range [][]string{{"get"}, {"dead", "show"}} {
			var ev eventJSON
			e.run(append(cmd, s.placedOld, "--json")...).wantOK(t).decode(t, &ev)
			if ev.ID != s.placedOld || ev.Type != "OrderPlaced" || ev.AggregateType != "Order" || ev.AggregateID != "o-1" || ev.TenantID != "acme" ||
				ev.Status != "DEAD" || ev.Attempts != 1 || ev.LastError != "boom: listener failed\nsecond line" || ev.PayloadKind != "json" ||
				compact(ev.Payload) != placedJSON || ev.Headers["traceparent"] == "" || len(ev.Headers) != 1 || ev.LockedBy != "" {
				t.Errorf("%s --json: %+v", strings.Join(cmd, " "), ev)
			}
			if ev.DoneAt == nil || time.Since(*ev.DoneAt) < 47*time.Hour || ev.CreatedAt == nil || ev.OccurredAt == nil || ev.AvailableAt == nil {
				t.Errorf("%s --json: times %v %v %v %v", strings.Join(cmd, " "), ev.DoneAt, ev.CreatedAt, ev.OccurredAt, ev.AvailableAt)
			}
		}

		var ev eventJSON
		e.run("get", "--json", s.invoiceOld).wantOK(t).decode(t, &ev)
		var b64 string
		if err := json.Unmarshal(ev.Payload, &b64); err != nil || ev.PayloadKind != "bytes" {
			t.Fatalf("bytes payload: kind %q, payload %s (%v)", ev.PayloadKind, ev.Payload, err)
		}
		if got, err := base64.StdEncoding.DecodeString(b64); err != nil || string(got) != string(invoiceBytes) {
			t.Errorf("bytes payload %q decodes to %q, %v", b64, got, err)
		}

		ev = eventJSON{}
		e.run("get", "--json", s.pending[0]).wantOK(t).decode(t, &ev)
		if ev.Status != "NEW" || ev.DoneAt != nil || ev.Attempts != 0 || compact(ev.Payload) != `{"n":1}` || ev.LastError != "" {
			t.Errorf("get of a NEW event: %+v", ev)
		}

		r := e.run("get", s.placedOld).wantOK(t)
		for _, re := range []string{`(?m)^ID +` + s.placedOld + `$`, `(?m)^TYPE +OrderPlaced$`, `(?m)^AGGREGATE +Order o-1$`, `(?m)^STATUS +DEAD$`,
			`(?m)^ATTEMPTS +1$`, `(?m)^  traceparent +00-4bf9`, "\nLAST ERROR\nboom: listener failed\nsecond line\n", "\nPAYLOAD \\(JSON\\)\n" + regexp.QuoteMeta(placedJSON) + "\n$"} {
			if !regexp.MustCompile(re).MatchString(r.stdout) {
				t.Errorf("get output does not match %s:\n%s", re, r.stdout)
			}
		}
		r = e.run("get", s.invoiceOld).wantOK(t)
		if !strings.Contains(r.stdout, "\nPAYLOAD (bytes, base64)\n"+base64.StdEncoding.EncodeToString(invoiceBytes)+"\n") {
			t.Errorf("get of a bytes payload:\n%s", r.stdout)
		}

		// A row whose headers cannot be decoded is shown with what is known.
		corrupt := outboxsql.Rebind(b.Dialect, "UPDATE "+e.store.Table()+" SET headers = '{not json' WHERE event_id = ?")
		if _, err := e.db.ExecContext(context.Background(), corrupt, s.cancelled); err != nil {
			t.Fatal(err)
		}
		ev = eventJSON{}
		e.run("get", "--json", s.cancelled).wantOK(t).decode(t, &ev)
		if ev.ID != s.cancelled || ev.Status != "DEAD" || ev.Type != "" || ev.Payload != nil || !strings.Contains(ev.DecodeError, "cannot be decoded") {
			t.Errorf("get of an undecodable row: %+v", ev)
		}
		r = e.run("get", s.cancelled).wantOK(t)
		if !regexp.MustCompile(`(?m)^DECODE ERROR +.*cannot be decoded`).MatchString(r.stdout) || strings.Contains(r.stdout, "PAYLOAD") {
			t.Errorf("get of an undecodable row:\n%s", r.stdout)
		}
		r = e.run("dead", "list", "--aggregate", "Order").wantOK(t)
		if !regexp.MustCompile(`(?m)^` + s.cancelled + ` +\? +\? +1 +.*cannot decode: `).MatchString(r.stdout) {
			t.Errorf("dead list with an undecodable row:\n%s", r.stdout)
		}
	})
}

func TestDeadList(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		t.Parallel()
		e := newEnv(t, b)
		s := e.seed()
		for _, tc := range []struct {
			args  []string
			want  []string
			next  string
			text  bool // check the text output too
			paged bool // check it in small pages too
		}{
			{nil, s.dead(), "", true, false},
			{[]string{"--type", "OrderPlaced"}, []string{s.placedOld, s.placedNew}, "", false, false},
			{[]string{"--aggregate", "Order"}, []string{s.placedOld, s.placedNew, s.cancelled}, "", false, false},
			{[]string{"--aggregate", "Invoice", "--type", "InvoiceSent"}, []string{s.invoiceOld}, "", false, false},
			{[]string{"--older-than", "24h"}, []string{s.placedOld, s.invoiceOld}, "", false, true},
			{[]string{"--older-than", "2d12h"}, []string{s.invoiceOld}, "", false, false},
			{[]string{"--older-than", "45m"}, []string{s.placedOld, s.placedNew, s.invoiceOld}, "", false, false},
			{[]string{"--older-than", "0s"}, s.dead(), "", false, false},
			{[]string{"--type", "OrderPlaced", "--older-than", "1d"}, []string{s.placedOld}, "", true, false},
			{[]string{"--type", "Nope"}, nil, "", true, false},
			{[]string{"--limit", "2"}, []string{s.placedOld, s.placedNew}, s.placedNew, true, false},
			{[]string{"--limit", "2", "--after", s.placedNew}, []string{s.invoiceOld, s.cancelled}, "", false, false},
			{[]string{"--limit", "1", "--older-than", "24h"}, []string{s.placedOld}, s.placedOld, false, true},
			{[]string{"--limit", "1", "--older-than", "24h", "--after", s.placedOld}, []string{s.invoiceOld}, "", false, false},
			{[]string{"--limit", "4"}, s.dead(), "", false, false},
			{[]string{"--limit", "0"}, s.dead(), "", false, false},
		} {
			t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
				t.Parallel()
				var doc listJSON
				e.run(append([]string{"dead", "list", "--json"}, tc.args...)...).wantOK(t).decode(t, &doc)
				var got []string
				for _, ev := range doc.Events {
					got = append(got, ev.ID)
					if ev.Status != "DEAD" {
						t.Errorf("listed a %s event", ev.Status)
					}
				}
				if !slices.Equal(got, tc.want) || doc.NextAfter != tc.next {
					t.Errorf("listed %q, next %q; want %q, next %q", got, doc.NextAfter, tc.want, tc.next)
				}
				if tc.paged { // the same through pages of one, two and three events
					for size := 1; size <= 3; size++ {
						var paged listJSON
						e.runPaged(size, append([]string{"dead", "list", "--json"}, tc.args...)...).wantOK(t).decode(t, &paged)
						if !jsonEqual(paged, doc) {
							t.Errorf("in pages of %d: %+v, want %+v", size, paged, doc)
						}
					}
				}

				if !tc.text {
					return
				}
				r := e.run(append([]string{"dead", "list"}, tc.args...)...).wantOK(t)
				if len(tc.want) == 0 {
					if r.stdout != "no DEAD events match\n" {
						t.Errorf("empty list printed %q", r.stdout)
					}
					return
				}
				lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
				if !regexp.MustCompile(`^ID +TYPE +AGGREGATE +ATTEMPTS +DEAD SINCE +AGE +LAST ERROR$`).MatchString(lines[0]) {
					t.Errorf("header %q", lines[0])
				}
				for i, id := range tc.want {
					if !strings.HasPrefix(lines[1+i], id+" ") || !strings.HasSuffix(lines[1+i], " boom: listener failed") {
						t.Errorf("row %d: %q, want event %s", i, lines[1+i], id)
					}
				}
				if tc.next != "" && lines[len(lines)-1] != "more match: add --after "+tc.next+" for the next page" {
					t.Errorf("last line %q", lines[len(lines)-1])
				}
			})
		}
	})
}

func TestDeadReplay(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		t.Parallel()
		e := newEnv(t, b)
		s := e.seed()

		// One id needs no confirmation.
		r := e.run("dead", "replay", s.cancelled).wantOK(t)
		if r.stdout != "replayed 1 event: NEW again, due now, with zero attempts\n" {
			t.Errorf("replay printed %q", r.stdout)
		}
		rec, err := e.store.Get(context.Background(), s.cancelled)
		if err != nil || rec.Status != outbox.StatusNew || rec.Attempts != 0 || !rec.DoneAt.IsZero() || rec.AvailableAt.After(time.Now()) {
			t.Fatalf("replayed event: %+v, %v", rec, err)
		}

		// Several ids need --yes, and every id must be DEAD.
		before := e.snapshot()
		e.run("dead", "replay", s.placedOld, s.placedNew).wantErr(t, exitRefused,
			"refusing to replay 2 DEAD events of "+e.store.Table()+" without confirmation: stdin is not a terminal; pass --yes")
		e.wantUnchanged(before)
		e.run("dead", "replay", "--yes", s.placedOld, "01JD00000000000000000NOPE0").wantErr(t, exitNotFound,
			"no event with id 01JD00000000000000000NOPE0 in "+e.store.Table()+"; nothing changed")
		e.wantUnchanged(before)
		e.run("dead", "replay", "--yes", s.placedOld, s.pending[0], s.doneNew).wantErr(t, exitNotFound,
			"event "+s.pending[0]+" is NEW, not DEAD (and 1 more of the ids are not DEAD events); nothing changed")
		e.wantUnchanged(before)
		e.run("dead", "replay", s.cancelled).wantErr(t, exitNotFound, "event "+s.cancelled+" is NEW, not DEAD")
		e.wantUnchanged(before)

		var doc changeJSON
		e.run("dead", "replay", s.placedOld, s.invoiceOld, s.placedOld, "--yes", "--json").wantOK(t).decode(t, &doc)
		if doc.Replayed == nil || *doc.Replayed != 2 || !slices.Equal(doc.IDs, []string{s.placedOld, s.invoiceOld}) || doc.Deleted != nil {
			t.Errorf("replay --json: %+v", doc)
		}
		if got := e.statuses(s.placedOld, s.invoiceOld, s.placedNew); !slices.Equal(got, []string{"NEW", "NEW", "DEAD"}) {
			t.Errorf("statuses after replay: %q", got)
		}
	})
}

func TestDeadReplayAll(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		t.Parallel()
		e := newEnv(t, b)
		s := e.seed()
		replayed := map[string]bool{}
		// Steps on one table: each replays what its filters select among
		// the events still DEAD, and nothing else.
		for _, step := range []struct {
			args []string
			want []string
		}{
			{[]string{"--type", "Nope"}, nil},
			{[]string{"--aggregate", "Invoice"}, []string{s.invoiceOld}},
			{[]string{"--older-than", "24h"}, []string{s.placedOld}},
			{[]string{"--aggregate", "Order", "--older-than", "50m", "--type", "OrderPlaced"}, []string{s.placedNew}},
			{[]string{"--older-than", "1h"}, nil}, // cancelled went DEAD 30 minutes ago
			{nil, []string{s.cancelled}},
			{nil, nil},
		} {
			args := append([]string{"dead", "replay-all"}, step.args...)
			if len(step.want) > 0 {
				before := e.snapshot()
				e.run(args...).wantErr(t, exitRefused, "refusing to replay", "pass --yes")
				e.wantUnchanged(before)
			}
			var doc changeJSON // selected through pages of two events
			e.runPaged(2, append(args, "--yes", "--json")...).wantOK(t).decode(t, &doc)
			if doc.Replayed == nil || *doc.Replayed != int64(len(step.want)) || !slices.Equal(doc.IDs, append([]string{}, step.want...)) {
				t.Errorf("replay-all %q --json: %+v, want %q", step.args, doc, step.want)
			}
			for _, id := range step.want {
				replayed[id] = true
			}
			for _, id := range s.dead() {
				want := "DEAD"
				if replayed[id] {
					want = "NEW"
				}
				if got := e.status(id); got != want {
					t.Errorf("after replay-all %q: event %s is %s, want %s", step.args, id, got, want)
				}
			}
		}
		if got := e.statuses(s.pending[0], s.doneNew); !slices.Equal(got, []string{"NEW", "DONE"}) {
			t.Errorf("other events: %q", got)
		}
		r := e.run("dead", "replay-all")
		if r.code != exitOK || r.stdout != "no DEAD events match; nothing replayed\n" {
			t.Errorf("replay-all of nothing: %+v", r)
		}
	})
}

func TestDeadDelete(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		t.Parallel()
		e := newEnv(t, b)
		s := e.seed()
		before := e.snapshot()
		e.run("dead", "delete", s.placedOld).wantErr(t, exitRefused,
			"refusing to delete DEAD event "+s.placedOld+" of "+e.store.Table()+" for good without confirmation")
		e.wantUnchanged(before)
		e.run("dead", "delete", "--yes", s.placedOld, s.doneNew).wantErr(t, exitNotFound, "event "+s.doneNew+" is DONE, not DEAD; nothing changed")
		e.wantUnchanged(before)

		r := e.run("dead", "delete", "--yes", s.placedOld, s.invoiceOld).wantOK(t)
		if r.stdout != "deleted 2 DEAD events\n" {
			t.Errorf("delete printed %q", r.stdout)
		}
		var doc changeJSON
		e.run("--yes", "--json", "dead", "delete", s.cancelled).wantOK(t).decode(t, &doc)
		if doc.Deleted == nil || *doc.Deleted != 1 || !slices.Equal(doc.IDs, []string{s.cancelled}) {
			t.Errorf("delete --json: %+v", doc)
		}
		if got := e.statuses(s.placedOld, s.invoiceOld, s.cancelled, s.placedNew, s.doneNew); !slices.Equal(got, []string{"gone", "gone", "gone", "DEAD", "DONE"}) {
			t.Errorf("statuses after delete: %q", got)
		}
		e.run("dead", "delete", "--yes", s.placedOld).wantErr(t, exitNotFound, "no event with id "+s.placedOld)
	})
}

func TestPurge(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		t.Parallel()
		e := newEnv(t, b)
		s := e.seed()
		before := e.snapshot()
		e.run("purge", "--status", "done", "--older-than", "24h").wantErr(t, exitRefused,
			"refusing to delete 2 DONE events of "+e.store.Table()+" completed before ", "pass --yes")
		e.wantUnchanged(before)

		// Nothing old enough: nothing to confirm, nothing purged.
		var doc purgeJSON
		e.run("purge", "--status", "dead", "--older-than", "30d", "--json", "--yes").wantOK(t).decode(t, &doc)
		if doc.Purged != 0 || doc.Status != "DEAD" || time.Since(doc.Before) < 30*24*time.Hour {
			t.Errorf("purge of nothing: %+v", doc)
		}
		e.wantUnchanged(before)

		r := e.run("purge", "--status", "done", "--older-than", "1d", "--yes").wantOK(t)
		if !regexp.MustCompile(`^purged 2 DONE events completed before \S+Z\n$`).MatchString(r.stdout) {
			t.Errorf("purge printed %q", r.stdout)
		}
		if got := e.statuses(append(s.doneOld, s.doneNew, s.pending[0], s.placedOld)...); !slices.Equal(got, []string{"gone", "gone", "DONE", "NEW", "DEAD"}) {
			t.Errorf("after purge of DONE: %q", got)
		}

		// --limit caps the events purged: one of the two DEAD for more than 24h.
		e.run("purge", "--status", "DEAD", "--older-than", "24h", "--limit", "1", "--yes", "--json").wantOK(t).decode(t, &doc)
		if doc.Purged != 1 || doc.Status != "DEAD" {
			t.Errorf("purge --limit 1: %+v", doc)
		}
		got := e.statuses(s.dead()...)
		want1 := []string{"gone", "DEAD", "DEAD", "DEAD"} // placedOld purged
		want2 := []string{"DEAD", "DEAD", "gone", "DEAD"} // or invoiceOld
		if !slices.Equal(got, want1) && !slices.Equal(got, want2) {
			t.Errorf("after purge of one DEAD event: %q, want %q or %q", got, want1, want2)
		}
	})
}

// jsonEqual compares two values by their JSON encoding.
func jsonEqual(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// compact returns the JSON document raw without insignificant space.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "invalid JSON: " + err.Error()
	}
	return b.String()
}

// TestTenant: --tenant limits stats, dead list, dead replay-all, dead
// delete and purge to the events of one tenant.
func TestTenant(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		t.Parallel()
		e := newEnv(t, b)
		s := e.seed()
		var st statsJSON
		e.run("stats", "--tenant", "acme", "--json").wantOK(t).decode(t, &st)
		want := map[string]int64{"NEW": 0, "RETRY": 0, "DONE": 1, "DEAD": 1}
		if !jsonEqual(st.Counts, want) || st.Total != 2 || st.Tenant != "acme" || st.OldestPendingAt != nil {
			t.Errorf("stats --tenant acme: %+v, want counts %v", st, want)
		}
		if r := e.run("stats", "--tenant", "acme").wantOK(t); !strings.Contains(r.stdout, "events of tenant acme") || strings.Contains(r.stdout, "oldest pending") {
			t.Errorf("stats --tenant acme printed:\n%s", r.stdout)
		}
		for tenant, wantIDs := range map[string][]string{"acme": {s.placedOld}, "nobody": nil, "ACME": nil} {
			var doc listJSON
			e.run("dead", "list", "--json", "--tenant", tenant).wantOK(t).decode(t, &doc)
			var got []string
			for _, ev := range doc.Events {
				got = append(got, ev.ID)
			}
			if !slices.Equal(got, wantIDs) {
				t.Errorf("dead list --tenant %s: %q, want %q", tenant, got, wantIDs)
			}
		}
		long := strings.Repeat("t", 65)
		for _, args := range [][]string{{"stats"}, {"dead", "list"}, {"dead", "replay-all"}, {"dead", "delete", s.placedOld}, {"purge", "--status", "done", "--older-than", "1d"}} {
			e.run(append(args, "--tenant", long)...).wantErr(t, exitUsage, "--tenant: longer than a tenant id can be")
		}
		before := e.snapshot()
		e.run("dead", "delete", "--yes", "--tenant", "nobody", s.placedOld).wantErr(t, exitNotFound,
			"event "+s.placedOld+" is not an event of tenant nobody; nothing changed")
		e.run("dead", "replay", "--yes", "--tenant", "acme", s.placedOld, s.placedNew).wantErr(t, exitNotFound,
			"event "+s.placedNew+" is not an event of tenant acme; nothing changed")
		e.wantUnchanged(before)

		var doc changeJSON
		e.run("dead", "replay-all", "--tenant", "acme", "--yes", "--json").wantOK(t).decode(t, &doc)
		if doc.Replayed == nil || *doc.Replayed != 1 || !slices.Equal(doc.IDs, []string{s.placedOld}) {
			t.Errorf("dead replay-all --tenant acme: %+v", doc)
		}
		r := e.run("purge", "--status", "done", "--older-than", "1d", "--tenant", "acme", "--yes").wantOK(t)
		if !regexp.MustCompile(`^purged 1 DONE event of tenant acme completed before \S+Z\n$`).MatchString(r.stdout) {
			t.Errorf("purge --tenant acme printed %q", r.stdout)
		}
		if got := e.statuses(append(s.doneOld, s.doneNew, s.placedOld, s.placedNew)...); !slices.Equal(got, []string{"gone", "DONE", "DONE", "NEW", "DEAD"}) {
			t.Errorf("after replay-all and purge of acme: %q", got)
		}
	})
}
