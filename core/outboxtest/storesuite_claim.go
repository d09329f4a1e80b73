package outboxtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// The store suite's cases of claiming: order, exclusivity, leases and their
// fencing, renewal and recovery of expired claims.

func storeClaimOrder(t *testing.T, f Fixture) {
	// Same due time: ordered by id. Different due times: oldest due first.
	a := event(t, outbox.WithID("b-second"))
	b := event(t, outbox.WithID("a-first"))
	c := event(t, outbox.WithID("c-delayed"), outbox.WithAvailableAt(t0.Add(2*time.Second)))
	d := event(t, outbox.WithID("0-later"))
	e := event(t, outbox.WithID("z-not-due"), outbox.WithAvailableAt(t0.Add(time.Hour)))
	insert(t, f, t0, "", a, b, c, e)
	insert(t, f, t0.Add(time.Second), "", d)
	if recs := claim(t, f, outbox.ClaimRequest{Owner: ownerA, Now: t0.Add(10 * time.Second), Limit: 0}); len(recs) != 0 {
		t.Fatalf("claim with limit 0 returned %d rows", len(recs))
	}
	now := t0.Add(10 * time.Second).In(zoneWest)
	recs := claim(t, f, outbox.ClaimRequest{Owner: ownerA, Now: now, Limit: 3})
	if got, want := recIDs(recs), []string{"a-first", "b-second", "0-later"}; !slices.Equal(got, want) {
		t.Fatalf("first claim %v, want %v", got, want)
	}
	for _, r := range recs {
		wantState(t, r, outbox.StatusNew, 0, ownerA)
		wantTime(t, "locked at", r.LockedAt, now)
	}
	sameEnvelope(t, recs[0].Envelope, b)
	recs = claim(t, f, outbox.ClaimRequest{Owner: ownerA, Now: now, Limit: 3})
	if got, want := recIDs(recs), []string{"c-delayed"}; !slices.Equal(got, want) {
		t.Fatalf("second claim %v, want %v (the rest is claimed or not due)", got, want)
	}
	if recs := claim(t, f, outbox.ClaimRequest{Owner: ownerB, Now: now, Limit: 3}); len(recs) != 0 {
		t.Fatalf("third claim %v, want nothing", recIDs(recs))
	}
	// Due exactly at now is claimable.
	recs = claim(t, f, outbox.ClaimRequest{Owner: ownerB, Now: t0.Add(time.Hour), Lease: 2 * time.Hour, Limit: 3})
	if got, want := recIDs(recs), []string{"z-not-due"}; !slices.Equal(got, want) {
		t.Fatalf("claim at the due time %v, want %v", got, want)
	}
}

func storeClaimSkipRecent(t *testing.T, f Fixture) {
	old, recent := event(t), event(t)
	insert(t, f, t0, "", old)
	insert(t, f, t0.Add(4*time.Second), "", recent)
	req := outbox.ClaimRequest{Owner: ownerA, Now: t0.Add(5 * time.Second), SkipRecent: 2 * time.Second, Limit: 10}
	if got := recIDs(claim(t, f, req)); !slices.Equal(got, []string{old.ID()}) {
		t.Fatalf("claim skipping recent rows = %v, want only %s", got, old.ID())
	}
	req.Now = t0.Add(6 * time.Second) // created exactly SkipRecent ago: claimable
	if got := recIDs(claim(t, f, req)); !slices.Equal(got, []string{recent.ID()}) {
		t.Fatalf("claim = %v, want %s", got, recent.ID())
	}
}

func storeClaimConcurrent(t *testing.T, f Fixture) {
	const rows = 2000
	insert(t, f, t0, "", events(t, rows)...)
	claimConcurrently(t, f, outbox.ClaimRequest{Now: t0, Lease: lease, Limit: 50}, rows)
}

