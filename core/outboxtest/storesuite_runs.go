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

// The store suite's cases of runs (outbox.ClaimRequest.Run): an ordered
// claim takes a key's head and the events after it, in sequence order, up
// to the first that is not pending, unclaimed, due and of a type the claim
// takes; the recovery of expired claims takes an ordered event only as the
// head of its key.

// runs is ordered with a lease of a day and runs of up to run events.
func runs(owner string, now time.Time, limit, run int) outbox.ClaimRequest {
	req := orderedLong(owner, now, limit)
	req.Run = run
	return req
}

// storeRunsInOrder: a run takes the head and the events after it up to
// Run; the key's later events wait until the run is DONE; unordered
// events and other keys are claimed beside it, and a claim with no room
// left takes heads, not runs.
func storeRunsInOrder(t *testing.T, f Fixture) {
	var a []outbox.Envelope
	for range 5 {
		a = append(a, keyed(t, "A"))
	}
	b1, b2 := keyed(t, "B"), keyed(t, "B")
	u := event(t)
	insert(t, f, t0, "", a[0], b1, a[1], u, a[2], b2, a[3], a[4])
	got := claim(t, f, runs(ownerA, t0, 10, 3))
	if w := sortedIDs(a[0], a[1], a[2], b1, b2, u); !slices.Equal(sortedRecIDs(got), w) {
		t.Fatalf("claim with runs of 3 took %v, want %v", sortedRecIDs(got), w)
	}
	var seqA []int64
	for _, r := range got {
		if r.Envelope.OrderingKey() == "A" {
			seqA = append(seqA, r.Seq)
		}
	}
	if !slices.IsSorted(seqA) || len(seqA) != 3 {
		t.Fatalf("the run of A comes back with sequence %v", seqA)
	}
	wantClaim(t, f, "while the runs are claimed", runs(ownerB, t0, 10, 3))
	mustDone(t, f, ownerA, a[0], a[1])
	wantClaim(t, f, "while the last event of A's run is claimed", runs(ownerB, t0, 10, 3))
	mustDone(t, f, ownerA, a[2], b1, b2, u)
	wantClaim(t, f, "after A's run is DONE", runs(ownerB, t0, 10, 3), a[3], a[4])

	// Room for the heads only: no runs.
	c1, c2, d1, d2 := keyed(t, "C"), keyed(t, "C"), keyed(t, "D"), keyed(t, "D")
	insert(t, f, t0, "", c1, c2, d1, d2)
	wantClaim(t, f, "a claim of two with two keys", runs(ownerA, t0, 2, 3), c1, d1)
}

// storeRunsStop: a run stops at the first event that is delayed, waiting
// for a retry, claimed (the hot path's), DEAD, or of a type the claim does
// not take; the events after it wait.
func storeRunsStop(t *testing.T, f Fixture) {
	ctx := context.Background()
	// A delayed event.
	a1, a2, a3 := keyed(t, "A"), keyed(t, "A", outbox.WithAvailableAt(t0.Add(time.Hour))), keyed(t, "A")
	// An event claimed by another owner (inserted claimed).
	b1, b2, b3 := keyed(t, "B"), keyed(t, "B"), keyed(t, "B")
	// An event of another type.
	c1, c2, c3 := keyed(t, "C"), keyedType(t, "C", "other"), keyed(t, "C")
	insert(t, f, t0, "", a1, a2, a3, b1)
	insert(t, f, t0, ownerB, b2)
	insert(t, f, t0, "", b3, c1, c2, c3)
	req := runs(ownerA, t0, 20, 10)
	req.SkipTypes = []string{"other"}
	wantClaim(t, f, "runs that stop early", req, a1, b1, c1)

	// A retry and a DEAD event in the middle of a run (DeadSkips lets the
	// walk past the DEAD head, then a replay puts it back).
	d1, d2, d3, d4 := keyed(t, "D"), keyed(t, "D"), keyed(t, "D"), keyed(t, "D")
	insert(t, f, t0, ownerA, d1)
	insert(t, f, t0, "", d2, d3, d4)
	mustDead(t, f, ownerA, d1, t0)
	skips := runs(ownerA, t0, 1, 1)
	skips.DeadSkips = true
	wantClaim(t, f, "DeadSkips past D's DEAD head", skips, d2)
	mustDead(t, f, ownerA, d2, t0)
	if n, err := f.Store.Replay(ctx, []string{d1.ID()}, t0); err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v", n, err)
	}
	skips = runs(ownerA, t0, 10, 10)
	skips.DeadSkips = true
	wantClaim(t, f, "a run that meets a DEAD event (DeadSkips)", skips, d1)
	if ok, err := f.Store.MarkRetry(ctx, outbox.Outcome{Owner: ownerA, ID: d1.ID(), At: t0.Add(time.Minute), Error: "busy", CountAttempt: true}); err != nil || !ok {
		t.Fatalf("MarkRetry = %v, %v", ok, err)
	}
	wantClaim(t, f, "while D's head waits for its retry", skips)
}

