package outboxtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// The store suite's cases of ordered delivery (outbox.Config.Ordered): an
// ordered claim takes an ordered event only as the head of its key — its
// first event that is not DONE (nor DEAD, unless DeadSkips) — in sequence
// order; a claim that is not ordered leaves ordered events alone.

// keyed builds an event ordered by key.
func keyed(t testing.TB, key string, opts ...outbox.EnvelopeOption) outbox.Envelope {
	t.Helper()
	return event(t, append([]outbox.EnvelopeOption{outbox.WithOrderingKey(key)}, opts...)...)
}

// ordered is a claim request of owner at now that takes ordered events.
func ordered(owner string, now time.Time, limit int) outbox.ClaimRequest {
	return outbox.ClaimRequest{Owner: owner, Now: now, Lease: lease, Limit: limit, Ordered: true}
}

// orderedLong is ordered with a lease of a day: no claim expires.
func orderedLong(owner string, now time.Time, limit int) outbox.ClaimRequest {
	req := ordered(owner, now, limit)
	req.Lease = 24 * time.Hour
	return req
}

// claimedIDs claims and returns the ids, sorted.
func claimedIDs(t testing.TB, f Fixture, req outbox.ClaimRequest) []string {
	t.Helper()
	got := recIDs(claim(t, f, req))
	slices.Sort(got)
	return got
}

func sortedIDs(evs ...outbox.Envelope) []string {
	out := ids(evs)
	slices.Sort(out)
	return out
}

func wantClaim(t testing.TB, f Fixture, what string, req outbox.ClaimRequest, want ...outbox.Envelope) {
	t.Helper()
	if got, w := claimedIDs(t, f, req), sortedIDs(want...); !slices.Equal(got, w) {
		t.Fatalf("%s: claimed %v, want %v", what, got, w)
	}
}

func mustDone(t testing.TB, f Fixture, owner string, evs ...outbox.Envelope) {
	t.Helper()
	if n, err := f.Store.MarkDone(context.Background(), owner, ids(evs), t0); err != nil || n != int64(len(evs)) {
		t.Fatalf("MarkDone = %d, %v; want %d", n, err, len(evs))
	}
}

func mustDead(t testing.TB, f Fixture, owner string, e outbox.Envelope, at time.Time) {
	t.Helper()
	if ok, err := f.Store.MarkDead(context.Background(), outbox.Outcome{Owner: owner, ID: e.ID(), At: at, Error: "poison", CountAttempt: true}); err != nil || !ok {
		t.Fatalf("MarkDead = %v, %v", ok, err)
	}
}

