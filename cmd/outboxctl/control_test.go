package main

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxadmin"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
)

// wantMatch fails t unless text matches every regular expression of res.
func wantMatch(t *testing.T, what, text string, res ...string) {
	t.Helper()
	for _, re := range res {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("%s does not match %s:\n%s", what, re, text)
		}
	}
}

// pause, pauses, resume and audit: a pause is stored with its actor
// (--as) and reason, shown by stats, removed by resume, and both are in
// the audit trail, newest first.
func TestPauseResumeAudit(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		t.Parallel()
		e := newEnv(t, b)
		e.seed()
		e.run("pause", "OrderPlaced").wantErr(t, exitUsage, "pause: missing --reason")
		e.run("pause", "--reason", "x").wantErr(t, exitUsage, "pause: missing event type")
		e.run("pause", "--as", " ", "OrderPlaced", "--reason", "x").wantErr(t, exitUsage, "--as \" \" is blank")
		e.run("resume", "OrderPlaced").wantErr(t, exitNotFound, "event type OrderPlaced is not paused")

		r := e.run("--as", "alice", "pause", "OrderPlaced", "--reason", "payments API down\x1b[2J").wantOK(t)
		wantMatch(t, "pause", r.stdout, `^paused event type OrderPlaced: no instance on \S+ claims its events until `+"`outboxctl resume OrderPlaced`\n$")
		e.run("pause", "*", "--reason", "maintenance").wantOK(t)

		var ps pausesJSON
		e.run("pauses", "--json").wantOK(t).decode(t, &ps)
		if len(ps.Pauses) != 2 || ps.Pauses[0].Scope != "*" || ps.Pauses[1].Scope != "OrderPlaced" || ps.Pauses[1].By != "alice" ||
			!strings.HasPrefix(ps.Pauses[0].By, "os:") || !strings.HasPrefix(ps.Pauses[1].Reason, "payments API down") {
			t.Fatalf("pauses: %+v, want * by the OS user and OrderPlaced by alice", ps.Pauses)
		}
		r = e.run("pauses").wantOK(t)
		wantMatch(t, "pauses", r.stdout, `(?m)^SCOPE +BY +SINCE +FOR +REASON$`, `(?m)^OrderPlaced +alice +\S+ +\d+s +payments API down`, `(?m)^\* +os:\S+ `)
		if strings.Contains(r.stdout, "\x1b") {
			t.Errorf("pauses printed a terminal escape: %q", r.stdout)
		}
		var st statsJSON
		e.run("stats", "--json").wantOK(t).decode(t, &st)
		if len(st.Pauses) != 2 {
			t.Errorf("stats --json: pauses %+v, want 2", st.Pauses)
		}
		wantMatch(t, "stats", e.run("stats").wantOK(t).stdout, `(?m)^paused: OrderPlaced, by alice since \S+ \(\d+s ago\): payments API down`, `(?m)^claimed: 0$`)

		r = e.run("--as", "bob", "resume", "OrderPlaced").wantOK(t)
		if r.stdout != "resumed event type OrderPlaced: its events are delivered again\n" {
			t.Errorf("resume printed %q", r.stdout)
		}
		e.run("resume", "OrderPlaced").wantErr(t, exitNotFound, "is not paused")
		e.run("--json", "pauses").wantOK(t).decode(t, &ps)
		if len(ps.Pauses) != 1 || ps.Pauses[0].Scope != "*" {
			t.Fatalf("pauses after resume: %+v", ps.Pauses)
		}

		var au auditJSON
		e.run("audit", "--json", "--limit", "2").wantOK(t).decode(t, &au)
		if len(au.Entries) != 2 || au.NextBefore == 0 {
			t.Fatalf("audit --limit 2: %+v, want 2 entries and a next page", au)
		}
		got := []string{au.Entries[0].Action + " " + au.Entries[0].Target + " " + au.Entries[0].Actor, au.Entries[1].Action + " " + au.Entries[1].Target}
		if want := []string{"resume OrderPlaced bob", "pause *"}; !slices.Equal(got, want) {
			t.Errorf("audit: %q, want %q", got, want)
		}
		var older auditJSON
		e.run("audit", "--json", "--before", itoa(au.NextBefore)).wantOK(t).decode(t, &older)
		if len(older.Entries) != 1 || older.Entries[0].Action != "pause" || older.Entries[0].Actor != "alice" || older.Entries[0].Count != 1 {
			t.Errorf("audit --before: %+v, want alice's pause", older.Entries)
		}
		wantMatch(t, "audit", e.run("audit").wantOK(t).stdout, `(?m)^ID +AT +ACTOR +ACTION +COUNT +TARGET +REASON$`, `(?m)^\d+ +\S+ +alice +pause +1 +OrderPlaced +payments API down`)
		e.run("audit", "--limit", "0").wantErr(t, exitUsage, "--limit must be from 1 to 1000")
	})
}