// keyedType builds an event of type typ ordered by key.
func keyedType(t testing.TB, key, typ string) outbox.Envelope {
	t.Helper()
	return eventOf(t, outbox.EventName(typ), outbox.WithJSON([]byte(`{"k":1}`)), outbox.WithOrderingKey(key))
}

// storeRunsGiveBack: the events of a run after one that failed are given
// back unstarted (Release): no attempt used, no error recorded, and they
// wait for the failed event's retry, then come as its run.
func storeRunsGiveBack(t *testing.T, f Fixture) {
	ctx := context.Background()
	a1, a2, a3, a4 := keyed(t, "A"), keyed(t, "A"), keyed(t, "A"), keyed(t, "A")
	insert(t, f, t0, "", a1, a2, a3, a4)
	wantClaim(t, f, "the run", runs(ownerA, t0, 10, 10), a1, a2, a3, a4)
	mustDone(t, f, ownerA, a1)
	if ok, err := f.Store.MarkRetry(ctx, outbox.Outcome{Owner: ownerA, ID: a2.ID(), At: t0.Add(time.Minute), Error: "busy", CountAttempt: true}); err != nil || !ok {
		t.Fatalf("MarkRetry = %v, %v", ok, err)
	}
	if n, err := f.Store.Release(ctx, ownerA, []string{a3.ID(), a4.ID()}); err != nil || n != 2 {
		t.Fatalf("Release of the rest of the run = %d, %v; want 2", n, err)
	}
	for _, e := range []outbox.Envelope{a3, a4} {
		r := get(t, f, e.ID())
		wantState(t, r, outbox.StatusNew, 0, "")
		if r.LastError != "" {
			t.Errorf("%s given back with last error %q, want none", e.ID(), r.LastError)
		}
	}
	wantClaim(t, f, "while the failed event waits for its retry", runs(ownerB, t0.Add(time.Second), 10, 10))
	wantClaim(t, f, "when the retry is due", runs(ownerB, t0.Add(time.Minute), 10, 10), a2, a3, a4)
	wantState(t, get(t, f, a2.ID()), outbox.StatusRetry, 1, ownerB)
}

// storeRunsRecovered: the claims of a run expire together; the recovery
// takes the head alone and gives the rest back, which wait for the head to
// be DONE and are claimed as its run then — by an ordered claim or by one
// that is not.
func storeRunsRecovered(t *testing.T, f Fixture) {
	a1, a2, a3 := keyed(t, "A"), keyed(t, "A"), keyed(t, "A")
	insert(t, f, t0, "", a1, a2, a3)
	req := runs(ownerA, t0, 10, 10)
	req.Lease = lease
	wantClaim(t, f, "the run", req, a1, a2, a3)
	later := t0.Add(2 * lease)
	for _, order := range []bool{false, true} {
		rec := outbox.ClaimRequest{Owner: ownerB, Now: later, Lease: lease, Limit: 10, Ordered: order, Run: 10}
		if order {
			rec.Owner = "owner-c"
		}
		got := claim(t, f, rec)
		if !order {
			if ids := recIDs(got); !slices.Equal(ids, []string{a1.ID()}) {
				t.Fatalf("the recovery of an unordered claim took %v, want the head %s alone", ids, a1.ID())
			}
			if got[0].LastError != outbox.ErrClaimExpired.Error() {
				t.Errorf("recovered head's last error %q, want %q", got[0].LastError, outbox.ErrClaimExpired.Error())
			}
			continue
		}
		if len(got) != 0 {
			t.Fatalf("while the recovered head runs elsewhere, a claim took %v", recIDs(got))
		}
	}
	for _, e := range []outbox.Envelope{a2, a3} {
		if r := get(t, f, e.ID()); r.LockedBy != "" {
			t.Errorf("%s still claimed by %q after the recovery, want given back", e.ID(), r.LockedBy)
		}
	}
	mustDone(t, f, ownerB, a1)
	wantClaim(t, f, "after the recovered head is DONE", runs("owner-c", later, 10, 10), a2, a3)
}

// storeRunsConcurrent: concurrent ordered claimers with runs take every
// event once, a key's events in sequence order, and never an event of a
// key while another claim of that key is not DONE.
func storeRunsConcurrent(t *testing.T, f Fixture) {
	const keys, perKey, workers = 30, 8, 6
	var all []outbox.Envelope
	for range perKey {
		batch := make([]outbox.Envelope, 0, keys+5)
		for k := range keys {
			batch = append(batch, keyed(t, fmt.Sprintf("key-%02d", k)))
		}
		for range 5 {
			batch = append(batch, event(t))
		}
		insert(t, f, t0, "", batch...)
		all = append(all, batch...)
	}
	claimKeysConcurrently(t, f, workers, all, perKey, true, func(owner string) outbox.ClaimRequest { return runs(owner, t0, 9, 3) })
}

