package outboxtest

import (
	"context"
	"slices"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
)

// storeRunsContinue: ContinueRuns (outbox.RunContinuer) claims the events
// that follow a run's last event on its key, in sequence order, as a
// claim takes a head's run: up to Run per key and Limit in all, stopping
// at the first event claimed elsewhere or of a type the claim leaves out;
// nothing of other keys, no recovery, and nothing for a key whose earlier
// event is open again (replayed) or, with DeadBlocksKey, DEAD.
func storeRunsContinue(t *testing.T, f Fixture) {
	rc, ok := f.Store.(outbox.RunContinuer)
	if !ok {
		t.Skip("the Store does not implement outbox.RunContinuer: its runs go on with the next claim")
	}
	var a []outbox.Envelope
	for range 5 {
		a = append(a, keyed(t, "A"))
	}
	a6 := keyedType(t, "A", "other")
	b1, b2 := keyed(t, "B"), keyed(t, "B")
	c1, c2, c3 := keyed(t, "C"), keyed(t, "C"), keyed(t, "C")
	u := event(t)
	insert(t, f, t0, "", a[0], a[1], b1, a[2], a[3], u, a[4], a6, b2, c1)
	insert(t, f, t0, ownerB, c2) // claimed elsewhere (the hot path's)
	insert(t, f, t0, "", c3)
	got := claim(t, f, runs(ownerA, t0, 6, 2))
	if w := sortedIDs(a[0], a[1], b1, b2, c1, u); !slices.Equal(sortedRecIDs(got), w) {
		t.Fatalf("the claim with runs of 2 took %v, want %v", sortedRecIDs(got), w)
	}
	seq := map[string]int64{}
	for _, r := range got {
		seq[r.ID] = r.Seq
	}
	cont := func(what string, req outbox.ClaimRequest, tails []outbox.RunTail, want ...outbox.Envelope) []outbox.Record {
		t.Helper()
		req.Lease = lease
		recs, err := rc.ContinueRuns(context.Background(), req, tails)
		if err != nil {
			t.Fatalf("%s: ContinueRuns: %v", what, err)
		}
		if g, w := sortedRecIDs(recs), sortedIDs(want...); !slices.Equal(g, w) {
			t.Fatalf("%s: ContinueRuns took %v, want %v", what, g, w)
		}
		return recs
	}
	mustDone(t, f, ownerA, a[0]) // the run's events before its last are DONE when it goes on
	recs := cont("after A's run of two", runs(ownerA, t0, 10, 2), []outbox.RunTail{{Key: "A", Seq: seq[a[1].ID()]}}, a[2], a[3])
	if recs[0].Seq >= recs[1].Seq || recs[0].ID != a[2].ID() {
		t.Errorf("the continued run comes back as %v (sequence %d, %d), want A's third event first", sortedRecIDs(recs), recs[0].Seq, recs[1].Seq)
	}
	for _, r := range recs {
		wantState(t, get(t, f, r.ID), outbox.StatusNew, 0, ownerA)
	}
	wantClaim(t, f, "while A's continued run is held", runs(ownerB, t0, 10, 10))

	// Up to the first event of a type the claim leaves out.
	mustDone(t, f, ownerA, a[1], a[2])
	skip := runs(ownerA, t0, 10, 10)
	skip.SkipTypes = []string{"other"}
	cont("up to an event of a skipped type", skip, []outbox.RunTail{{Key: "A", Seq: recs[1].Seq}}, a[4])
	// Up to the first event claimed elsewhere (C's head came with the
	// first claim).
	cont("up to an event claimed elsewhere", runs(ownerA, t0, 10, 10), []outbox.RunTail{{Key: "C", Seq: get(t, f, c1.ID()).Seq}})
	// Limit bounds the events in all; a key with nothing after its tail
	// adds nothing.
	mustDone(t, f, ownerA, a[3], a[4])
	cont("within the limit", runs(ownerA, t0, 1, 10), []outbox.RunTail{{Key: "A", Seq: get(t, f, a[4].ID()).Seq}, {Key: "B", Seq: get(t, f, b1.ID()).Seq}}, a6)
	cont("after the last event of a key", runs(ownerA, t0, 10, 10), []outbox.RunTail{{Key: "A", Seq: get(t, f, a6.ID()).Seq}})
	// Nothing after a tail that an open event of its key comes before: one
	// replayed since its run was claimed (DeadSkips), one DEAD
	// (DeadBlocks).
	d := []outbox.Envelope{keyed(t, "D"), keyed(t, "D"), keyed(t, "D"), keyed(t, "D")}
	insert(t, f, t0, "", d...)
	skips := runs(ownerA, t0, 1, 1)
	skips.DeadSkips = true
	wantClaim(t, f, "D's head", skips, d[0])
	mustDead(t, f, ownerA, d[0], t0)
	skips.Limit, skips.Run = 10, 2
	wantClaim(t, f, "D's run past its DEAD head (DeadSkips)", skips, d[1], d[2])
	blocks := runs(ownerA, t0, 10, 10)
	cont("after a DEAD event (DeadBlocks)", blocks, []outbox.RunTail{{Key: "D", Seq: get(t, f, d[2].ID()).Seq}})
	if n, err := f.Store.Replay(context.Background(), []string{d[0].ID()}, t0); err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v", n, err)
	}
	cont("after a replayed event (DeadSkips)", skips, []outbox.RunTail{{Key: "D", Seq: get(t, f, d[2].ID()).Seq}})
	mustDone(t, f, ownerA, d[1], d[2])
	wantClaim(t, f, "the replayed event, D's head again, and its run", skips, d[0], d[3])

	if _, err := rc.ContinueRuns(context.Background(), runs("", t0, 10, 10), []outbox.RunTail{{Key: "B", Seq: 0}}); err == nil {
		t.Error("ContinueRuns without an owner: no error")
	}
}