// force-dead, delete and skip-head change events in any status (pending
// ones for force-dead and skip-head) after confirmation, refuse ids they
// cannot change without changing anything, and are audited.
func TestOperatorActions(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		t.Parallel()
		e := newEnv(t, b)
		s := e.seed()
		before := e.snapshot()
		e.run("force-dead", s.pending[0]).wantErr(t, exitUsage, "force-dead: missing --reason")
		e.run("force-dead", s.pending[0], "--reason", "poison").wantErr(t, exitRefused, "refusing to move 1 pending event of", "pass --yes")
		e.run("force-dead", s.pending[0], s.doneNew, "--reason", "poison", "--yes").wantErr(t, exitNotFound, "event "+s.doneNew+" is DONE, not pending")
		e.run("force-dead", "no-such-id", "--reason", "poison", "--yes").wantErr(t, exitNotFound, "no event with id no-such-id")
		e.run("skip-head", s.placedOld, "--reason", "x", "--yes").wantErr(t, exitNotFound, "is DEAD, not pending", "`outboxctl dead`")
		e.run("skip-head", s.pending[0], s.pending[1], "--reason", "x", "--yes").wantErr(t, exitUsage, "skip-head takes one event id")
		e.run("delete", s.doneNew, s.pending[1]).wantErr(t, exitRefused, "refusing to delete 2 events of", "(1 NEW, 1 DONE)")
		e.wantUnchanged(before)

		r := e.run("--as", "carol", "force-dead", s.pending[0], "--reason", "poison pill", "--yes").wantOK(t)
		if r.stdout != "moved 1 of 1 event to DEAD\n" {
			t.Errorf("force-dead printed %q", r.stdout)
		}
		rec, err := e.store.Get(context.Background(), s.pending[0])
		if err != nil || rec.Status != outbox.StatusDead || !strings.Contains(rec.LastError, outbox.ForcedNote+": poison pill") {
			t.Fatalf("after force-dead: %v %q (%v)", rec.Status, rec.LastError, err)
		}
		var act actionJSON
		e.run("--json", "skip-head", s.pending[1], "--reason", "stale", "--yes").wantOK(t).decode(t, &act)
		if act.Action != "skip-head" || act.Changed != 1 || !slices.Equal(act.IDs, []string{s.pending[1]}) || e.status(s.pending[1]) != "DONE" {
			t.Fatalf("skip-head: %+v, status %s", act, e.status(s.pending[1]))
		}
		r = e.run("delete", s.doneNew, s.cancelled, "--reason", "cleanup", "--yes").wantOK(t)
		if r.stdout != "deleted 2 of 2 events\n" || !slices.Equal(e.statuses(s.doneNew, s.cancelled), []string{"gone", "gone"}) {
			t.Fatalf("delete printed %q; statuses %q", r.stdout, e.statuses(s.doneNew, s.cancelled))
		}

		var au auditJSON
		e.run("audit", "--json").wantOK(t).decode(t, &au)
		var got []string
		for _, a := range au.Entries {
			got = append(got, a.Action+" "+a.Reason+" "+itoa(a.Count))
		}
		if want := []string{"delete cleanup 2", "skip-head stale 1", "force-dead poison pill 1"}; !slices.Equal(got, want) {
			t.Errorf("audit: %q, want %q", got, want)
		}
		if au.Entries[2].Actor != "carol" {
			t.Errorf("force-dead's actor %q, want carol", au.Entries[2].Actor)
		}
	})
}