// storeOrderedHeads: only heads are claimed; finishing a head frees the
// next event of its key; a retry, a delayed head and a DEAD head hold
// their key back; unordered events are claimed beside them; Skip and
// Delete free a key a DEAD event blocks.
func storeOrderedHeads(t *testing.T, f Fixture) {
	ctx := context.Background()
	a1, a2, a3 := keyed(t, "A"), keyed(t, "A"), keyed(t, "A")
	b1, b2 := keyed(t, "B"), keyed(t, "B")
	c1, c2 := keyed(t, "C", outbox.WithAvailableAt(t0.Add(time.Hour))), keyed(t, "C")
	u := event(t)
	insert(t, f, t0, "", a1, b1, a2, u, c1, b2)
	insert(t, f, t0, "", a3, c2)
	wantClaim(t, f, "first ordered claim", orderedLong(ownerA, t0, 10), a1, b1, u)
	wantClaim(t, f, "second ordered claim", orderedLong(ownerA, t0, 10))
	mustDone(t, f, ownerA, a1)
	wantClaim(t, f, "after the head of A is DONE", orderedLong(ownerB, t0, 10), a2)
	if ok, err := f.Store.MarkRetry(ctx, outbox.Outcome{Owner: ownerA, ID: b1.ID(), At: t0.Add(10 * time.Second), Error: "busy", CountAttempt: true}); err != nil || !ok {
		t.Fatalf("MarkRetry = %v, %v", ok, err)
	}
	wantClaim(t, f, "while the head of B waits for its retry", orderedLong(ownerB, t0.Add(time.Second), 10))
	wantClaim(t, f, "when the retry of B is due", orderedLong(ownerB, t0.Add(10*time.Second), 10), b1)
	mustDone(t, f, ownerB, b1)
	wantClaim(t, f, "after B's retry is DONE", orderedLong(ownerA, t0.Add(10*time.Second), 10), b2)
	wantClaim(t, f, "when the delayed head of C is due", orderedLong(ownerA, t0.Add(time.Hour), 10), c1)
	mustDone(t, f, ownerA, c1, b2)
	wantClaim(t, f, "after C's delayed head", orderedLong(ownerA, t0.Add(time.Hour), 10), c2)

	mustDead(t, f, ownerB, a2, t0.Add(2*time.Hour))
	wantClaim(t, f, "while a DEAD event blocks A", orderedLong(ownerA, t0.Add(3*time.Hour), 10))
	st, err := f.Store.Stats(ctx, t0)
	if err != nil {
		t.Fatal(err)
	}
	if st.BlockedKeys != 1 {
		t.Fatalf("Stats.BlockedKeys = %d, want 1", st.BlockedKeys)
	}
	wantTime(t, "Stats.OldestBlocked", st.OldestBlocked, t0.Add(2*time.Hour))
	blocking := listAll(t, f, outbox.Query{Blocking: true})
	if got := recIDs(blocking); !slices.Equal(got, []string{a2.ID()}) {
		t.Fatalf("Query{Blocking} = %v, want the DEAD head of A %s", got, a2.ID())
	}
	if got := blocking[0].Envelope.OrderingKey(); got != "A" || !blocking[0].Envelope.Ordered() {
		t.Fatalf("the blocking event reads back with ordering key %q (ordered %v), want A", got, blocking[0].Envelope.Ordered())
	}
	if n := countRows(t, f, outbox.Query{Blocking: true, Statuses: []outbox.Status{outbox.StatusDead}}); n != 1 {
		t.Fatalf("Count{Blocking} = %d, want 1", n)
	}
	wantClaim(t, f, "a DEAD head skipped by DeadSkips", outbox.ClaimRequest{Owner: ownerA, Now: t0.Add(3 * time.Hour), Lease: 24 * time.Hour, Limit: 10, Ordered: true, DeadSkips: true}, a3)
	if n, err := f.Store.Release(ctx, ownerA, []string{a3.ID()}); err != nil || n != 1 {
		t.Fatalf("Release = %d, %v", n, err)
	}
	now := t0.Add(4 * time.Hour)
	if n, err := f.Store.Skip(ctx, []string{a2.ID(), a3.ID(), "no-such-id"}, now, "skipped by the suite"); err != nil || n != 1 {
		t.Fatalf("Skip = %d, %v; want 1 (only the DEAD event)", n, err)
	}
	r := get(t, f, a2.ID())
	wantState(t, r, outbox.StatusDone, 1, "")
	wantTime(t, "skipped at", r.DoneAt, now)
	if r.LastError != "skipped by the suite" {
		t.Errorf("skip note %q", r.LastError)
	}
	wantClaim(t, f, "after the DEAD head was skipped", orderedLong(ownerA, now, 10), a3)
	if st, err := f.Store.Stats(ctx, t0); err != nil || st.BlockedKeys != 0 || !st.OldestBlocked.IsZero() {
		t.Fatalf("Stats after the skip = %+v, %v; want no blocked key", st, err)
	}

	// Delete frees a key too.
	d1, d2 := keyed(t, "D"), keyed(t, "D")
	insert(t, f, now, ownerA, d1)
	insert(t, f, now, "", d2)
	mustDead(t, f, ownerA, d1, now)
	wantClaim(t, f, "while D is blocked", orderedLong(ownerB, now, 10))
	if n, err := f.Store.Delete(ctx, []string{d1.ID()}); err != nil || n != 1 {
		t.Fatalf("Delete = %d, %v", n, err)
	}
	wantClaim(t, f, "after the DEAD head of D was deleted", orderedLong(ownerB, now, 10), d2)
}

// storeOrderedSequence: Seq follows the insertion order, within a batch
// and across transactions; ordered events read back with their key,
// unordered ones (even of an aggregate) without.
func storeOrderedSequence(t *testing.T, f Fixture) {
	agg := event(t, outbox.WithAggregate(outbox.AggregateName("Order"), "o-1")) // not marked ordered: stored without a key
	batch := []outbox.Envelope{keyed(t, "K"), agg, keyed(t, "K"), keyed(t, "L")}
	insert(t, f, t0, "", batch...)
	later := []outbox.Envelope{keyed(t, "K"), event(t)}
	insert(t, f, t0, ownerA, later...)
	var prev int64
	for _, e := range append(batch, later...) {
		r := get(t, f, e.ID())
		if r.Seq <= prev {
			t.Fatalf("event %s has Seq %d after %d: not in insertion order", e.ID(), r.Seq, prev)
		}
		prev = r.Seq
		if r.Envelope.Ordered() != e.Ordered() || r.Envelope.Ordered() && r.Envelope.OrderingKey() != e.OrderingKey() {
			t.Errorf("event %s reads back ordered=%v key %q, want ordered=%v key %q", e.ID(), r.Envelope.Ordered(), r.Envelope.OrderingKey(), e.Ordered(), e.OrderingKey())
		}
	}
	if r := get(t, f, agg.ID()); r.Envelope.Ordered() || r.Envelope.OrderingKey() != "Order/o-1" {
		t.Errorf("an unordered event of an aggregate reads back ordered=%v key %q, want unordered with its default key Order/o-1", r.Envelope.Ordered(), r.Envelope.OrderingKey())
	}
}

