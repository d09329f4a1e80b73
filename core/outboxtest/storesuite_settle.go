package outboxtest

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	outbox "github.com/go-outbox/outbox/core"
)

// The store suite's cases of settling a claim: done, retry, dead, release, the
// subscribers still owed, and the truncation of stored errors.

func storeMarkDone(t *testing.T, f Fixture) {
	ctx := context.Background()
	mine, theirs := events(t, 5), events(t, 2)
	insert(t, f, t0, ownerA, mine...)
	insert(t, f, t0, ownerB, theirs...)
	all := append(append(ids(mine), ids(theirs)...), "no-such-id")
	now := t0.Add(time.Second)
	n, err := f.Store.MarkDone(ctx, ownerA, all, now)
	if err != nil || n != 5 {
		t.Fatalf("MarkDone = %d, %v; want 5 (only A's rows)", n, err)
	}
	for _, e := range mine {
		r := get(t, f, e.ID())
		wantState(t, r, outbox.StatusDone, 0, "")
		wantTime(t, "done at", r.DoneAt, now)
	}
	for _, e := range theirs {
		wantState(t, get(t, f, e.ID()), outbox.StatusNew, 0, ownerB)
	}
	if n, err := f.Store.MarkDone(ctx, ownerA, ids(mine), now); err != nil || n != 0 {
		t.Fatalf("second MarkDone = %d, %v; want 0", n, err)
	}
	if n, err := f.Store.MarkDone(ctx, ownerA, nil, now); err != nil || n != 0 {
		t.Fatalf("MarkDone of no ids = %d, %v; want 0", n, err)
	}
}

func storeMarkRetry(t *testing.T, f Fixture) {
	ctx := context.Background()
	e := event(t)
	insert(t, f, t0, ownerA, e)
	next := t0.Add(10 * time.Second)
	if ok, err := f.Store.MarkRetry(ctx, outbox.Outcome{Owner: ownerB, ID: e.ID(), At: next, Error: "not mine", CountAttempt: true}); err != nil || ok {
		t.Fatalf("MarkRetry by another owner = %v, %v; want false", ok, err)
	}
	if ok, err := f.Store.MarkRetry(ctx, outbox.Outcome{Owner: ownerA, ID: e.ID(), At: next, Error: "first failure", CountAttempt: true}); err != nil || !ok {
		t.Fatalf("MarkRetry = %v, %v; want true", ok, err)
	}
	r := get(t, f, e.ID())
	wantState(t, r, outbox.StatusRetry, 1, "")
	wantTime(t, "available at", r.AvailableAt, next)
	if r.LastError != "first failure" {
		t.Errorf("last error %q", r.LastError)
	}
	if got := claim(t, f, outbox.ClaimRequest{Owner: ownerA, Now: next.Add(-time.Microsecond), Limit: 1}); len(got) != 0 {
		t.Fatal("retry claimed before it is due")
	}
	got := claim(t, f, outbox.ClaimRequest{Owner: ownerB, Now: next, Limit: 1})
	if len(got) != 1 {
		t.Fatal("retry not claimable when due")
	}
	wantState(t, got[0], outbox.StatusRetry, 1, ownerB)
	if ok, err := f.Store.MarkRetry(ctx, outbox.Outcome{Owner: ownerB, ID: e.ID(), At: next.Add(time.Minute), Error: "busy"}); err != nil || !ok {
		t.Fatalf("MarkRetry without counting = %v, %v", ok, err)
	}
	r = get(t, f, e.ID())
	wantState(t, r, outbox.StatusRetry, 1, "")
	if r.LastError != "busy" {
		t.Errorf("last error %q, want busy", r.LastError)
	}
}

func storeMarkDead(t *testing.T, f Fixture) {
	ctx := context.Background()
	counted, uncounted := event(t), event(t)
	insert(t, f, t0, ownerA, counted, uncounted)
	now := t0.Add(time.Second)
	if ok, err := f.Store.MarkDead(ctx, outbox.Outcome{Owner: ownerB, ID: counted.ID(), At: now, Error: "not mine", CountAttempt: true}); err != nil || ok {
		t.Fatalf("MarkDead by another owner = %v, %v; want false", ok, err)
	}
	if ok, err := f.Store.MarkDead(ctx, outbox.Outcome{Owner: ownerA, ID: counted.ID(), At: now, Error: "gave up", CountAttempt: true}); err != nil || !ok {
		t.Fatalf("MarkDead = %v, %v", ok, err)
	}
	if ok, err := f.Store.MarkDead(ctx, outbox.Outcome{Owner: ownerA, ID: uncounted.ID(), At: now, Error: "unroutable"}); err != nil || !ok {
		t.Fatalf("MarkDead = %v, %v", ok, err)
	}
	r := get(t, f, counted.ID())
	wantState(t, r, outbox.StatusDead, 1, "")
	wantTime(t, "done at", r.DoneAt, now)
	if r.LastError != "gave up" {
		t.Errorf("last error %q", r.LastError)
	}
	wantState(t, get(t, f, uncounted.ID()), outbox.StatusDead, 0, "")
	if got := claim(t, f, outbox.ClaimRequest{Owner: ownerA, Now: now.Add(24 * time.Hour), Lease: lease, Limit: 10}); len(got) != 0 {
		t.Fatalf("claimed DEAD rows %v", recIDs(got))
	}
	if ok, err := f.Store.MarkDead(ctx, outbox.Outcome{Owner: ownerA, ID: counted.ID(), At: now, Error: "again", CountAttempt: true}); err != nil || ok {
		t.Fatalf("MarkDead of a DEAD row = %v, %v; want false", ok, err)
	}
}

