package outboxtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// The store suite's cases of the control tables (outbox.Controls: pauses,
// nodes, the audit trail) and of the operator's overrides
// (outbox.Overrides: ForceDead, Remove, SkipPending), with the ordered
// keys those change.

// controlsOf returns the fixture's Store as outbox.Controls, or skips t.
func controlsOf(t *testing.T, f Fixture) outbox.Controls {
	t.Helper()
	c, ok := f.Store.(outbox.Controls)
	if !ok {
		t.Skipf("the store (%T) keeps no control tables (outbox.Controls)", f.Store)
	}
	return c
}

// overridesOf returns the fixture's Store as outbox.Overrides, or skips t.
func overridesOf(t *testing.T, f Fixture) outbox.Overrides {
	t.Helper()
	o, ok := f.Store.(outbox.Overrides)
	if !ok {
		t.Skipf("the store (%T) has no overrides (outbox.Overrides)", f.Store)
	}
	return o
}

// hostile are texts from outside, as an operator or a writer may give
// them: quotes, SQL, backslashes, commas, new lines, 4-byte UTF-8.
var hostile = []string{`it's "quoted"`, `'); DROP TABLE x; --`, `back\slash\\`, "a,b\nc\td", "naïve 😀 ✓", `%_*?`}

// maxText returns a text of exactly n bytes of multi-byte UTF-8 (4-byte
// runes, then ASCII to fill): the widest a bounded column must hold.
func maxText(n int) string {
	s := strings.Repeat("😀", n/4)
	return s + strings.Repeat("x", n-len(s))
}

// storeControlPauses: a pause is stored with its actor, reason and time;
// setting its scope again replaces it; pauses list by scope; deleting
// tells whether there was one.
func storeControlPauses(t *testing.T, f Fixture) {
	c := controlsOf(t, f)
	ctx := context.Background()
	if ps, err := c.Pauses(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("Pauses of an empty table = %v, %v; want none", ps, err)
	}
	at := t0.In(zoneWest)
	for _, p := range []outbox.Pause{
		{Scope: "OrderPlaced", By: "alice", Reason: "downstream down", At: at},
		{Scope: outbox.PauseAll, By: "bob", Reason: "", At: at.Add(time.Second)},
		{Scope: "Billing", By: "carol", Reason: "maintenance", At: at},
		{Scope: "OrderPlaced", By: "dave", Reason: "still down", At: at.Add(time.Minute)},
	} {
		if err := c.SetPause(ctx, p); err != nil {
			t.Fatalf("SetPause(%+v): %v", p, err)
		}
	}
	want := []outbox.Pause{
		{Scope: outbox.PauseAll, By: "bob", At: at.Add(time.Second)},
		{Scope: "Billing", By: "carol", Reason: "maintenance", At: at},
		{Scope: "OrderPlaced", By: "dave", Reason: "still down", At: at.Add(time.Minute)},
	}
	wantPauses(t, c, "after four pauses, one of a scope paused already", want)
	for _, tc := range []struct {
		scope string
		was   bool
	}{{"OrderPlaced", true}, {"OrderPlaced", false}, {"orderplaced", false}, {"Nobody", false}} {
		if ok, err := c.DeletePause(ctx, tc.scope); err != nil || ok != tc.was {
			t.Fatalf("DeletePause(%q) = %v, %v; want %v", tc.scope, ok, err, tc.was)
		}
	}
	wantPauses(t, c, "after resuming OrderPlaced", want[:2])
}