// storeOrderedVersusUnordered: a claim that is not ordered leaves ordered
// events alone (a Client without Ordered never breaks their order), but
// recovers an expired claim of any event; an ordered claim recovers an
// expired head before the next event of its key.
func storeOrderedVersusUnordered(t *testing.T, f Fixture) {
	k1, k2, u := keyed(t, "K"), keyed(t, "K"), event(t)
	insert(t, f, t0, ownerA, k1) // claimed at insert: the hot path's row
	insert(t, f, t0, "", k2, u)
	wantClaim(t, f, "an unordered claim", outbox.ClaimRequest{Owner: ownerB, Now: t0, Lease: lease, Limit: 10}, u)
	mustDone(t, f, ownerB, u)
	wantClaim(t, f, "an ordered claim while the head is held", ordered(ownerB, t0, 10))
	got := claim(t, f, ordered(ownerB, t0.Add(lease), 10))
	if len(got) != 1 || got[0].ID != k1.ID() || got[0].LastError != outbox.ErrClaimExpired.Error() {
		t.Fatalf("ordered claim after the head's lease = %v, want the head %s taken over", recIDs(got), k1.ID())
	}
	mustDone(t, f, ownerB, k1)
	wantClaim(t, f, "after the recovered head is DONE", ordered(ownerA, t0.Add(lease), 10), k2)
}

// storeOrderedDeadSkips: with DeadSkips a DEAD event gives up its place;
// replayed, it is the head of its key again and the events after it that
// are not claimed yet wait for it.
func storeOrderedDeadSkips(t *testing.T, f Fixture) {
	ctx := context.Background()
	skips := func(owner string, now time.Time) outbox.ClaimRequest {
		req := ordered(owner, now, 10)
		req.DeadSkips = true
		return req
	}
	a1, a2, a3 := keyed(t, "A"), keyed(t, "A"), keyed(t, "A")
	insert(t, f, t0, ownerA, a1)
	insert(t, f, t0, "", a2, a3)
	mustDead(t, f, ownerA, a1, t0)
	wantClaim(t, f, "DeadSkips past the DEAD head", skips(ownerB, t0), a2)
	mustDone(t, f, ownerB, a2)
	if n, err := f.Store.Replay(ctx, []string{a1.ID()}, t0); err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v", n, err)
	}
	wantClaim(t, f, "the replayed event is the head again", skips(ownerB, t0), a1)
	wantClaim(t, f, "while the replayed head runs", skips(ownerB, t0))
	mustDone(t, f, ownerB, a1)
	wantClaim(t, f, "after the replayed head", skips(ownerB, t0), a3)
}