func storeRelease(t *testing.T, f Fixture) {
	ctx := context.Background()
	e, done := event(t), event(t)
	insert(t, f, t0, ownerA, e, done)
	if _, err := f.Store.MarkDone(ctx, ownerA, []string{done.ID()}, t0); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Store.Release(ctx, ownerB, []string{e.ID()}); err != nil || n != 0 {
		t.Fatalf("Release by another owner = %d, %v; want 0", n, err)
	}
	if n, err := f.Store.Release(ctx, ownerA, []string{e.ID(), done.ID(), "no-such-id"}); err != nil || n != 1 {
		t.Fatalf("Release = %d, %v; want 1", n, err)
	}
	r := get(t, f, e.ID())
	wantState(t, r, outbox.StatusNew, 0, "")
	wantTime(t, "available at", r.AvailableAt, t0)
	wantState(t, get(t, f, done.ID()), outbox.StatusDone, 0, "")
	if got := claim(t, f, outbox.ClaimRequest{Owner: ownerB, Now: t0.Add(time.Millisecond), Lease: lease, Limit: 10}); len(got) != 1 || got[0].ID != e.ID() {
		t.Fatalf("released row not claimable at once: %v", recIDs(got))
	}
}

// storeSubscribers: MarkRetry and MarkDead store the subscribers an event
// still owes (nil: none), a claim and Replay keep them.
func storeSubscribers(t *testing.T, f Fixture) {
	ctx := context.Background()
	e, other := event(t), event(t)
	insert(t, f, t0, ownerA, e, other)
	wantSubs := func(id string, want []string) {
		t.Helper()
		if got := get(t, f, id).Subscribers; !slices.Equal(got, want) {
			t.Fatalf("subscribers of %s = %q, want %q", id, got, want)
		}
	}
	wantSubs(e.ID(), nil)
	if ok, err := f.Store.MarkRetry(ctx, outbox.Outcome{Owner: ownerA, ID: e.ID(), At: t0, Error: "2 failed", CountAttempt: true,
		Subscribers: []string{"billing", "mail-2"}}); err != nil || !ok {
		t.Fatalf("MarkRetry = %v, %v", ok, err)
	}
	wantSubs(e.ID(), []string{"billing", "mail-2"})
	wantSubs(other.ID(), nil)
	got := claim(t, f, outbox.ClaimRequest{Owner: ownerA, Now: t0.Add(time.Second), Lease: lease, Limit: 1})
	if len(got) != 1 || got[0].ID != e.ID() || !slices.Equal(got[0].Subscribers, []string{"billing", "mail-2"}) {
		t.Fatalf("claim = %v (subscribers %q), want %s owing billing and mail-2", recIDs(got), got[0].Subscribers, e.ID())
	}
	if ok, err := f.Store.MarkDead(ctx, outbox.Outcome{Owner: ownerA, ID: e.ID(), At: t0.Add(time.Second), Error: "1 failed",
		CountAttempt: true, Subscribers: []string{"mail-2"}}); err != nil || !ok {
		t.Fatalf("MarkDead = %v, %v", ok, err)
	}
	wantSubs(e.ID(), []string{"mail-2"})
	// Stats counts the DEAD events by the subscribers they owe; the one
	// that owes none counts as DEAD only.
	if _, err := f.Store.MarkDead(ctx, outbox.Outcome{Owner: ownerA, ID: other.ID(), At: t0, Error: "failed"}); err != nil {
		t.Fatal(err)
	}
	if st, err := f.Store.Stats(ctx, t0); err != nil || st.ByStatus[outbox.StatusDead] != 2 ||
		!maps.Equal(st.DeadBySubscriber, map[string]int64{"mail-2": 1}) {
		t.Fatalf("Stats = %+v, %v; want 2 DEAD, one owing mail-2", st, err)
	}
	if n, err := f.Store.Replay(ctx, []string{e.ID()}, t0.Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v", n, err)
	}
	wantSubs(e.ID(), []string{"mail-2"})
	got = claim(t, f, outbox.ClaimRequest{Owner: ownerB, Now: t0.Add(time.Minute), Lease: lease, Limit: 1, NoRecovery: true})
	if len(got) != 1 || got[0].ID != e.ID() {
		t.Fatalf("claim after replay = %v, want %s", recIDs(got), e.ID())
	}
	if ok, err := f.Store.MarkRetry(ctx, outbox.Outcome{Owner: ownerB, ID: e.ID(), At: t0.Add(time.Minute), Error: "listener"}); err != nil || !ok {
		t.Fatalf("MarkRetry = %v, %v", ok, err)
	}
	wantSubs(e.ID(), nil)
}

func storeErrorTruncation(t *testing.T, f Fixture) {
	ctx := context.Background()
	long := strings.Repeat("é", 10) + strings.Repeat("x", outbox.MaxErrorLen) + "tail"
	retry, dead := event(t), event(t)
	insert(t, f, t0, ownerA, retry, dead)
	if ok, err := f.Store.MarkRetry(ctx, outbox.Outcome{Owner: ownerA, ID: retry.ID(), At: t0, Error: long, CountAttempt: true}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, err := f.Store.MarkDead(ctx, outbox.Outcome{Owner: ownerA, ID: dead.ID(), At: t0, Error: long, CountAttempt: true}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	for _, id := range []string{retry.ID(), dead.ID()} {
		got := get(t, f, id).LastError
		if n := utf8.RuneCountInString(got); n != outbox.MaxErrorLen || !utf8.ValidString(got) || !strings.HasPrefix(long, got) {
			t.Errorf("stored error of %s: %d characters (valid UTF-8: %v), want the first %d", id, n, utf8.ValidString(got), outbox.MaxErrorLen)
		}
	}
}