// wantPauses checks the stored pauses, in order, times as instants in UTC.
func wantPauses(t testing.TB, c outbox.Controls, what string, want []outbox.Pause) {
	t.Helper()
	got, err := c.Pauses(context.Background())
	if err != nil {
		t.Fatalf("%s: Pauses: %v", what, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: Pauses = %+v, want %+v", what, got, want)
	}
	for i, p := range got {
		w := want[i]
		if p.Scope != w.Scope || p.By != w.By || p.Reason != w.Reason {
			t.Errorf("%s: pause %d = %q by %q (%q), want %q by %q (%q)", what, i, p.Scope, p.By, p.Reason, w.Scope, w.By, w.Reason)
		}
		wantTime(t, what+": pause of "+w.Scope+" at", p.At, w.At)
	}
}

// storeControlNodes: a beat records a node as seen, replacing its last
// beat; Nodes lists those seen since a time, by owner, with their types
// sorted (nil: every type, empty: none); a beat forgets the nodes last
// seen before its cutoff; Leave forgets one; a node of more than
// MaxNodeTypes types is kept as routing every type.
func storeControlNodes(t *testing.T, f Fixture) {
	c := controlsOf(t, f)
	ctx := context.Background()
	started := t0.Add(-time.Hour).In(zoneWest)
	beat := func(n outbox.Node, forget time.Time) {
		t.Helper()
		if err := c.Beat(ctx, n, forget); err != nil {
			t.Fatalf("Beat(%s): %v", n.Owner, err)
		}
	}
	beat(outbox.Node{Owner: "node-b", Mode: "full", Types: []string{"Zeta", "Alpha", "Mid"}, Started: started, Seen: t0}, time.Time{})
	beat(outbox.Node{Owner: "node-a", Mode: "poller-only", Started: started, Seen: t0}, time.Time{})
	beat(outbox.Node{Owner: "node-c", Mode: "writer-only", Types: []string{}, Started: started, Seen: t0.Add(-time.Minute)}, time.Time{})
	wantNodes(t, c, "three nodes", t0.Add(-time.Hour), []outbox.Node{
		{Owner: "node-a", Mode: "poller-only", Started: started, Seen: t0},
		{Owner: "node-b", Mode: "full", Types: []string{"Alpha", "Mid", "Zeta"}, Started: started, Seen: t0},
		{Owner: "node-c", Mode: "writer-only", Types: []string{}, Started: started, Seen: t0.Add(-time.Minute)},
	})
	wantNodes(t, c, "seen since t0", t0, []outbox.Node{
		{Owner: "node-a", Mode: "poller-only", Started: started, Seen: t0},
		{Owner: "node-b", Mode: "full", Types: []string{"Alpha", "Mid", "Zeta"}, Started: started, Seen: t0},
	})
	// node-b beats again with other types; node-c is forgotten by it.
	later := t0.Add(10 * time.Second)
	beat(outbox.Node{Owner: "node-b", Mode: "full", Types: []string{"Beta"}, Started: started, Seen: later}, t0.Add(-time.Second))
	wantNodes(t, c, "after node-b's second beat", time.Time{}, []outbox.Node{
		{Owner: "node-a", Mode: "poller-only", Started: started, Seen: t0},
		{Owner: "node-b", Mode: "full", Types: []string{"Beta"}, Started: started, Seen: later},
	})
	if err := c.Leave(ctx, "node-a"); err != nil {
		t.Fatal(err)
	}
	if err := c.Leave(ctx, "node-a"); err != nil {
		t.Fatalf("a second Leave: %v", err)
	}
	many := make([]string, outbox.MaxNodeTypes+1)
	for i := range many {
		many[i] = fmt.Sprintf("Type%04d", i)
	}
	beat(outbox.Node{Owner: "node-many", Mode: "full", Types: many[:outbox.MaxNodeTypes], Started: started, Seen: later}, time.Time{})
	got := nodesSince(t, c, later)
	if len(got) != 2 || got[1].Owner != "node-many" || !slices.Equal(got[1].Types, many[:outbox.MaxNodeTypes]) {
		t.Fatalf("a node of MaxNodeTypes types: %d nodes, the last %q with %d types; want node-many with all %d", len(got), got[len(got)-1].Owner, len(got[len(got)-1].Types), outbox.MaxNodeTypes)
	}
	beat(outbox.Node{Owner: "node-many", Mode: "full", Types: many, Started: started, Seen: later}, time.Time{})
	wantNodes(t, c, "node-a left; node-many routes more than MaxNodeTypes types", time.Time{}, []outbox.Node{
		{Owner: "node-b", Mode: "full", Types: []string{"Beta"}, Started: started, Seen: later},
		{Owner: "node-many", Mode: "full", Started: started, Seen: later},
	})
}

func nodesSince(t testing.TB, c outbox.Controls, since time.Time) []outbox.Node {
	t.Helper()
	got, err := c.Nodes(context.Background(), since)
	if err != nil {
		t.Fatalf("Nodes: %v", err)
	}
	return got
}

// wantNodes checks the nodes seen since since, in order.
func wantNodes(t testing.TB, c outbox.Controls, what string, since time.Time, want []outbox.Node) {
	t.Helper()
	got := nodesSince(t, c, since)
	if len(got) != len(want) {
		t.Fatalf("%s: Nodes = %+v, want %+v", what, got, want)
	}
	for i, n := range got {
		w := want[i]
		if n.Owner != w.Owner || n.Mode != w.Mode || !slices.Equal(n.Types, w.Types) || (n.Types == nil) != (w.Types == nil) {
			t.Errorf("%s: node %d = %q %q types %#v, want %q %q types %#v", what, i, n.Owner, n.Mode, n.Types, w.Owner, w.Mode, w.Types)
		}
		wantTime(t, what+": "+w.Owner+" started", n.Started, w.Started)
		wantTime(t, what+": "+w.Owner+" seen", n.Seen, w.Seen)
	}
}

// storeControlAudit: entries get increasing ids and page newest first,
// by limit and by the id before which to read.
func storeControlAudit(t *testing.T, f Fixture) {
	c := controlsOf(t, f)
	ctx := context.Background()
	if got, err := c.Audit(ctx, outbox.AuditQuery{}); err != nil || len(got) != 0 {
		t.Fatalf("Audit of an empty trail = %v, %v; want none", got, err)
	}
	var want []outbox.AuditEntry
	for i := range 7 {
		e := outbox.AuditEntry{At: t0.Add(time.Duration(i) * time.Second).In(zoneEast), Actor: fmt.Sprintf("op%d", i%2),
			Action: []string{"pause", "replay", "force-dead"}[i%3], Target: fmt.Sprintf("ids E%d", i), Reason: fmt.Sprintf("reason %d", i), Count: int64(i * 10)}
		id, err := c.AppendAudit(ctx, e)
		if err != nil {
			t.Fatalf("AppendAudit #%d: %v", i, err)
		}
		if len(want) > 0 && id <= want[0].ID {
			t.Fatalf("AppendAudit #%d: id %d after id %d; want a greater one", i, id, want[0].ID)
		}
		e.ID = id
		want = append([]outbox.AuditEntry{e}, want...) // newest first
	}
	wantAudit(t, c, "the whole trail", outbox.AuditQuery{}, want)
	wantAudit(t, c, "the newest 3", outbox.AuditQuery{Limit: 3}, want[:3])
	wantAudit(t, c, "the next page", outbox.AuditQuery{BeforeID: want[2].ID, Limit: 3}, want[3:6])
	wantAudit(t, c, "the last page", outbox.AuditQuery{BeforeID: want[5].ID, Limit: 3}, want[6:])
	wantAudit(t, c, "before the first", outbox.AuditQuery{BeforeID: want[6].ID}, nil)
}

// wantAudit checks the entries q returns, in order.
func wantAudit(t testing.TB, c outbox.Controls, what string, q outbox.AuditQuery, want []outbox.AuditEntry) {
	t.Helper()
	got, err := c.Audit(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: Audit: %v", what, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d: %+v", what, len(got), len(want), got)
	}
	for i, e := range got {
		w := want[i]
		if e.ID != w.ID || e.Actor != w.Actor || e.Action != w.Action || e.Target != w.Target || e.Reason != w.Reason || e.Count != w.Count {
			t.Errorf("%s: entry %d = %+v, want %+v", what, i, e, w)
		}
		wantTime(t, fmt.Sprintf("%s: entry %d at", what, e.ID), e.At, w.At)
	}
}