// claimConcurrently runs 8 workers that claim with req (each its own owner)
// until a claim returns nothing, and checks that they claimed rows events,
// each exactly once. It returns how many times each event was claimed.
func claimConcurrently(t *testing.T, f Fixture, req outbox.ClaimRequest, rows int) map[string]int {
	t.Helper()
	const workers = 8
	var (
		mu     sync.Mutex
		claims = map[string]int{}
		total  int
		wg     sync.WaitGroup
		errs   = make(chan error, workers)
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := req
			req.Owner = fmt.Sprintf("worker-%d", w)
			for {
				recs, err := f.Store.Claim(context.Background(), req)
				if err != nil {
					errs <- fmt.Errorf("%s: %w", req.Owner, err)
					return
				}
				if len(recs) == 0 {
					return
				}
				mu.Lock()
				for _, r := range recs {
					claims[r.ID]++
					total++
					if r.LockedBy != req.Owner {
						errs <- fmt.Errorf("record %s claimed by %s reports owner %q", r.ID, req.Owner, r.LockedBy)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	dups := 0
	for id, n := range claims {
		if n != 1 {
			dups++
			t.Errorf("event %s claimed %d times", id, n)
		}
	}
	if total != rows || len(claims) != rows || dups != 0 {
		t.Fatalf("claimed %d times, %d distinct rows, %d duplicated; want each of %d rows exactly once", total, len(claims), dups, rows)
	}
	return claims
}

func storeLeaseExpiry(t *testing.T, f Fixture) {
	ctx := context.Background()
	e := event(t)
	insert(t, f, t0, "", e)
	if got := claim(t, f, outbox.ClaimRequest{Owner: ownerA, Now: t0, Lease: lease, Limit: 1}); len(got) != 1 {
		t.Fatalf("A claimed %d rows, want 1", len(got))
	}
	if got := claim(t, f, outbox.ClaimRequest{Owner: ownerB, Now: t0.Add(lease - time.Microsecond), Lease: lease, Limit: 1}); len(got) != 0 {
		t.Fatal("B claimed a row whose lease has not expired")
	}
	later := t0.Add(lease)
	got := claim(t, f, outbox.ClaimRequest{Owner: ownerB, Now: later, Lease: lease, Limit: 1})
	if len(got) != 1 || got[0].LockedBy != ownerB {
		t.Fatalf("B's claim after the lease = %v, want the row", recIDs(got))
	}
	wantTime(t, "re-claimed at", got[0].LockedAt, later)
	// A stored no outcome (A died, or hung): the take-over says so, in the
	// claim's result and in the row, and counts no attempt (A may never
	// have started it). B counts one before it starts the delivery.
	if got[0].Attempts != 0 || got[0].LastError != outbox.ErrClaimExpired.Error() {
		t.Fatalf("taken over: attempts %d, last error %q; want 0 and %q", got[0].Attempts, got[0].LastError, outbox.ErrClaimExpired)
	}
	if ok, err := f.Store.CountAttempt(ctx, ownerA, e.ID()); err != nil || ok {
		t.Fatalf("CountAttempt by the old owner = %v, %v; want false", ok, err)
	}
	if ok, err := f.Store.CountAttempt(ctx, ownerB, e.ID()); err != nil || !ok {
		t.Fatalf("CountAttempt by the new owner = %v, %v; want true", ok, err)
	}
	// A's stale updates are fenced off.
	now := later.Add(time.Second)
	if n, err := f.Store.MarkDone(ctx, ownerA, []string{e.ID()}, now); err != nil || n != 0 {
		t.Errorf("stale MarkDone = %d, %v; want 0", n, err)
	}
	if ok, err := f.Store.MarkRetry(ctx, outbox.Outcome{Owner: ownerA, ID: e.ID(), At: now, Error: "stale", CountAttempt: true}); err != nil || ok {
		t.Errorf("stale MarkRetry = %v, %v; want false", ok, err)
	}
	if ok, err := f.Store.MarkDead(ctx, outbox.Outcome{Owner: ownerA, ID: e.ID(), At: now, Error: "stale", CountAttempt: true}); err != nil || ok {
		t.Errorf("stale MarkDead = %v, %v; want false", ok, err)
	}
	if n, err := f.Store.Release(ctx, ownerA, []string{e.ID()}); err != nil || n != 0 {
		t.Errorf("stale Release = %d, %v; want 0", n, err)
	}
	r := get(t, f, e.ID())
	wantState(t, r, outbox.StatusNew, 1, ownerB)   // the attempt B counted
	if r.LastError != outbox.ErrInFlight.Error() { // B's CountAttempt's, not a stale update's
		t.Errorf("last error %q after B counted its attempt and A's stale updates; want %q", r.LastError, outbox.ErrInFlight)
	}
	if n, err := f.Store.MarkDone(ctx, ownerB, []string{e.ID()}, now); err != nil || n != 1 {
		t.Fatalf("MarkDone by the current owner = %d, %v; want 1", n, err)
	}
	r = get(t, f, e.ID())
	wantState(t, r, outbox.StatusDone, 1, "")
	if r.LastError != "" {
		t.Errorf("a DONE event keeps the last error %q", r.LastError)
	}
}

// storeRenew: a renewed claim is not taken over until a lease after its
// renewal; renewals are fenced by owner; a claimed row, renewed or not, is
// never given to a claim before its lease runs out.
func storeRenew(t *testing.T, f Fixture) {
	ctx := context.Background()
	mine, theirs := event(t), event(t)
	insert(t, f, t0, ownerA, mine) // the hot path's row
	insert(t, f, t0, ownerB, theirs)
	renewAt := t0.Add(lease / 2)
	n, err := f.Store.Renew(ctx, ownerA, []string{mine.ID(), theirs.ID(), "no-such-id"}, renewAt)
	if err != nil || n != 1 {
		t.Fatalf("Renew = %d, %v; want 1 (only A's row)", n, err)
	}
	wantTime(t, "renewed claim time", get(t, f, mine.ID()).LockedAt, renewAt)
	wantTime(t, "other owner's claim time", get(t, f, theirs.ID()).LockedAt, t0)
	// At t0+lease B's own row has expired, A's renewed row has not.
	got := claim(t, f, outbox.ClaimRequest{Owner: ownerB, Now: t0.Add(lease), Lease: lease, Limit: 10})
	if len(got) != 1 || got[0].ID != theirs.ID() {
		t.Fatalf("claim at t0+lease = %v, want only the unrenewed row", recIDs(got))
	}
	if got := claim(t, f, outbox.ClaimRequest{Owner: ownerB, Now: renewAt.Add(lease - time.Microsecond), Lease: lease, Limit: 10}); len(got) != 0 {
		t.Fatalf("a renewed claim was taken over before its lease ran out: %v", recIDs(got))
	}
	got = claim(t, f, outbox.ClaimRequest{Owner: ownerB, Now: renewAt.Add(lease), Lease: lease, Limit: 10})
	if len(got) != 1 || got[0].ID != mine.ID() || got[0].LastError != outbox.ErrClaimExpired.Error() {
		t.Fatalf("claim a lease after the renewal = %+v, want the row, taken over", got)
	}
	// A's renewal after the take-over changes nothing.
	if n, err := f.Store.Renew(ctx, ownerA, []string{mine.ID()}, renewAt.Add(lease)); err != nil || n != 0 {
		t.Fatalf("stale Renew = %d, %v; want 0", n, err)
	}
	// Terminal rows are not renewed.
	if _, err := f.Store.MarkDone(ctx, ownerB, []string{mine.ID()}, renewAt.Add(lease)); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Store.Renew(ctx, ownerB, []string{mine.ID()}, renewAt.Add(lease)); err != nil || n != 0 {
		t.Fatalf("Renew of a DONE row = %d, %v; want 0", n, err)
	}
}

// storeRecovery: expired claims are taken first, oldest claim first, the
// claimer's own too (its delivery hung past its timeout: it no longer
// renews it), and fresh rows fill the rest of the limit.
func storeRecovery(t *testing.T, f Fixture) {
	own, other, fresh := event(t), event(t), events(t, 3)
	insert(t, f, t0, ownerA, own)
	insert(t, f, t0.Add(time.Millisecond), ownerB, other)
	insert(t, f, t0.Add(-time.Hour), "", fresh...) // due long before the expired rows
	now := t0.Add(time.Millisecond).Add(lease)
	// A claim without recovery takes fresh rows only.
	noRecovery := claim(t, f, outbox.ClaimRequest{Owner: ownerB, Now: now, Lease: lease, Limit: 1, NoRecovery: true})
	if len(noRecovery) != 1 || noRecovery[0].ID != fresh[0].ID() || noRecovery[0].LastError != "" {
		t.Fatalf("NoRecovery claim = %v, want the oldest fresh row %s", recIDs(noRecovery), fresh[0].ID())
	}
	if _, err := f.Store.Release(context.Background(), ownerB, []string{fresh[0].ID()}); err != nil {
		t.Fatal(err)
	}
	got := claim(t, f, outbox.ClaimRequest{Owner: ownerA, Now: now, Lease: lease, Limit: 3})
	if len(got) != 3 {
		t.Fatalf("claimed %v, want 3 rows", recIDs(got))
	}
	byID := map[string]outbox.Record{}
	for _, r := range got {
		byID[r.ID] = r
	}
	for _, id := range []string{own.ID(), other.ID()} {
		r, ok := byID[id]
		if !ok {
			t.Fatalf("expired claim %s not recovered first: got %v", id, recIDs(got))
		}
		if r.LastError != outbox.ErrClaimExpired.Error() || r.LockedBy != ownerA {
			t.Errorf("recovered %s: last error %q, owner %q", id, r.LastError, r.LockedBy)
		}
		wantTime(t, "recovered claim time", r.LockedAt, now)
	}
	if _, ok := byID[fresh[0].ID()]; !ok {
		t.Fatalf("the rest of the limit was not filled with the oldest due row: %v", recIDs(got))
	}
	if byID[fresh[0].ID()].LastError != "" {
		t.Errorf("a fresh claim recorded a take-over: %q", byID[fresh[0].ID()].LastError)
	}
	// The recovered rows are claimed anew: not expired again at once.
	got = claim(t, f, outbox.ClaimRequest{Owner: ownerB, Now: now.Add(time.Millisecond), Lease: lease, Limit: 10})
	if len(got) != 2 {
		t.Fatalf("next claim = %v, want the 2 fresh rows left", recIDs(got))
	}
}
