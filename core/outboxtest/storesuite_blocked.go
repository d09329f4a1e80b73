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

// The store suite's cases of keys blocked by a DEAD head (DeadBlocksKey):
// a store may set the events behind a DEAD head aside so that its ordered
// claim does not read them (sqlstore parks them); whatever ends the DEAD
// head — Replay, Skip, Delete, Purge, of every tenant or of one — must
// free them, and a DeadSkips claim must still take them.

// blockedEnds are the ways of ending the DEAD head of a key, by name:
// Replay, Skip, Delete, Purge of one tenant, Purge of every tenant.
var blockedEnds = []string{"Replay", "Skip", "Delete", "PurgeOfTenant", "Purge"}

// storeBlockedKeyFreed: a key blocked by a DEAD head, with events behind
// it (one written after ordered claims walked past the key), beside
// another blocked key, is freed by end: the next ordered claims take its
// events in order, one at a time; the other key stays blocked.
func storeBlockedKeyFreed(t *testing.T, f Fixture, end string) {
	ctx := context.Background()
	if strings.HasPrefix(end, "Purge") && f.Purger == nil {
		t.Skip("the fixture has no Purger")
	}
	var opts []outbox.EnvelopeOption
	if end == "PurgeOfTenant" {
		opts = append(opts, outbox.WithTenant("parked"))
	}
	// The other key's head went DEAD later: the purge leaves it.
	other := []outbox.Envelope{keyed(t, "other", opts...), keyed(t, "other")}
	insert(t, f, t0, ownerA, other[0])
	mustDead(t, f, ownerA, other[0], t0)
	evs := []outbox.Envelope{keyed(t, "freed", opts...), keyed(t, "freed"), keyed(t, "freed"), keyed(t, "freed")}
	dead := t0.Add(-2 * time.Hour)
	insert(t, f, dead, ownerA, evs[0])
	mustDead(t, f, ownerA, evs[0], dead)
	insert(t, f, t0, "", evs[1], evs[2], other[1])
	for range 3 {
		wantClaim(t, f, "while both keys are blocked", orderedLong(ownerB, t0, 10))
	}
	insert(t, f, t0, "", evs[3])
	wantClaim(t, f, "an event written behind a blocked key", orderedLong(ownerB, t0, 10))
	var n int64
	var err error
	switch purge := (outbox.PurgeRequest{Status: outbox.StatusDead, Before: t0.Add(-time.Hour), Limit: 10}); end {
	case "Replay":
		n, err = f.Store.Replay(ctx, []string{evs[0].ID()}, t0)
	case "Skip":
		n, err = f.Store.Skip(ctx, []string{evs[0].ID()}, t0, "skipped by the suite")
		evs = evs[1:]
	case "Delete":
		n, err = f.Store.Delete(ctx, []string{evs[0].ID()})
		evs = evs[1:]
	case "PurgeOfTenant", "Purge":
		if end == "PurgeOfTenant" {
			purge.TenantID = "parked"
		}
		n, err = f.Purger.Purge(ctx, purge)
		evs = evs[1:]
	default:
		t.Fatalf("no end %q", end)
	}
	if err != nil || n != 1 {
		t.Fatalf("%s of the DEAD head = %d, %v; want 1", end, n, err)
	}
	for i, e := range evs {
		wantClaim(t, f, fmt.Sprintf("event %d of the freed key", i), orderedLong(ownerB, t0, 10), e)
		mustDone(t, f, ownerB, e)
	}
	wantClaim(t, f, "after the freed key's events", orderedLong(ownerB, t0, 10))
}

// storeParkedKeySwept: a key whose DEAD head ends in a way that does not
// free its events — here an operator's SQL, as an older version's Replay
// would — is freed within a lease of the last sweep all the same: the
// ordered claims of a store must not leave its events waiting for the
// next event of the key, which may never come.
func storeParkedKeySwept(t *testing.T, f Fixture) {
	if f.Exec == nil {
		t.Skip("the fixture cannot run SQL on its table (Fixture.Exec is nil), so it cannot end a DEAD head behind the store's back")
	}
	ctx := context.Background()
	req := func(now time.Time) outbox.ClaimRequest { return orderedLong(ownerB, now, 10) }
	wantClaim(t, f, "the first claim, on an empty table", req(t0))
	h, e1, e2 := keyed(t, "swept"), keyed(t, "swept"), keyed(t, "swept")
	insert(t, f, t0, ownerA, h)
	mustDead(t, f, ownerA, h, t0)
	insert(t, f, t0, "", e1, e2)
	for range 3 {
		wantClaim(t, f, "while the key is blocked", req(t0))
	}
	// Ids are ULIDs (letters and digits): safe as a literal.
	if err := f.Exec(ctx, "UPDATE "+f.Table+" SET status = 1, done_at = created_at WHERE event_id = '"+h.ID()+"'"); err != nil {
		t.Fatalf("end the DEAD head: %v", err)
	}
	lease := req(t0).Lease
	wantClaim(t, f, "less than a lease after the last sweep", req(t0.Add(lease-time.Second)))
	wantClaim(t, f, "a lease after the last sweep", req(t0.Add(lease)), e1)
	mustDone(t, f, ownerB, e1)
	wantClaim(t, f, "the next claim", req(t0.Add(lease)), e2)
	mustDone(t, f, ownerB, e2)
	wantClaim(t, f, "after the key's events", req(t0.Add(lease)))
}