// storeControlHostileText: texts with quotes, SQL, backslashes and
// 4-byte UTF-8, and the longest the outbox package stores of each, round
// trip byte for byte through every control table.
func storeControlHostileText(t *testing.T, f Fixture) {
	c := controlsOf(t, f)
	ctx := context.Background()
	texts := append(slices.Clone(hostile), maxText(outbox.MaxReasonLen))
	for i, s := range texts {
		scope, by := s, s
		if len(scope) > outbox.MaxEventTypeLen {
			scope = maxText(outbox.MaxEventTypeLen)
		}
		if len(by) > outbox.MaxActorLen {
			by = maxText(outbox.MaxActorLen)
		}
		p := outbox.Pause{Scope: scope, By: by, Reason: s, At: t0}
		if err := c.SetPause(ctx, p); err != nil {
			t.Fatalf("SetPause of text %d: %v", i, err)
		}
		wantPauses(t, c, fmt.Sprintf("text %d", i), []outbox.Pause{p})
		if ok, err := c.DeletePause(ctx, scope); err != nil || !ok {
			t.Fatalf("DeletePause of text %d = %v, %v", i, ok, err)
		}
		owner := scope // an owner has the width of an event type
		n := outbox.Node{Owner: owner, Mode: "full", Types: []string{scope}, Started: t0, Seen: t0}
		if x := "x" + scope; len(x) <= outbox.MaxEventTypeLen {
			n.Types = append(n.Types, x)
		}
		if err := c.Beat(ctx, n, time.Time{}); err != nil {
			t.Fatalf("Beat of text %d: %v", i, err)
		}
		wantNodes(t, c, fmt.Sprintf("text %d", i), time.Time{}, []outbox.Node{n})
		if err := c.Leave(ctx, owner); err != nil {
			t.Fatal(err)
		}
		e := outbox.AuditEntry{At: t0, Actor: by, Action: "skip-head", Target: s, Reason: s, Count: 1}
		id, err := c.AppendAudit(ctx, e)
		if err != nil {
			t.Fatalf("AppendAudit of text %d: %v", i, err)
		}
		e.ID = id
		wantAudit(t, c, fmt.Sprintf("text %d", i), outbox.AuditQuery{Limit: 1}, []outbox.AuditEntry{e})
	}
}

