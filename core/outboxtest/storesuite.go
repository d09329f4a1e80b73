package outboxtest

import (
	"context"
	"maps"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// The suites write timestamps in a non-UTC location: a store must compare
// instants, never wall clocks, and return UTC.
var (
	zoneEast = time.FixedZone("X", 9*3600)
	zoneWest = time.FixedZone("Y", -7*3600)
	// t0 is the suites' "now", microsecond-aligned: stores keep at least
	// microsecond precision.
	t0 = time.Date(2024, 5, 6, 7, 8, 9, 123456000, zoneEast)
)

const (
	lease  = time.Minute
	ownerA = "owner-a"
	ownerB = "owner-b"
)

// RunStoreSuite checks that a Store (and its Purger) behaves as the outbox
// requires: round trips, claims and their exclusivity, leases and fencing,
// status changes, queries, statistics, purging, time zones, rows that
// cannot be decoded, and the ordered claim of Config.Ordered. newFixture is called once per subtest and must return
// a fresh, empty table; subtests run in parallel.
func RunStoreSuite(t *testing.T, newFixture func(t *testing.T) Fixture) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, f Fixture)
	}{
		{"InsertListRoundTrip", storeRoundTrip},
		{"InsertManyInBatches", storeInsertMany},
		{"InsertDuplicateIDFails", storeInsertDuplicate},
		{"InsertInTransaction", storeInsertInTx},
		{"InsertClaimedAndDelayed", storeInsertClaimed},
		{"ClaimOrderLimitAndDue", storeClaimOrder},
		{"ClaimSkipRecent", storeClaimSkipRecent},
		{"ClaimExclusiveUnderConcurrency", storeClaimConcurrent},
		{"LeaseExpiryAndFencing", storeLeaseExpiry},
		{"TakeOverKeepsInFlight", storeTakeOverKeepsInFlight},
		{"RenewKeepsTheClaim", storeRenew},
		{"RecoveryComesFirstAndTakesOwnExpiredClaims", storeRecovery},
		{"MarkDoneBatch", storeMarkDone},
		{"MarkRetry", storeMarkRetry},
		{"MarkDead", storeMarkDead},
		{"Release", storeRelease},
		{"Replay", storeReplay},
		{"OutcomesRecordTheSubscribersOwed", storeSubscribers},
		{"Delete", storeDelete},
		{"GetOneWithItsState", storeGet},
		{"InsertOutsideItsTransactionFails", storeInsertWrongTx},
		{"ListCountFiltersAndPaging", storeListCount},
		{"Stats", storeStats},
		{"Purge", storePurge},
		{"TenantScope", storeTenantScope},
		{"TenantComparedExactly", storeTenantExact},
		{"PurgeByTenant", storePurgeByTenant},
		{"ErrorTruncation", storeErrorTruncation},
		{"TimeZoneIndependence", storeTimeZones},
		{"CorruptHeadersDoNotFailClaim", storeCorruptHeaders},
		{"OrderedClaimTakesOnlyHeads", storeOrderedHeads},
		{"OrderedSequenceFollowsInserts", storeOrderedSequence},
		{"UnorderedClaimLeavesOrderedEvents", storeOrderedVersusUnordered},
		{"OrderedDeadSkipsAndReplay", storeOrderedDeadSkips},
		{"OrderedPendingKeys", storeOrderedPendingKeys},
		{"OrderedKeysTakeTurns", storeOrderedTurns},
		{"OrderedClaimExclusiveUnderConcurrency", storeOrderedConcurrent},
		{"OrderedClaimPastManyBlockedKeys", storeOrderedPastBlockedKeys},
		{"OrderedBlockedKeyTakenByDeadSkips", storeBlockedKeyDeadSkips},
		{"OrderedBlockedKeysCostNothing", storeBlockedKeysCostNothing},
		{"OrderedParkedKeySwept", storeParkedKeySwept},
		{"OrderedRunsInOrder", storeRunsInOrder},
		{"OrderedRunsStop", storeRunsStop},
		{"OrderedRunRestGivenBack", storeRunsGiveBack},
		{"OrderedRunRecovered", storeRunsRecovered},
		{"OrderedRunsExclusiveUnderConcurrency", storeRunsConcurrent},
		{"OrderedRunsDeadPolicies", storeRunsDeadPolicies},
		{"OrderedRunsContinue", storeRunsContinue},
		{"ControlPauses", storeControlPauses},
		{"ControlNodes", storeControlNodes},
		{"ControlAudit", storeControlAudit},
		{"ControlHostileText", storeControlHostileText},
		{"ForceDead", func(t *testing.T, f Fixture) { storeEndPending(t, f, outbox.StatusDead) }},
		{"Remove", storeRemove},
		{"SkipPending", func(t *testing.T, f Fixture) { storeEndPending(t, f, outbox.StatusDone) }},
		{"OrderedForceDeadBlocksKey", storeOrderedForceDeadBlocks},
		{"OrderedSkipOrRemoveFreesKey", storeOrderedOverrideFreesKey},
		{"ClaimTypes", storeClaimTypes},
		{"ClaimHostileTypes", storeClaimHostileTypes},
		{"ClaimTypesExclusiveUnderConcurrency", storeClaimTypesConcurrent},
		{"OrderedClaimTypes", storeOrderedClaimTypes},
		{"StatsTypes", storeStatsTypes},
		{"Horizon", storeHorizon},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newFixture(t))
		})
	}
	for _, end := range blockedEnds {
		t.Run("OrderedBlockedKeyFreedBy"+end, func(t *testing.T) {
			t.Parallel()
			storeBlockedKeyFreed(t, newFixture(t), end)
		})
	}
}