// claimKeysConcurrently runs workers claimers of req (by owner) until every
// event of all is claimed, each claim marked DONE at once, and checks
// that every event was claimed once, each key's events in sequence order
// (perKey of them), and never an event of a key while another claimer
// holds the key; with runs, one claim may hold several events of a key.
func claimKeysConcurrently(t *testing.T, f Fixture, workers int, all []outbox.Envelope, perKey int, keyRuns bool, req func(owner string) outbox.ClaimRequest) map[string][]int64 {
	t.Helper()
	var (
		mu      sync.Mutex
		holder  = map[string]string{} // key → the claimer holding it
		byKey   = map[string][]int64{}
		claimed = map[string]int{}
		total   int
		errs    []string
		wg      sync.WaitGroup
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		errs = append(errs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	deadline := time.Now().Add(time.Minute)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			me := fmt.Sprintf("worker-%d", w)
			for {
				mu.Lock()
				finished := total >= len(all)
				mu.Unlock()
				if finished {
					return
				}
				if time.Now().After(deadline) {
					fail("%s: %d of %d events claimed after a minute", me, total, len(all))
					return
				}
				recs, err := f.Store.Claim(context.Background(), req(me))
				if err != nil {
					fail("%v", err)
					return
				}
				if len(recs) == 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				slices.SortFunc(recs, func(a, b outbox.Record) int { return int(a.Seq - b.Seq) })
				mu.Lock()
				total += len(recs)
				mine := map[string]bool{}
				for _, r := range recs {
					claimed[r.ID]++
					if k := r.Envelope.OrderingKey(); r.Envelope.Ordered() {
						if other, busy := holder[k]; busy && !(keyRuns && mine[k]) {
							errs = append(errs, fmt.Sprintf("key %s: %s claimed by %s while %s holds the key", k, r.ID, me, other))
						}
						holder[k], mine[k] = me, true
						byKey[k] = append(byKey[k], r.Seq)
					}
				}
				for k := range mine { // let go before the DONE can let others claim
					delete(holder, k)
				}
				mu.Unlock()
				if n, err := f.Store.MarkDone(context.Background(), me, recIDs(recs), t0); err != nil || n != int64(len(recs)) {
					fail("MarkDone = %d, %v", n, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	checkConcurrentClaims(t, errs, all, claimed, byKey, perKey)
	return byKey
}

// checkConcurrentClaims reports the errors of concurrent claimers, and
// checks that every event of all was claimed once and that each key's
// events (byKey: their sequence numbers, in claim order) were claimed
// perKey, in sequence order.
func checkConcurrentClaims(t *testing.T, errs []string, all []outbox.Envelope, claimed map[string]int, byKey map[string][]int64, perKey int) {
	t.Helper()
	for _, e := range errs {
		t.Error(e)
	}
	for _, e := range all {
		if claimed[e.ID()] != 1 {
			t.Errorf("event %s claimed %d times", e.ID(), claimed[e.ID()])
		}
	}
	for k, s := range byKey {
		if len(s) != perKey || !slices.IsSorted(s) {
			t.Errorf("key %s: claimed in sequence order %v, want %d events in increasing order", k, s, perKey)
		}
	}
}

// storeRunsDeadPolicies: behind a DEAD event, DeadBlocksKey claims no run
// and DeadSkipsKey claims the events after it as a run; the recovery of an
// expired event behind a DEAD one follows the policy too.
func storeRunsDeadPolicies(t *testing.T, f Fixture) {
	a1, a2, a3 := keyed(t, "A"), keyed(t, "A"), keyed(t, "A")
	insert(t, f, t0, ownerA, a1)
	insert(t, f, t0, "", a2, a3)
	mustDead(t, f, ownerA, a1, t0)
	wantClaim(t, f, "DeadBlocksKey behind a DEAD head", runs(ownerB, t0, 10, 10))
	skips := runs(ownerB, t0, 10, 10)
	skips.DeadSkips = true
	skips.Lease = lease
	wantClaim(t, f, "DeadSkipsKey behind a DEAD head", skips, a2, a3)
	later := t0.Add(2 * lease)
	blocks := outbox.ClaimRequest{Owner: "owner-c", Now: later, Lease: lease, Limit: 10, Ordered: true, Run: 10}
	wantClaim(t, f, "DeadBlocksKey recovers nothing behind a DEAD event (and gives it back)", blocks)
	skips = outbox.ClaimRequest{Owner: "owner-c", Now: later, Lease: lease, Limit: 10, Ordered: true, Run: 10, DeadSkips: true}
	wantClaim(t, f, "DeadSkipsKey claims the run given back", skips, a2, a3)
}

// sortedRecIDs returns the ids of recs, sorted.
func sortedRecIDs(recs []outbox.Record) []string {
	out := recIDs(recs)
	slices.Sort(out)
	return out
}
