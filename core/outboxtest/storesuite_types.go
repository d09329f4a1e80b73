package outboxtest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// The store suite's cases of the claim's type filters
// (outbox.ClaimRequest.Types and SkipTypes) and of the backlog per type
// in Stats.

// typed builds an event of type typ with opts.
func typed(t testing.TB, typ string, opts ...outbox.EnvelopeOption) outbox.Envelope {
	t.Helper()
	return eventOf(t, outbox.EventName(typ), append([]outbox.EnvelopeOption{outbox.WithJSON([]byte(`{"k":1}`))}, opts...)...)
}

// hostileTypes are event types that a filter and Stats must keep apart
// exactly: quotes, a backslash, braces and commas (array literals),
// trailing spaces (padding collations), case, and non-ASCII text.
var hostileTypes = []string{`Order"Placed`, `it's`, `back\slash`, `{a,b}`, "pad", "pad ", "PAD", "Zürich 東京 🚀", "NULL"}

// storeClaimTypes: Types claims only those types, in due order across
// them, past the other types' rows that come first; SkipTypes leaves
// types out; an empty Types claims nothing; both apply to the recovery of
// expired claims.
func storeClaimTypes(t *testing.T, f Fixture) {
	// Other types first in due order, then ours, interleaved.
	var other, mine []outbox.Envelope
	for i := range 30 {
		other = append(other, typed(t, fmt.Sprintf("Other%d", i%3), outbox.WithID(fmt.Sprintf("a%02d", i))))
	}
	for i := range 6 {
		mine = append(mine, typed(t, []string{"Mine", "Also"}[i%2], outbox.WithID(fmt.Sprintf("b%02d", i))))
	}
	insert(t, f, t0, "", other...)
	insert(t, f, t0.Add(time.Second), "", mine...)
	now := t0.Add(time.Minute)
	req := outbox.ClaimRequest{Owner: ownerA, Now: now, Lease: lease, Limit: 4, Types: []string{"Mine", "Also", "Mine"}}
	if got, want := recIDs(claim(t, f, req)), ids(mine[:4]); !slices.Equal(got, want) {
		t.Fatalf("claim of Types %v = %v, want %v (due order across the types)", req.Types, got, want)
	}
	req.Types = []string{}
	if got := claim(t, f, req); len(got) != 0 {
		t.Fatalf("claim with an empty Types = %v, want nothing", recIDs(got))
	}
	req.Types = []string{"Mine", "Also"}
	req.SkipTypes = []string{"Also", "Other0"}
	if got, want := recIDs(claim(t, f, req)), ids(mine[4:5]); !slices.Equal(got, want) {
		t.Fatalf("claim of Types %v skipping %v = %v, want %v", req.Types, req.SkipTypes, got, want)
	}
	req.Types = []string{"Also"}
	if got := claim(t, f, req); len(got) != 0 {
		t.Fatalf("claim of Types all skipped = %v, want nothing", recIDs(got))
	}
	// SkipTypes alone: every other type.
	req = outbox.ClaimRequest{Owner: ownerB, Now: now, Lease: lease, Limit: 100, SkipTypes: []string{"Other1", "Other2"}}
	var want []string
	for i, e := range other {
		if i%3 == 0 {
			want = append(want, e.ID())
		}
	}
	want = append(want, mine[5].ID())
	if got := recIDs(claim(t, f, req)); !slices.Equal(got, want) {
		t.Fatalf("claim skipping %v = %v, want %v", req.SkipTypes, got, want)
	}

	// Recovery: the expired claims of owner A (Mine and Also) and B
	// (Other0 and Also) are taken over only as the filters allow.
	later := now.Add(2 * lease)
	req = outbox.ClaimRequest{Owner: "owner-c", Now: later, Lease: lease, Limit: 100, Types: []string{"Mine"}}
	if got, want := recIDs(claim(t, f, req)), ids([]outbox.Envelope{mine[0], mine[2], mine[4]}); !slices.Equal(got, want) {
		t.Fatalf("recovery of Types Mine = %v, want %v", got, want)
	}
	// The rest: the expired claims of Also, and the due rows of the
	// types not skipped (Other1 and Other2), never those of Other0.
	want = nil
	for i, e := range other {
		if i%3 != 0 {
			want = append(want, e.ID())
		}
	}
	want = append(want, mine[1].ID(), mine[3].ID(), mine[5].ID())
	req = outbox.ClaimRequest{Owner: "owner-d", Now: later, Lease: lease, Limit: 100, SkipTypes: []string{"Other0", "Mine"}}
	if got := recIDs(claim(t, f, req)); !slices.Equal(got, want) {
		t.Fatalf("claim skipping Other0 and Mine = %v, want %v", got, want)
	}
}