// overrideSeed inserts an event in each status, and one claimed by
// ownerA, and returns them.
func overrideSeed(t *testing.T, f Fixture) (fresh, retry, claimed, done, dead outbox.Envelope) {
	evs := events(t, 5)
	fresh, retry, claimed, done, dead = evs[0], evs[1], evs[2], evs[3], evs[4]
	insert(t, f, t0, "", fresh)
	insert(t, f, t0, ownerA, retry, claimed, done, dead)
	moveTo(t, f, retry.ID(), outbox.StatusRetry)
	moveTo(t, f, done.ID(), outbox.StatusDone)
	moveTo(t, f, dead.ID(), outbox.StatusDead)
	return
}

// wantFenced checks that ownerA's outcomes of its claim on e change
// nothing: an operator's override took the row from it.
func wantFenced(t *testing.T, f Fixture, e outbox.Envelope) {
	t.Helper()
	ctx := context.Background()
	if n, err := f.Store.MarkDone(ctx, ownerA, []string{e.ID()}, t0); err != nil || n != 0 {
		t.Errorf("MarkDone by the claim's owner after the override = %d, %v; want 0", n, err)
	}
	for name, mark := range map[string]func(context.Context, outbox.Outcome) (bool, error){"MarkRetry": f.Store.MarkRetry, "MarkDead": f.Store.MarkDead} {
		if ok, err := mark(ctx, outbox.Outcome{Owner: ownerA, ID: e.ID(), At: t0, Error: "late", CountAttempt: true}); err != nil || ok {
			t.Errorf("%s by the claim's owner after the override = %v, %v; want false", name, ok, err)
		}
	}
	if n, err := f.Store.Renew(ctx, ownerA, []string{e.ID()}, t0); err != nil || n != 0 {
		t.Errorf("Renew by the claim's owner after the override = %d, %v; want 0", n, err)
	}
}