// dead replay-all --dry-run counts what it would replay, per type and
// tenant, and changes nothing; --rate replays the same events, paced, and
// the whole replay is one entry of the audit trail.
func TestReplayDryRunAndRate(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		t.Parallel()
		e := newEnv(t, b)
		s := e.seed()
		before := e.snapshot()
		var plan planJSON
		e.run("--json", "dead", "replay-all", "--dry-run").wantOK(t).decode(t, &plan)
		wantTypes := []outboxadmin.Count{{Name: "OrderPlaced", Events: 2}, {Name: "InvoiceSent", Events: 1}, {Name: "OrderCancelled", Events: 1}}
		wantTenants := []outboxadmin.Count{{Name: "", Events: 3}, {Name: "acme", Events: 1}}
		if !plan.DryRun || plan.Events != 4 || !slices.Equal(plan.Types, wantTypes) || !slices.Equal(plan.Tenants, wantTenants) {
			t.Errorf("dry run: %+v, want 4 events, types %v, tenants %v", plan, wantTypes, wantTenants)
		}
		r := e.run("dead", "replay-all", "--dry-run", "--type", "OrderPlaced").wantOK(t)
		wantMatch(t, "dry run", r.stdout, `^dry run: would replay 2 DEAD events of \S+ \(type OrderPlaced\); nothing changed\n`,
			`(?m)^TYPE +EVENTS\nOrderPlaced +2$`, `(?m)^TENANT +EVENTS\n(- +1\nacme +1|acme +1\n- +1)$`)
		e.wantUnchanged(before)

		e.run("dead", "replay-all", "--rate", "fast").wantErr(t, exitUsage, `bad rate "fast"`)
		e.run("dead", "replay-all", "--rate", "0/s").wantErr(t, exitUsage, "bad rate")
		e.run("dead", "replay-all", "--rate", "5/d").wantErr(t, exitUsage, "the unit is s, m or h")
		r = e.runPaged(2, "--as", "dave", "dead", "replay-all", "--rate", "40/s", "--yes").wantOK(t)
		wantMatch(t, "replay --rate", r.stdout, `^paced at 40/s: 4 events in \d+s \([\d.]+/s\)\nreplayed 4 events: NEW again, due now, with zero attempts\n$`)
		if got := e.statuses(s.dead()...); !slices.Equal(got, []string{"NEW", "NEW", "NEW", "NEW"}) {
			t.Fatalf("after the paced replay: %q", got)
		}
		var au auditJSON
		e.run("audit", "--json").wantOK(t).decode(t, &au)
		if len(au.Entries) != 1 || au.Entries[0].Action != "replay" || au.Entries[0].Count != 4 || au.Entries[0].Actor != "dave" || au.Entries[0].Target != "status=DEAD" {
			t.Errorf("audit after the replay: %+v, want one replay of 4 by dave", au.Entries)
		}
	})
}

// --rate paces the replay: a token bucket, empty at the start, lets 10
// events a second through, so 12 events take more than a second. (A
// lower bound only: the test never fails for being slow.)
func TestReplayRatePaces(t *testing.T) {
	e := newEnv(t, outboxsqltest.Backends()[0])
	e.seedDead(12)
	r := e.run("dead", "replay-all", "--rate", "10/s", "--yes").wantOK(t)
	m := regexp.MustCompile(`^paced at 10/s: 12 events in (\d+)s`).FindStringSubmatch(r.stdout)
	if m == nil || m[1] == "0" {
		t.Fatalf("replay at 10/s of 12 events printed %q: want at least a second", r.stdout)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