// storeClaimTypesConcurrent: concurrent claims of two types take each of
// their events exactly once, past another type's events, and none of
// those.
func storeClaimTypesConcurrent(t *testing.T, f Fixture) {
	var other, mine []outbox.Envelope
	for range 500 {
		other = append(other, typed(t, "Other"))
	}
	for i := range 1500 {
		mine = append(mine, typed(t, []string{"Mine", "Also"}[i%2]))
	}
	insert(t, f, t0, "", other...)
	insert(t, f, t0.Add(time.Second), "", mine...)
	claims := claimConcurrently(t, f, outbox.ClaimRequest{Now: t0.Add(time.Minute), Lease: lease, Limit: 50, Types: []string{"Mine", "Also"}}, len(mine))
	for _, e := range other {
		if claims[e.ID()] != 0 {
			t.Fatalf("a claim of Types Mine, Also took %s of type Other", e.ID())
		}
	}
}

// storeClaimHostileTypes: types that differ by quotes, case, trailing
// spaces or that hold non-ASCII text are filtered exactly.
func storeClaimHostileTypes(t *testing.T, f Fixture) {
	byType := map[string]outbox.Envelope{}
	for _, typ := range hostileTypes {
		e := typed(t, typ)
		byType[typ] = e
		insert(t, f, t0, "", e)
	}
	now := t0.Add(time.Minute)
	for _, typ := range hostileTypes {
		req := outbox.ClaimRequest{Owner: ownerA, Now: now, Lease: time.Hour, Limit: 10, Types: []string{typ}, NoRecovery: true}
		if got, want := recIDs(claim(t, f, req)), []string{byType[typ].ID()}; !slices.Equal(got, want) {
			t.Errorf("claim of Types [%q] = %v, want %v", typ, got, want)
		}
	}
	// Everything is claimed now; release it and skip all but one.
	if _, err := f.Store.Release(context.Background(), ownerA, ids(slices.Collect(maps.Values(byType)))); err != nil {
		t.Fatal(err)
	}
	skip := slices.DeleteFunc(slices.Clone(hostileTypes), func(typ string) bool { return typ == "pad" })
	req := outbox.ClaimRequest{Owner: ownerB, Now: now, Lease: time.Hour, Limit: 10, SkipTypes: skip}
	if got, want := recIDs(claim(t, f, req)), []string{byType["pad"].ID()}; !slices.Equal(got, want) {
		t.Errorf("claim skipping all but \"pad\" = %v, want %v", got, want)
	}
}