// storeEndPending: ForceDead (status DEAD) or SkipPending (DONE) moves
// pending events, claimed or not, to status at now with the note,
// unclaimed, their attempts kept; DONE and DEAD ones are left alone; the
// claim's owner can no longer settle its claim; nothing ended is claimed
// again, but a forced DEAD event is once replayed.
func storeEndPending(t *testing.T, f Fixture, status outbox.Status) {
	o := overridesOf(t, f)
	end, name := o.ForceDead, "ForceDead"
	if status == outbox.StatusDone {
		end, name = o.SkipPending, "SkipPending"
	}
	ctx := context.Background()
	fresh, retry, claimed, done, dead := overrideSeed(t, f)
	before := map[string]outbox.Record{done.ID(): get(t, f, done.ID()), dead.ID(): get(t, f, dead.ID())}
	now := t0.Add(time.Hour).In(zoneWest)
	const note = "outbox: ended by an operator: it's 'poison'"
	n, err := end(ctx, []string{fresh.ID(), retry.ID(), claimed.ID(), done.ID(), dead.ID(), "no-such-id", fresh.ID()}, now, note)
	if err != nil || n != 3 {
		t.Fatalf("%s = %d, %v; want 3 (the pending ones)", name, n, err)
	}
	for id, attempts := range map[string]int{fresh.ID(): 0, retry.ID(): 1, claimed.ID(): 0} {
		r := get(t, f, id)
		wantState(t, r, status, attempts, "")
		wantTime(t, name+": done at", r.DoneAt, now)
		if r.LastError != note {
			t.Errorf("%s: event %s: last error %q, want %q", name, r.ID, r.LastError, note)
		}
	}
	for id, was := range before {
		r := get(t, f, id)
		if r.Status != was.Status || !r.DoneAt.Equal(was.DoneAt) || r.LastError != was.LastError {
			t.Errorf("%s changed %v event %s: %v at %v (%q)", name, was.Status, id, r.Status, r.DoneAt, r.LastError)
		}
	}
	wantFenced(t, f, claimed)
	wantState(t, get(t, f, claimed.ID()), status, 0, "")
	if got := claim(t, f, outbox.ClaimRequest{Owner: ownerB, Now: now.Add(48 * time.Hour), Lease: lease, Limit: 10}); len(got) != 0 {
		t.Fatalf("%s: ended events claimed: %v", name, recIDs(got))
	}
	if n, err := end(ctx, []string{fresh.ID()}, now, note); err != nil || n != 0 {
		t.Fatalf("a second %s = %d, %v; want 0", name, n, err)
	}
	if status != outbox.StatusDead {
		return
	}
	if n, err := f.Store.Replay(ctx, []string{fresh.ID()}, now); err != nil || n != 1 {
		t.Fatalf("Replay of a forced DEAD event = %d, %v; want 1", n, err)
	}
	if got := claim(t, f, outbox.ClaimRequest{Owner: ownerB, Now: now, Lease: lease, Limit: 10}); !slices.Equal(recIDs(got), []string{fresh.ID()}) {
		t.Fatalf("after its replay, claimed %v; want %s", recIDs(got), fresh.ID())
	}
}

// storeRemove: events in every status are deleted; the claim's owner of
// a removed event settles nothing.
func storeRemove(t *testing.T, f Fixture) {
	o := overridesOf(t, f)
	ctx := context.Background()
	fresh, retry, claimed, done, dead := overrideSeed(t, f)
	kept := event(t)
	insert(t, f, t0, "", kept)
	all := []string{fresh.ID(), retry.ID(), claimed.ID(), done.ID(), dead.ID()}
	n, err := o.Remove(ctx, append(slices.Clone(all), "no-such-id", dead.ID()))
	if err != nil || n != 5 {
		t.Fatalf("Remove = %d, %v; want 5", n, err)
	}
	for _, id := range all {
		if _, err := f.Store.Get(ctx, id); !errors.Is(err, outbox.ErrNotFound) {
			t.Errorf("removed event %s: Get = %v, want ErrNotFound", id, err)
		}
	}
	wantFenced(t, f, claimed)
	if got := claim(t, f, outbox.ClaimRequest{Owner: ownerB, Now: t0.Add(48 * time.Hour), Lease: lease, Limit: 10}); !slices.Equal(recIDs(got), []string{kept.ID()}) {
		t.Fatalf("after the removal, claimed %v; want the kept event %s alone", recIDs(got), kept.ID())
	}
	if n, err := o.Remove(ctx, all); err != nil || n != 0 {
		t.Fatalf("a second Remove = %d, %v; want 0", n, err)
	}
}