// storeBlockedKeyDeadSkips: events behind a DEAD head that ordered claims
// (DeadBlocksKey) walked past are taken, in order, by DeadSkips claims.
func storeBlockedKeyDeadSkips(t *testing.T, f Fixture) {
	s1, s2, s3 := keyed(t, "S"), keyed(t, "S"), keyed(t, "S")
	insert(t, f, t0, ownerA, s1)
	mustDead(t, f, ownerA, s1, t0)
	insert(t, f, t0, "", s2, s3)
	for range 3 {
		wantClaim(t, f, "while S is blocked", orderedLong(ownerB, t0, 10))
	}
	skips := orderedLong(ownerB, t0, 10)
	skips.DeadSkips = true
	wantClaim(t, f, "DeadSkips past the DEAD head", skips, s2)
	wantClaim(t, f, "while the head runs", skips)
	mustDone(t, f, ownerB, s2)
	wantClaim(t, f, "DeadSkips after the head", skips, s3)
	mustDone(t, f, ownerB, s3)
	wantClaim(t, f, "DeadBlocksKey: S holds its DEAD event alone", orderedLong(ownerB, t0, 10))
}

// storeBlockedKeysCostNothing: once ordered claims have walked past many
// blocked keys (all of them, on the way to the healthy key's second
// event), each next event of a healthy key among them is taken by the very
// next claim: the blocked keys are not walked again.
func storeBlockedKeysCostNothing(t *testing.T, f Fixture) {
	const blocked = 400
	blockKeys(t, f, "cost-%03d", blocked)
	healthy := keyEvents(t, f, "cost-100-ok", 6) // in the middle of the blocked keys
	// The walks up to the healthy key's second event pass every key once.
	for _, e := range healthy[:2] {
		var got []outbox.Record
		for claims := 0; len(got) == 0; claims++ {
			if claims == 2*blocked { // far more than any walk needs
				t.Fatalf("after %d claims, the healthy key's event %s was not claimed", claims, e.ID())
			}
			got = claim(t, f, orderedLong(ownerB, t0, 10))
		}
		if ids := recIDs(got); !slices.Equal(ids, []string{e.ID()}) {
			t.Fatalf("the first claim that took anything took %v, want the healthy key's head %s", ids, e.ID())
		}
		mustDone(t, f, ownerB, e)
	}
	for i, e := range healthy[2:] {
		wantClaim(t, f, fmt.Sprintf("the next claim after event %d of the healthy key", i+1), orderedLong(ownerB, t0, 10), e)
		mustDone(t, f, ownerB, e)
	}
}

// blockKeys writes n keys (named by format from their number) blocked by
// a DEAD head, each with an event behind it, and returns the heads and the
// events behind them.
func blockKeys(t *testing.T, f Fixture, format string, n int) (heads, behind []outbox.Envelope) {
	heads, behind = make([]outbox.Envelope, n), make([]outbox.Envelope, n)
	for i := range heads {
		key := fmt.Sprintf(format, i)
		heads[i], behind[i] = keyed(t, key), keyed(t, key)
	}
	insert(t, f, t0, ownerA, heads...)
	for _, e := range heads {
		mustDead(t, f, ownerA, e, t0)
	}
	insert(t, f, t0, "", behind...)
	return heads, behind
}

// keyEvents writes n pending events of key.
func keyEvents(t *testing.T, f Fixture, key string, n int) []outbox.Envelope {
	evs := make([]outbox.Envelope, n)
	for i := range evs {
		evs[i] = keyed(t, key)
	}
	insert(t, f, t0, "", evs...)
	return evs
}