// storeOrderedClaimTypes: an ordered claim applies the filters to the
// head of each key: a key whose head is filtered out waits, its later
// events unclaimed even when their types are allowed.
func storeOrderedClaimTypes(t *testing.T, f Fixture) {
	a1, a2 := keyed(t, "A"), typed(t, "Mine", outbox.WithOrderingKey("A"))
	b1, b2 := typed(t, "Mine", outbox.WithOrderingKey("B")), keyed(t, "B")
	free := typed(t, "Mine")
	insert(t, f, t0, "", a1, a2, b1, b2, free)
	req := orderedLong(ownerA, t0.Add(time.Minute), 10)
	req.Types = []string{"Mine"}
	wantClaim(t, f, "ordered claim of Types Mine", req, b1, free)
	mustDone(t, f, ownerA, b1)
	wantClaim(t, f, "ordered claim of Types Mine after B's head", req)
	req.Types, req.SkipTypes = nil, []string{evtTest.Name()}
	wantClaim(t, f, "ordered claim skipping Test", req)
	req.SkipTypes = nil
	wantClaim(t, f, "ordered claim without filters", req, a1, b2)
	mustDone(t, f, ownerA, a1)
	req.Types = []string{"Mine"}
	wantClaim(t, f, "ordered claim of Types Mine after A's head", req, a2)
}

// storeStatsTypes: Stats counts the claimed pending rows and the pending
// backlog per type, most pending first, at most outbox.MaxStatsTypes
// types, each type exactly as written.
func storeStatsTypes(t *testing.T, f Fixture) {
	ctx := context.Background()
	for i, typ := range hostileTypes {
		evs := make([]outbox.Envelope, i+1)
		for j := range evs {
			evs[j] = typed(t, typ)
		}
		insert(t, f, t0.Add(time.Duration(i)*time.Second), "", evs[:1]...)
		insert(t, f, t0.Add(time.Hour), "", evs[1:]...)
	}
	done := typed(t, "Done")
	insert(t, f, t0, ownerA, done)
	mustDone(t, f, ownerA, done)
	claimed := claim(t, f, outbox.ClaimRequest{Owner: ownerA, Now: t0.Add(2 * time.Hour), Lease: lease, Limit: 5, Types: []string{"NULL", "pad"}})
	st, err := f.Store.Stats(ctx, t0.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if st.Claimed != int64(len(claimed)) || len(claimed) != 5 {
		t.Errorf("Stats.Claimed = %d, want %d", st.Claimed, len(claimed))
	}
	if st.TypesTruncated || len(st.Types) != len(hostileTypes) {
		t.Fatalf("Stats.Types = %+v (truncated %v), want %d types", st.Types, st.TypesTruncated, len(hostileTypes))
	}
	for i, tb := range st.Types {
		j := len(hostileTypes) - 1 - i // the most pending first
		if tb.Type != hostileTypes[j] || tb.Pending != int64(j+1) {
			t.Errorf("Stats.Types[%d] = %q: %d, want %q: %d", i, tb.Type, tb.Pending, hostileTypes[j], j+1)
		}
		wantTime(t, "oldest of "+tb.Type, tb.Oldest, t0.Add(time.Duration(j)*time.Second))
	}
	if st.Unrouted != nil {
		t.Errorf("Stats.Unrouted = %v, want nil (the Client fills it)", st.Unrouted)
	}

	// More types than MaxStatsTypes: the most pending are kept.
	var many []outbox.Envelope
	for i := range outbox.MaxStatsTypes + 5 {
		many = append(many, typed(t, fmt.Sprintf("T%04d", i)))
	}
	insert(t, f, t0, "", many...)
	if st, err = f.Store.Stats(ctx, t0); err != nil {
		t.Fatal(err)
	}
	if !st.TypesTruncated || len(st.Types) != outbox.MaxStatsTypes {
		t.Fatalf("Stats of %d types: %d types, truncated %v; want %d, truncated", len(hostileTypes)+len(many), len(st.Types), st.TypesTruncated, outbox.MaxStatsTypes)
	}
	// (The types of one event each tie: which of them are kept is the
	// store's choice.)
	for i := range len(hostileTypes) - 1 {
		if got, want := st.Types[i].Type, hostileTypes[len(hostileTypes)-1-i]; got != want {
			t.Errorf("Stats.Types[%d] = %q, want %q", i, got, want)
		}
	}
}