// storeOrderedForceDeadBlocks: a head forced DEAD while its delivery runs
// blocks its key like any DEAD head (DeadBlocksKey), across ordered
// claims that walk past it, and is listed as blocking; its replay lets
// it, then the events behind it, out in order.
func storeOrderedForceDeadBlocks(t *testing.T, f Fixture) {
	o := overridesOf(t, f)
	ctx := context.Background()
	k := []outbox.Envelope{keyed(t, "forced"), keyed(t, "forced"), keyed(t, "forced")}
	other := keyed(t, "other")
	insert(t, f, t0, "", k[0], k[1], other)
	wantClaim(t, f, "the heads", orderedLong(ownerA, t0, 10), k[0], other)
	if n, err := o.ForceDead(ctx, []string{k[0].ID()}, t0, "forced by the suite"); err != nil || n != 1 {
		t.Fatalf("ForceDead of the claimed head = %d, %v; want 1", n, err)
	}
	wantFenced(t, f, k[0])
	mustDone(t, f, ownerA, other)
	insert(t, f, t0, "", k[2])
	for i := range 3 {
		wantClaim(t, f, fmt.Sprintf("claim %d behind the forced DEAD head", i), orderedLong(ownerB, t0, 10))
	}
	if got := recIDs(listAll(t, f, outbox.Query{Blocking: true})); !slices.Equal(got, []string{k[0].ID()}) {
		t.Fatalf("blocking events = %v, want the forced head %s", got, k[0].ID())
	}
	if n, err := f.Store.Replay(ctx, []string{k[0].ID()}, t0); err != nil || n != 1 {
		t.Fatalf("Replay of the forced head = %d, %v; want 1", n, err)
	}
	for i, e := range k {
		wantClaim(t, f, fmt.Sprintf("event %d of the key after the replay", i), orderedLong(ownerB, t0, 10), e)
		mustDone(t, f, ownerB, e)
	}
	wantClaim(t, f, "after the key's events", orderedLong(ownerB, t0, 10))
}

// storeOrderedOverrideFreesKey: skipping a pending head (claimed or
// not), or removing a head in any status — a DEAD one with events parked
// behind it too — lets the next event of its key be claimed.
func storeOrderedOverrideFreesKey(t *testing.T, f Fixture) {
	o := overridesOf(t, f)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		state string // the head's: "new", "claimed" or "dead"
		end   func(head outbox.Envelope) (int64, error)
	}{
		{"skip of an unclaimed head", "new", func(h outbox.Envelope) (int64, error) {
			return o.SkipPending(ctx, []string{h.ID()}, t0, "skipped by the suite")
		}},
		{"skip of a claimed head", "claimed", func(h outbox.Envelope) (int64, error) {
			return o.SkipPending(ctx, []string{h.ID()}, t0, "skipped by the suite")
		}},
		{"removal of an unclaimed head", "new", func(h outbox.Envelope) (int64, error) { return o.Remove(ctx, []string{h.ID()}) }},
		{"removal of a claimed head", "claimed", func(h outbox.Envelope) (int64, error) { return o.Remove(ctx, []string{h.ID()}) }},
		{"removal of a DEAD head", "dead", func(h outbox.Envelope) (int64, error) { return o.Remove(ctx, []string{h.ID()}) }},
	} {
		key := "free-" + strings.ReplaceAll(tc.name, " ", "-")
		k := []outbox.Envelope{keyed(t, key), keyed(t, key), keyed(t, key)}
		insert(t, f, t0, "", k...)
		if tc.state != "new" {
			wantClaim(t, f, tc.name+": the head", orderedLong(ownerA, t0, 10), k[0])
		}
		if tc.state == "dead" {
			mustDead(t, f, ownerA, k[0], t0)
			for range 3 { // the walks park the events behind it
				wantClaim(t, f, tc.name+": behind the DEAD head", orderedLong(ownerB, t0, 10))
			}
		}
		if n, err := tc.end(k[0]); err != nil || n != 1 {
			t.Fatalf("%s = %d, %v; want 1", tc.name, n, err)
		}
		if tc.state == "claimed" {
			wantFenced(t, f, k[0])
		}
		for i, e := range k[1:] {
			wantClaim(t, f, fmt.Sprintf("%s: event %d of the key", tc.name, i+1), orderedLong(ownerB, t0, 10), e)
			mustDone(t, f, ownerB, e)
		}
		wantClaim(t, f, tc.name+": after the key's events", orderedLong(ownerB, t0, 10))
	}
}