var evtTest = outbox.EventName("Test")

// event builds an event with a small JSON payload, occurred at t0.
func event(t testing.TB, opts ...outbox.EnvelopeOption) outbox.Envelope {
	t.Helper()
	return rawEvent(t, append([]outbox.EnvelopeOption{outbox.WithJSON([]byte(`{"k":1}`))}, opts...)...)
}

// rawEvent builds an event occurred at t0 whose payload opts must give.
func rawEvent(t testing.TB, opts ...outbox.EnvelopeOption) outbox.Envelope {
	t.Helper()
	return eventOf(t, evtTest, opts...)
}

// eventOf returns an event of type et that occurred at t0, with opts.
func eventOf(t testing.TB, et outbox.EventType, opts ...outbox.EnvelopeOption) outbox.Envelope {
	t.Helper()
	e, err := outbox.NewEnvelope(et, append([]outbox.EnvelopeOption{outbox.WithOccurredAt(t0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func events(t testing.TB, n int, opts ...outbox.EnvelopeOption) []outbox.Envelope {
	t.Helper()
	out := make([]outbox.Envelope, n)
	for i := range out {
		out[i] = event(t, opts...)
	}
	return out
}

func ids(evs []outbox.Envelope) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID()
	}
	return out
}

func recIDs(recs []outbox.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

func insert(t testing.TB, f Fixture, now time.Time, owner string, evs ...outbox.Envelope) {
	t.Helper()
	if err := insertInTx(context.Background(), f, now, owner, evs); err != nil {
		t.Fatalf("insert: %v", err)
	}
}

// insertInTx inserts events in a transaction of their own: the only way a
// Store inserts.
func insertInTx(ctx context.Context, f Fixture, now time.Time, owner string, evs []outbox.Envelope) error {
	return f.InTx(ctx, func(ctx context.Context) error {
		tx, err := f.TxContext.Current(ctx)
		if err != nil {
			return err
		}
		return f.Store.Insert(ctx, tx, now, owner, evs)
	})
}

func claim(t testing.TB, f Fixture, req outbox.ClaimRequest) []outbox.Record {
	t.Helper()
	if req.Lease == 0 {
		req.Lease = lease
	}
	recs, err := f.Store.Claim(context.Background(), req)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	for _, r := range recs {
		if r.Err != nil {
			t.Fatalf("claimed record %s has a decode error: %v", r.ID, r.Err)
		}
	}
	return recs
}

// listAll pages through every record matching q.
func listAll(t testing.TB, f Fixture, q outbox.Query) []outbox.Record {
	t.Helper()
	q.Limit = 7 // small pages exercise keyset paging
	var all []outbox.Record
	for {
		recs, err := f.Store.List(context.Background(), q)
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		all = append(all, recs...)
		if len(recs) < q.Limit {
			return all
		}
		q.AfterID = recs[len(recs)-1].ID
	}
}

// get returns the record with id, failing the test if there is none.
func get(t testing.TB, f Fixture, id string) outbox.Record {
	t.Helper()
	for _, r := range listAll(t, f, outbox.Query{}) {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("event %s not in the table", id)
	return outbox.Record{}
}

func countRows(t testing.TB, f Fixture, q outbox.Query) int64 {
	t.Helper()
	n, err := f.Store.Count(context.Background(), q)
	if err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

func wantTime(t testing.TB, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s = %v, want %v", what, got, want.UTC())
	}
	if !got.IsZero() && got.Location() != time.UTC {
		t.Errorf("%s is in %v, want UTC", what, got.Location())
	}
}

// wantState checks a record's delivery state.
func wantState(t testing.TB, r outbox.Record, status outbox.Status, attempts int, lockedBy string) {
	t.Helper()
	if r.Status != status || r.Attempts != attempts || r.LockedBy != lockedBy {
		t.Errorf("event %s: status %v attempts %d locked by %q, want %v %d %q", r.ID, r.Status, r.Attempts, r.LockedBy, status, attempts, lockedBy)
	}
	if (lockedBy == "") != r.LockedAt.IsZero() {
		t.Errorf("event %s: locked by %q but locked at %v", r.ID, r.LockedBy, r.LockedAt)
	}
}

func sameEnvelope(t testing.TB, got, want outbox.Envelope) {
	t.Helper()
	if got.ID() != want.ID() || got.Type() != want.Type() || got.AggregateType() != want.AggregateType() ||
		got.AggregateID() != want.AggregateID() || got.TenantID() != want.TenantID() || got.SchemaVersion() != want.SchemaVersion() {
		t.Errorf("event %s: got (%q %q %q %q v%d), want (%q %q %q %q v%d)", want.ID(),
			got.Type(), got.AggregateType(), got.AggregateID(), got.TenantID(), got.SchemaVersion(),
			want.Type(), want.AggregateType(), want.AggregateID(), want.TenantID(), want.SchemaVersion())
	}
	if got.PayloadKind() != want.PayloadKind() || got.PayloadString() != want.PayloadString() {
		t.Errorf("event %s: payload %v %q, want %v %q (byte-exact)", want.ID(), got.PayloadKind(), got.PayloadString(), want.PayloadKind(), want.PayloadString())
	}
	if !maps.Equal(got.Headers(), want.Headers()) {
		t.Errorf("event %s: headers %v, want %v", want.ID(), got.Headers(), want.Headers())
	}
	wantTime(t, "event "+want.ID()+" occurred at", got.OccurredAt(), want.OccurredAt())
}