// storeOrderedPendingKeys: PendingKeys reports the keys with an event not
// DONE (pending, claimed, DEAD), as the transaction sees them: its own
// inserts count, DONE events and unordered events do not. Long lists are
// split.
func storeOrderedPendingKeys(t *testing.T, f Fixture) {
	ctx := context.Background()
	done, dead, retry := keyed(t, "done"), keyed(t, "dead"), keyed(t, "retry")
	insert(t, f, t0, ownerA, done, dead, retry, keyed(t, "claimed"), event(t, outbox.WithAggregate(outbox.AggregateName("Unordered"), "u")))
	insert(t, f, t0, "", keyed(t, "new"))
	mustDone(t, f, ownerA, done)
	mustDead(t, f, ownerA, dead, t0)
	if ok, err := f.Store.MarkRetry(ctx, outbox.Outcome{Owner: ownerA, ID: retry.ID(), At: t0, Error: "x"}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	asked := []string{"done", "dead", "retry", "claimed", "new", "none", "staged", "Unordered/u"}
	for i := range 600 { // more than one IN list
		asked = append(asked, fmt.Sprintf("absent-%03d", i))
	}
	asked = append(asked, "last")
	var got []string
	err := f.InTx(ctx, func(ctx context.Context) error {
		tx, err := f.TxContext.Current(ctx)
		if err != nil {
			return err
		}
		if err := f.Store.Insert(ctx, tx, t0, "", []outbox.Envelope{keyed(t, "staged"), keyed(t, "last")}); err != nil {
			return err
		}
		got, err = f.Store.PendingKeys(ctx, tx, asked)
		return err
	})
	if err != nil {
		t.Fatalf("PendingKeys: %v", err)
	}
	slices.Sort(got)
	if want := []string{"claimed", "dead", "last", "new", "retry", "staged"}; !slices.Equal(got, want) {
		t.Fatalf("PendingKeys = %v, want %v", got, want)
	}
}

// storeOrderedTurns: an ordered claim takes keys in turn, starting after
// the last key the previous claim took, so that a small limit does not
// serve the same keys again and again.
func storeOrderedTurns(t *testing.T, f Fixture) {
	var first, second []outbox.Envelope
	for _, k := range []string{"k1", "k2", "k3", "k4", "k5"} {
		first, second = append(first, keyed(t, k)), append(second, keyed(t, k))
	}
	insert(t, f, t0, "", first...)
	insert(t, f, t0, "", second...)
	var claims []string
	for range 5 {
		recs := claim(t, f, ordered(ownerA, t0, 2))
		var keys []string
		for _, r := range recs {
			keys = append(keys, r.Envelope.OrderingKey())
		}
		slices.Sort(keys)
		claims = append(claims, strings.Join(keys, ","))
		if len(recs) > 0 {
			mustDone(t, f, ownerA, envs(recs)...)
		}
	}
	if got, want := strings.Join(claims, " "), "k1,k2 k3,k4 k1,k5 k2,k3 k4,k5"; got != want {
		t.Fatalf("keys per claim %q, want each key in turn: %q", got, want)
	}
}

func envs(recs []outbox.Record) []outbox.Envelope {
	out := make([]outbox.Envelope, len(recs))
	for i, r := range recs {
		out[i] = r.Envelope
	}
	return out
}

// storeOrderedConcurrent: concurrent ordered claimers over many keys take
// every event once, each key's events in sequence order, and never two
// events of one key before the first is DONE.
func storeOrderedConcurrent(t *testing.T, f Fixture) {
	const keys, perKey, workers = 60, 5, 6
	var all []outbox.Envelope
	for range perKey {
		batch := make([]outbox.Envelope, 0, keys+10)
		for k := range keys {
			batch = append(batch, keyed(t, fmt.Sprintf("key-%02d", k)))
		}
		for range 10 {
			batch = append(batch, event(t)) // unordered events beside them
		}
		insert(t, f, t0, "", batch...)
		all = append(all, batch...)
	}
	byKey := claimKeysConcurrently(t, f, workers, all, perKey, false, func(owner string) outbox.ClaimRequest { return orderedLong(owner, t0, 7) })
	if len(byKey) != keys {
		t.Errorf("%d keys claimed, want %d", len(byKey), keys)
	}
}

// storeOrderedPastBlockedKeys: many keys blocked by a DEAD head (each
// with an event waiting behind it) and one healthy key: ordered claims
// take the healthy key's events, one at a time and in order, and never an
// event of a blocked key; after a Replay the blocked key's head is
// claimable again.
func storeOrderedPastBlockedKeys(t *testing.T, f Fixture) {
	ctx := context.Background()
	const blocked = 300
	heads, behind := blockKeys(t, f, "blocked-%03d", blocked)
	healthy := keyEvents(t, f, "blocked-150-ok", 5) // in the middle of the blocked keys
	isBlocked := map[string]bool{}
	for _, e := range slices.Concat(heads, behind) {
		isBlocked[e.ID()] = true
	}
	var got []string
	for claims := 0; len(got) < len(healthy); claims++ {
		if claims == 2*len(healthy)*blocked { // far more than any walk needs
			t.Fatalf("after %d claims, %d of the healthy key's %d events were claimed", claims, len(got), len(healthy))
		}
		recs := claim(t, f, orderedLong(ownerB, t0, 10))
		if len(recs) > 1 {
			t.Fatalf("one claim took %d events: %v; want the healthy key's head alone", len(recs), recIDs(recs))
		}
		for _, r := range recs {
			if isBlocked[r.ID] {
				t.Fatalf("claimed %s of a blocked key", r.ID)
			}
			got = append(got, r.ID)
		}
		mustDone(t, f, ownerB, envs(recs)...)
	}
	if !slices.Equal(got, ids(healthy)) {
		t.Errorf("the healthy key's events were claimed in the order %v, want %v", got, ids(healthy))
	}
	if n, err := f.Store.Replay(ctx, []string{heads[7].ID()}, t0); err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v", n, err)
	}
	var again []string
	for claims := 0; len(again) == 0 && claims < 10*blocked; claims++ {
		again = recIDs(claim(t, f, orderedLong(ownerB, t0, 10)))
	}
	if !slices.Equal(again, []string{heads[7].ID()}) {
		t.Errorf("after the Replay of a blocked head, the claims took %v, want it alone", again)
	}
}
