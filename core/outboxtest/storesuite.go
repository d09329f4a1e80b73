package outboxtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

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
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newFixture(t))
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
	e, err := outbox.NewEnvelope(evtTest, append([]outbox.EnvelopeOption{outbox.WithOccurredAt(t0)}, opts...)...)
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

func storeRoundTrip(t *testing.T, f Fixture) {
	all256 := make([]byte, 256)
	for i := range all256 {
		all256[i] = byte(i)
	}
	rawJSON := " {\n  \"z\": 1,\t\"a\" : [true, null, \"ü\\u00e9 \\\"q\\\" 日本\"],\"m\":{} }\n"
	later := t0.Add(time.Hour).In(zoneWest)
	evs := []outbox.Envelope{
		rawEvent(t, outbox.WithJSON([]byte(rawJSON)), outbox.WithAggregate(outbox.AggregateName("Order"), "order-42"),
			outbox.WithTenant("tenant-7"), outbox.WithSchemaVersion(outbox.MaxSchemaVersion), outbox.WithHeaders(map[string]string{"trace-id": "abc", "ünïcödé": "värde 日本", "empty": ""})),
		rawEvent(t, outbox.WithBytes(all256), outbox.WithOccurredAt(t0.Add(-time.Second).In(zoneWest)), outbox.WithSchemaVersion(7)),
		rawEvent(t, outbox.WithBytes(nil)),
		rawEvent(t, outbox.WithJSON([]byte(`"Grüße, 世界 🙂"`)), outbox.WithAvailableAt(later)),
		outbox.MustEnvelope(outbox.EventName("Bestellung.Geändert/注文"), outbox.WithJSONValue(map[string]any{"n": 1}),
			outbox.WithID("custom-id-0001"), outbox.WithOccurredAt(t0)),
	}
	insert(t, f, t0, "", evs...)
	recs := listAll(t, f, outbox.Query{})
	if len(recs) != len(evs) {
		t.Fatalf("listed %d records, want %d", len(recs), len(evs))
	}
	if !slices.IsSorted(recIDs(recs)) {
		t.Errorf("List is not ordered by id: %v", recIDs(recs))
	}
	for _, want := range evs {
		r := get(t, f, want.ID())
		if r.Err != nil {
			t.Fatalf("event %s: %v", want.ID(), r.Err)
		}
		sameEnvelope(t, r.Envelope, want)
		wantState(t, r, outbox.StatusNew, 0, "")
		wantTime(t, "created at", r.CreatedAt, t0)
		due := t0
		if want.Delayed() {
			due = later
		}
		wantTime(t, "available at", r.AvailableAt, due)
		wantTime(t, "done at", r.DoneAt, time.Time{})
		if r.LastError != "" {
			t.Errorf("last error %q, want none", r.LastError)
		}
	}
	if r := get(t, f, evs[1].ID()); r.Envelope.PayloadKind() == outbox.PayloadBytes && len(r.Envelope.Payload()) != 256 {
		t.Errorf("binary payload has %d bytes, want 256", len(r.Envelope.Payload()))
	}
}

func storeInsertMany(t *testing.T, f Fixture) {
	evs := events(t, 1201)
	insert(t, f, t0, ownerA, evs...)
	if n := countRows(t, f, outbox.Query{}); n != 1201 {
		t.Fatalf("count = %d, want 1201", n)
	}
	n, err := f.Store.MarkDone(context.Background(), ownerA, ids(evs), t0)
	if err != nil || n != 1201 {
		t.Fatalf("MarkDone of 1201 ids = %d, %v; want 1201", n, err)
	}
	if err := insertInTx(context.Background(), f, t0, "", nil); err != nil {
		t.Fatalf("insert of no events: %v", err)
	}
}

// storeInsertDuplicate: an id written twice — stored already, or twice in
// one batch, in a small batch, a large one (inserted in a savepoint on
// PostgreSQL, copied on pgx) or one of several statements — fails with
// ErrDuplicateEvent, inserts none of the batch's events, and leaves the
// caller's transaction usable (on PostgreSQL a failed statement would abort
// it): the same transaction then inserts and commits other events.
func storeInsertDuplicate(t *testing.T, f Fixture) {
	ctx := context.Background()
	stored := event(t)
	insert(t, f, t0, "", stored)
	// with inserts the stored event at i of n new ones.
	with := func(n, i int) []outbox.Envelope {
		batch := events(t, n)
		return append(batch[:i:i], append([]outbox.Envelope{stored}, batch[i:]...)...)
	}
	twice := event(t)
	var after outbox.Envelope
	batches := [][]outbox.Envelope{
		{event(t), stored, event(t)},
		{twice, event(t), twice},
		with(40, 20),     // past the savepoint threshold, below the bulk-copy one
		with(130, 70),    // past the bulk-copy threshold
		with(1100, 1050), // three statements of 500 rows at most: the first two are taken back
	}
	for _, batch := range batches {
		after = event(t)
		err := f.InTx(ctx, func(ctx context.Context) error {
			tx, err := f.TxContext.Current(ctx)
			if err != nil {
				return err
			}
			err = f.Store.Insert(ctx, tx, t0, ownerA, batch)
			if !errors.Is(err, outbox.ErrDuplicateEvent) {
				t.Errorf("insert of a batch of %d with a duplicate id = %v, want ErrDuplicateEvent", len(batch), err)
			}
			return f.Store.Insert(ctx, tx, t0, "", []outbox.Envelope{after}) // the transaction goes on
		})
		if err != nil {
			t.Fatalf("the transaction did not survive the duplicate: %v", err)
		}
		if r := get(t, f, after.ID()); r.Status != outbox.StatusNew {
			t.Fatalf("the event written after the duplicate: %+v", r)
		}
	}
	if n, want := countRows(t, f, outbox.Query{}), int64(1+len(batches)); n != want {
		t.Fatalf("count = %d, want %d: the stored event and one written after each duplicate", n, want)
	}
	if r := get(t, f, stored.ID()); r.LockedBy != "" {
		t.Fatalf("the stored event was changed by the duplicate insert: %+v", r)
	}
}

func storeInsertInTx(t *testing.T, f Fixture) {
	ctx := context.Background()
	boom := errors.New("boom")
	write := func(e outbox.Envelope, result error) error {
		return f.InTx(ctx, func(ctx context.Context) error {
			tx, err := f.TxContext.Current(ctx)
			if err != nil {
				return err
			}
			if err := f.Store.Insert(ctx, tx, t0, "", []outbox.Envelope{e}); err != nil {
				return err
			}
			return result
		})
	}
	rolledBack, committed := event(t), event(t)
	if err := write(rolledBack, boom); !errors.Is(err, boom) {
		t.Fatalf("InTx = %v, want %v", err, boom)
	}
	if err := write(committed, nil); err != nil {
		t.Fatal(err)
	}
	if got := recIDs(listAll(t, f, outbox.Query{})); !slices.Equal(got, []string{committed.ID()}) {
		t.Fatalf("rows %v, want only the committed %s", got, committed.ID())
	}
}

func storeInsertClaimed(t *testing.T, f Fixture) {
	due := event(t)
	future := event(t, outbox.WithAvailableAt(t0.Add(time.Minute)))
	past := event(t, outbox.WithAvailableAt(t0.Add(-time.Minute)))
	insert(t, f, t0, ownerA, due, future, past)
	r := get(t, f, due.ID())
	wantState(t, r, outbox.StatusNew, 0, ownerA)
	wantTime(t, "locked at", r.LockedAt, t0)
	r = get(t, f, future.ID())
	wantState(t, r, outbox.StatusNew, 0, "")
	wantTime(t, "delayed available at", r.AvailableAt, t0.Add(time.Minute))
	r = get(t, f, past.ID())
	wantState(t, r, outbox.StatusNew, 0, "")
	wantTime(t, "past available at is raised to now", r.AvailableAt, t0)

	plain := event(t)
	insert(t, f, t0, "", plain)
	wantState(t, get(t, f, plain.ID()), outbox.StatusNew, 0, "")

	// Claimed at insert: another owner cannot take it within the lease.
	got := recIDs(claim(t, f, outbox.ClaimRequest{Owner: ownerB, Now: t0.Add(time.Second), Limit: 10}))
	slices.Sort(got)
	want := []string{past.ID(), plain.ID()}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("B claimed %v, want the unclaimed due rows %v", got, want)
	}
}

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
	const rows, workers, batch = 2000, 8, 50
	insert(t, f, t0, "", events(t, rows)...)
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
			owner := fmt.Sprintf("worker-%d", w)
			for {
				recs, err := f.Store.Claim(context.Background(), outbox.ClaimRequest{Owner: owner, Now: t0, Lease: lease, Limit: batch})
				if err != nil {
					errs <- fmt.Errorf("%s: %w", owner, err)
					return
				}
				if len(recs) == 0 {
					return
				}
				mu.Lock()
				for _, r := range recs {
					claims[r.ID]++
					total++
					if r.LockedBy != owner {
						errs <- fmt.Errorf("record %s claimed by %s reports owner %q", r.ID, owner, r.LockedBy)
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
	wantState(t, r, outbox.StatusNew, 1, ownerB) // the attempt B counted
	if r.LastError != outbox.ErrClaimExpired.Error() {
		t.Errorf("stale update recorded error %q", r.LastError)
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

func storeReplay(t *testing.T, f Fixture) {
	ctx := context.Background()
	dead, pending := event(t), event(t)
	insert(t, f, t0, ownerA, dead, pending)
	if _, err := f.Store.MarkDead(ctx, outbox.Outcome{Owner: ownerA, ID: dead.ID(), At: t0, Error: "poison", CountAttempt: true}); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour).In(zoneWest)
	n, err := f.Store.Replay(ctx, []string{dead.ID(), pending.ID(), "no-such-id"}, now)
	if err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v; want 1 (only the DEAD row)", n, err)
	}
	r := get(t, f, dead.ID())
	wantState(t, r, outbox.StatusNew, 0, "")
	wantTime(t, "available at", r.AvailableAt, now)
	wantTime(t, "done at", r.DoneAt, time.Time{})
	if r.LastError != "poison" {
		t.Errorf("replay dropped the last error: %q", r.LastError)
	}
	wantState(t, get(t, f, pending.ID()), outbox.StatusNew, 0, ownerA)
	if n, err := f.Store.Replay(ctx, []string{dead.ID()}, now); err != nil || n != 0 {
		t.Fatalf("second Replay = %d, %v; want 0", n, err)
	}
	got := claim(t, f, outbox.ClaimRequest{Owner: ownerB, Now: now, Lease: 2 * time.Hour, Limit: 10})
	if len(got) != 1 || got[0].ID != dead.ID() {
		t.Fatalf("replayed row not claimable: %v", recIDs(got))
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

func storeDelete(t *testing.T, f Fixture) {
	ctx := context.Background()
	dead, pending := event(t), event(t)
	insert(t, f, t0, ownerA, dead, pending)
	if _, err := f.Store.MarkDead(ctx, outbox.Outcome{Owner: ownerA, ID: dead.ID(), At: t0, Error: "poison", CountAttempt: true}); err != nil {
		t.Fatal(err)
	}
	n, err := f.Store.Delete(ctx, []string{dead.ID(), pending.ID(), "no-such-id"})
	if err != nil || n != 1 {
		t.Fatalf("Delete = %d, %v; want 1 (only the DEAD row)", n, err)
	}
	if _, err := f.Store.Get(ctx, dead.ID()); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("deleted row still there: %v", err)
	}
	wantState(t, get(t, f, pending.ID()), outbox.StatusNew, 0, ownerA)
	if n, err := f.Store.Delete(ctx, []string{dead.ID()}); err != nil || n != 0 {
		t.Fatalf("second Delete = %d, %v; want 0", n, err)
	}
}

// seedStatuses inserts events of two aggregates and two types and moves
// them to every status; it returns the ids per status.
func seedStatuses(t *testing.T, f Fixture) map[outbox.Status][]string {
	byStatus := map[outbox.Status][]string{}
	for i := range 24 {
		agg := outbox.AggregateName([]string{"Order", "User"}[i%2])
		typ := outbox.EventName([]string{"Created", "Deleted", "Created"}[i%3])
		e, err := outbox.NewEnvelope(typ, outbox.WithJSON([]byte(`{}`)), outbox.WithAggregate(agg, fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		insert(t, f, t0.Add(time.Duration(i)*time.Second), ownerA, e)
		st := outbox.Status(i % 4)
		moveTo(t, f, e.ID(), st)
		byStatus[st] = append(byStatus[st], e.ID())
	}
	return byStatus
}

// moveTo moves id, inserted claimed by ownerA, to status st: it stays NEW,
// or goes DONE, RETRY (due at t0) or DEAD with one attempt.
func moveTo(t *testing.T, f Fixture, id string, st outbox.Status) {
	t.Helper()
	ctx := context.Background()
	var (
		ok  bool
		err error
	)
	switch st {
	case outbox.StatusNew:
		ok = true
	case outbox.StatusDone:
		var n int64
		n, err = f.Store.MarkDone(ctx, ownerA, []string{id}, t0)
		ok = n == 1
	case outbox.StatusRetry:
		ok, err = f.Store.MarkRetry(ctx, outbox.Outcome{Owner: ownerA, ID: id, At: t0, Error: "x", CountAttempt: true})
	case outbox.StatusDead:
		ok, err = f.Store.MarkDead(ctx, outbox.Outcome{Owner: ownerA, ID: id, At: t0, Error: "x", CountAttempt: true})
	}
	if err != nil || !ok {
		t.Fatalf("move to %v: %v, %v", st, ok, err)
	}
}

func storeListCount(t *testing.T, f Fixture) {
	byStatus := seedStatuses(t, f)
	for _, tc := range []struct {
		q    outbox.Query
		want int
	}{
		{outbox.Query{}, 24},
		{outbox.Query{Statuses: []outbox.Status{outbox.StatusDead}}, 6},
		{outbox.Query{Statuses: []outbox.Status{outbox.StatusNew, outbox.StatusRetry}}, 12},
		{outbox.Query{Statuses: []outbox.Status{outbox.StatusDone, outbox.StatusDone, outbox.StatusDead, outbox.StatusNew, outbox.StatusRetry}}, 24},
		{outbox.Query{Statuses: []outbox.Status{outbox.Status(9)}}, 0},
		{outbox.Query{AggregateType: "Order"}, 12},
		{outbox.Query{EventType: "Deleted"}, 8},
		{outbox.Query{AggregateType: "User", EventType: "Created"}, 8},
		{outbox.Query{AggregateType: "Order", Statuses: []outbox.Status{outbox.StatusNew}}, 6},
		{outbox.Query{AggregateType: "Nobody"}, 0},
	} {
		if n := countRows(t, f, tc.q); n != int64(tc.want) {
			t.Errorf("Count(%+v) = %d, want %d", tc.q, n, tc.want)
		}
		recs := listAll(t, f, tc.q)
		if len(recs) != tc.want {
			t.Errorf("List(%+v) paged = %d records, want %d", tc.q, len(recs), tc.want)
		}
		got := recIDs(recs)
		if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Errorf("List(%+v) pages are not in strict id order: %v", tc.q, got)
		}
		for _, r := range recs {
			if tc.q.AggregateType != "" && r.Envelope.AggregateType() != tc.q.AggregateType ||
				tc.q.EventType != "" && r.Envelope.Type() != tc.q.EventType ||
				len(tc.q.Statuses) > 0 && !slices.Contains(tc.q.Statuses, r.Status) {
				t.Errorf("List(%+v) returned %s (%s %s %v)", tc.q, r.ID, r.Envelope.AggregateType(), r.Envelope.Type(), r.Status)
			}
		}
	}
	dead := listAll(t, f, outbox.Query{Statuses: []outbox.Status{outbox.StatusDead}})
	want := slices.Clone(byStatus[outbox.StatusDead])
	slices.Sort(want)
	if got := recIDs(dead); !slices.Equal(got, want) {
		t.Errorf("dead events %v, want %v", got, want)
	}
	// Keyset: AfterID is exclusive; Count honours it too.
	all := recIDs(listAll(t, f, outbox.Query{}))
	recs, err := f.Store.List(context.Background(), outbox.Query{AfterID: all[9], Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got := recIDs(recs); !slices.Equal(got, all[10:15]) {
		t.Errorf("List after %s = %v, want %v", all[9], got, all[10:15])
	}
	if n := countRows(t, f, outbox.Query{AfterID: all[9], Limit: 5}); n != 14 {
		t.Errorf("Count after the 10th id = %d, want 14 (Limit ignored)", n)
	}
	// Default limit.
	insert(t, f, t0, "", events(t, 100)...)
	recs, err = f.Store.List(context.Background(), outbox.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 100 {
		t.Errorf("List without a limit returned %d records, want the default 100", len(recs))
	}
}

// tenants are the tenants of seedTenants: two named ones (one the
// other's prefix) and none.
var tenants = []string{"acme", "acme-eu", ""}

// seedTenants inserts 36 events, a third of each tenant of tenants, and
// moves them to every status (event i: tenant i%3, status i%4); it
// returns the ids per tenant and status, in id order.
func seedTenants(t *testing.T, f Fixture) map[string]map[outbox.Status][]string {
	out := map[string]map[outbox.Status][]string{}
	for i := range 36 {
		tenant := tenants[i%3]
		e := event(t, outbox.WithTenant(tenant))
		insert(t, f, t0.Add(time.Duration(i)*time.Second), ownerA, e)
		st := outbox.Status(i % 4)
		moveTo(t, f, e.ID(), st)
		if out[tenant] == nil {
			out[tenant] = map[outbox.Status][]string{}
		}
		out[tenant][st] = append(out[tenant][st], e.ID())
	}
	for _, byStatus := range out {
		for _, ids := range byStatus {
			slices.Sort(ids)
		}
	}
	return out
}

// storeTenantScope: Query.TenantID selects one tenant's events (exactly:
// not another tenant whose name it starts, not in another case) in List,
// with keyset paging within the tenant, and in Count; "" selects every
// tenant's and those without one.
func storeTenantScope(t *testing.T, f Fixture) {
	seeded := seedTenants(t, f)
	want := func(tenant string, statuses ...outbox.Status) []string {
		var ids []string
		for tn, byStatus := range seeded {
			if tenant != "" && tn != tenant {
				continue
			}
			for st, got := range byStatus {
				if len(statuses) == 0 || slices.Contains(statuses, st) {
					ids = append(ids, got...)
				}
			}
		}
		slices.Sort(ids)
		return ids
	}
	dead, pending := []outbox.Status{outbox.StatusDead}, []outbox.Status{outbox.StatusNew, outbox.StatusRetry}
	for _, tc := range []struct {
		q    outbox.Query
		want []string
	}{
		{outbox.Query{}, want("")},
		{outbox.Query{TenantID: "acme"}, want("acme")},
		{outbox.Query{TenantID: "acme-eu"}, want("acme-eu")},
		{outbox.Query{TenantID: "acme", Statuses: dead}, want("acme", dead...)},
		{outbox.Query{TenantID: "acme-eu", Statuses: pending}, want("acme-eu", pending...)},
		{outbox.Query{Statuses: dead}, want("", dead...)},
		{outbox.Query{TenantID: "ACME"}, nil},
		{outbox.Query{TenantID: "acm"}, nil},
		{outbox.Query{TenantID: "acme", EventType: "Other"}, nil},
		{outbox.Query{TenantID: "acme", IDs: append(want("acme-eu")[:2:2], want("acme")[:3]...)}, want("acme")[:3]},
	} {
		if n := countRows(t, f, tc.q); n != int64(len(tc.want)) {
			t.Errorf("Count(%+v) = %d, want %d", tc.q, n, len(tc.want))
		}
		if got := recIDs(listAll(t, f, tc.q)); !slices.Equal(got, tc.want) {
			t.Errorf("List(%+v) paged = %v, want %v", tc.q, got, tc.want)
		}
	}
	for _, r := range listAll(t, f, outbox.Query{TenantID: "acme-eu"}) {
		if r.Envelope.TenantID() != "acme-eu" {
			t.Errorf("List of tenant acme-eu returned %s of tenant %q", r.ID, r.Envelope.TenantID())
		}
	}
	// Keyset paging within a tenant and a status: each page starts after
	// the previous page's last id and holds only the tenant's events.
	acmeDone := want("acme", outbox.StatusDone)
	q := outbox.Query{TenantID: "acme", Statuses: []outbox.Status{outbox.StatusDone}, AfterID: acmeDone[0], Limit: 2}
	recs, err := f.Store.List(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if got := recIDs(recs); !slices.Equal(got, acmeDone[1:3]) {
		t.Errorf("List(%+v) = %v, want %v", q, got, acmeDone[1:3])
	}
	if n := countRows(t, f, q); n != int64(len(acmeDone)-1) {
		t.Errorf("Count(%+v) = %d, want %d (after the first id, Limit ignored)", q, n, len(acmeDone)-1)
	}
}

// storePurgeByTenant: PurgeRequest.TenantID deletes only that tenant's
// old terminal events; without it a purge deletes every tenant's.
func storePurgeByTenant(t *testing.T, f Fixture) {
	if f.Purger == nil {
		t.Skip("the fixture has no Purger")
	}
	ctx := context.Background()
	seeded := seedTenants(t, f) // DONE and DEAD at t0
	cutoff := t0.Add(time.Hour)
	n, err := f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDone, Before: cutoff, Limit: 2, TenantID: "acme"})
	if err != nil || n != 2 {
		t.Fatalf("Purge(DONE of acme, limit 2) = %d, %v; want 2", n, err)
	}
	n, err = f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDone, Before: cutoff, Limit: 100, TenantID: "acme"})
	if want := len(seeded["acme"][outbox.StatusDone]) - 2; err != nil || n != int64(want) {
		t.Fatalf("Purge(DONE of acme) = %d, %v; want %d", n, err, want)
	}
	if n, err := f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDead, Before: t0, Limit: 100, TenantID: "acme"}); err != nil || n != 0 {
		t.Fatalf("Purge(DEAD of acme before they ended) = %d, %v; want 0", n, err)
	}
	if n, err := f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDone, Before: cutoff, Limit: 100, TenantID: "ACME"}); err != nil || n != 0 {
		t.Fatalf("Purge(DONE of ACME) = %d, %v; want 0", n, err)
	}
	for _, tenant := range []string{"acme", "acme-eu"} {
		byStatus := seeded[tenant]
		wantDone := len(byStatus[outbox.StatusDone])
		if tenant == "acme" {
			wantDone = 0
		}
		if got := countRows(t, f, outbox.Query{TenantID: tenant, Statuses: []outbox.Status{outbox.StatusDone}}); got != int64(wantDone) {
			t.Errorf("DONE events of %q after the purge of acme: %d, want %d", tenant, got, wantDone)
		}
		if got := countRows(t, f, outbox.Query{TenantID: tenant, Statuses: []outbox.Status{outbox.StatusDead}}); got != int64(len(byStatus[outbox.StatusDead])) {
			t.Errorf("DEAD events of %q after a purge of DONE events: %d, want %d", tenant, got, len(byStatus[outbox.StatusDead]))
		}
	}
	rest := len(seeded["acme-eu"][outbox.StatusDone]) + len(seeded[""][outbox.StatusDone])
	n, err = f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDone, Before: cutoff, Limit: 100})
	if err != nil || n != int64(rest) {
		t.Fatalf("Purge(DONE of every tenant) = %d, %v; want %d", n, err, rest)
	}
}

func storeStats(t *testing.T, f Fixture) {
	ctx := context.Background()
	st, err := f.Store.Stats(ctx, t0)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, n := range st.ByStatus {
		total += n
	}
	if total != 0 || !st.OldestPending.IsZero() {
		t.Fatalf("stats of an empty table: %+v", st)
	}
	seedStatuses(t, f) // pending rows created at t0+0s (NEW) and t0+2s (RETRY) first
	// NEW rows are due at their creation, t0+0s, 4s, … 20s; RETRY rows at t0.
	for _, tc := range []struct {
		now time.Time
		due int64
	}{{t0.Add(-time.Second), 0}, {t0, 7}, {t0.Add(10 * time.Second).In(zoneEast), 9}, {t0.Add(time.Hour), 12}} {
		st, err = f.Store.Stats(ctx, tc.now)
		if err != nil {
			t.Fatal(err)
		}
		for s := outbox.StatusNew; s <= outbox.StatusDead; s++ {
			if st.ByStatus[s] != 6 {
				t.Errorf("ByStatus[%v] = %d, want 6", s, st.ByStatus[s])
			}
		}
		if st.Due != tc.due {
			t.Errorf("due at %v = %d, want %d", tc.now, st.Due, tc.due)
		}
		wantTime(t, "oldest pending", st.OldestPending, t0)
	}
}

func storePurge(t *testing.T, f Fixture) {
	if f.Purger == nil {
		t.Skip("the fixture has no Purger")
	}
	ctx := context.Background()
	cutoff := t0.Add(24 * time.Hour)
	old := t0
	oldDone, oldDead, recentDone, doneLate := event(t), event(t), event(t), event(t)
	oldNew, oldRetry, oldClaimed := event(t), event(t), event(t)
	insert(t, f, old, ownerA, oldDone, oldDead, doneLate, oldNew, oldRetry, oldClaimed)
	insert(t, f, cutoff.Add(-time.Minute), ownerA, recentDone)
	mustDone := func(id string, at time.Time) {
		if n, err := f.Store.MarkDone(ctx, ownerA, []string{id}, at); err != nil || n != 1 {
			t.Fatalf("MarkDone = %d, %v", n, err)
		}
	}
	mustDone(oldDone.ID(), old)
	mustDone(recentDone.ID(), cutoff) // done exactly at the cutoff: kept
	mustDone(doneLate.ID(), cutoff.Add(time.Hour))
	if ok, err := f.Store.MarkDead(ctx, outbox.Outcome{Owner: ownerA, ID: oldDead.ID(), At: old.Add(time.Second), Error: "x", CountAttempt: true}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, err := f.Store.MarkRetry(ctx, outbox.Outcome{Owner: ownerA, ID: oldRetry.ID(), At: old, Error: "x", CountAttempt: true}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if n, err := f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDone, Before: cutoff, Limit: 0}); err != nil || n != 0 {
		t.Fatalf("Purge with limit 0 = %d, %v; want 0", n, err)
	}
	if _, err := f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusNew, Before: cutoff, Limit: 10}); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("Purge of NEW events = %v, want ErrInvalidConfig", err)
	}
	n, err := f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDone, Before: cutoff.In(zoneWest), Limit: 1})
	if err != nil || n != 1 {
		t.Fatalf("Purge(DONE, limit 1) = %d, %v; want 1", n, err)
	}
	if n, err := f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDone, Before: cutoff, Limit: 10}); err != nil || n != 0 {
		t.Fatalf("second Purge of DONE = %d, %v; want 0 (the old DEAD row is not DONE)", n, err)
	}
	if got := get(t, f, oldDead.ID()); got.Status != outbox.StatusDead {
		t.Fatalf("the DEAD row: %+v, want it kept by a purge of DONE events", got)
	}
	n, err = f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDead, Before: cutoff, Limit: 10})
	if err != nil || n != 1 {
		t.Fatalf("Purge(DEAD) = %d, %v; want 1 (the old DEAD row)", n, err)
	}
	if n, err := f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDead, Before: cutoff, Limit: 10}); err != nil || n != 0 {
		t.Fatalf("second Purge of DEAD = %d, %v; want 0", n, err)
	}
	got := recIDs(listAll(t, f, outbox.Query{}))
	want := ids([]outbox.Envelope{recentDone, doneLate, oldNew, oldRetry, oldClaimed})
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("rows after purge %v, want %v", got, want)
	}
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

func storeTimeZones(t *testing.T, f Fixture) {
	// The same instant written and compared through three locations.
	instant := t0.Add(time.Minute)
	e := event(t, outbox.WithAvailableAt(instant.In(zoneWest)), outbox.WithOccurredAt(t0.In(zoneWest)))
	insert(t, f, t0.In(zoneEast), "", e)
	if got := claim(t, f, outbox.ClaimRequest{Owner: ownerA, Now: instant.Add(-time.Microsecond).In(zoneEast), Limit: 1}); len(got) != 0 {
		t.Fatal("claimed before the due instant (compared as wall clocks?)")
	}
	got := claim(t, f, outbox.ClaimRequest{Owner: ownerA, Now: instant.UTC(), Limit: 1})
	if len(got) != 1 {
		t.Fatal("not claimed at the due instant")
	}
	r := got[0]
	wantTime(t, "created at", r.CreatedAt, t0)
	wantTime(t, "available at", r.AvailableAt, instant)
	wantTime(t, "locked at", r.LockedAt, instant)
	wantTime(t, "occurred at", r.Envelope.OccurredAt(), t0)
	// A row created in the west 8 hours "later" on the wall clock is still
	// older than one created a second later in the east.
	west, east := event(t), event(t)
	insert(t, f, t0.In(zoneWest), "", west)
	insert(t, f, t0.Add(time.Second).In(zoneEast), "", east)
	st, err := f.Store.Stats(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	wantTime(t, "oldest pending", st.OldestPending, t0)
	recs := claim(t, f, outbox.ClaimRequest{Owner: ownerB, Now: t0.Add(time.Hour), Lease: 2 * time.Hour, Limit: 10})
	if got, want := recIDs(recs), []string{west.ID(), east.ID()}; !slices.Equal(got, want) {
		t.Fatalf("claim order %v, want %v (oldest instant first)", got, want)
	}
}

func storeCorruptHeaders(t *testing.T, f Fixture) {
	if f.Exec == nil {
		t.Skip("the fixture cannot run SQL on its table (Fixture.Exec is nil), so it cannot damage a row")
	}
	ctx := context.Background()
	good := event(t, outbox.WithHeader("h", "v"))
	bad := event(t, outbox.WithHeader("h", "v"))
	insert(t, f, t0, "", good, bad)
	// Ids are ULIDs (letters and digits): safe to write as a literal, which
	// keeps this statement free of dialect-specific placeholders.
	if err := f.Exec(ctx, "UPDATE "+f.Table+" SET headers = '{not json' WHERE event_id = '"+bad.ID()+"'"); err != nil {
		t.Fatalf("corrupt the row: %v", err)
	}
	recs, err := f.Store.Claim(ctx, outbox.ClaimRequest{Owner: ownerA, Now: t0, Lease: lease, Limit: 10})
	if err != nil {
		t.Fatalf("a corrupt row failed the whole claim: %v", err)
	}
	if len(recs) != 2 {
		t.Fatalf("claimed %d rows, want 2", len(recs))
	}
	for _, r := range recs {
		switch r.ID {
		case good.ID():
			if r.Err != nil {
				t.Errorf("good row: %v", r.Err)
			}
		case bad.ID():
			if r.Err == nil {
				t.Error("corrupt headers decoded without error")
			} else if !errors.Is(r.Err, outbox.ErrInvalidEnvelope) {
				t.Errorf("decode error %v does not wrap ErrInvalidEnvelope", r.Err)
			}
			if r.LockedBy != ownerA || r.Status != outbox.StatusNew {
				t.Errorf("corrupt row state: %v locked by %q", r.Status, r.LockedBy)
			}
		}
	}
	if _, err := f.Store.List(ctx, outbox.Query{}); err != nil {
		t.Errorf("a corrupt row failed List: %v", err)
	}
	if ok, err := f.Store.MarkDead(ctx, outbox.Outcome{Owner: ownerA, ID: bad.ID(), At: t0, Error: "decode"}); err != nil || !ok {
		t.Fatalf("MarkDead of the corrupt row = %v, %v", ok, err)
	}
}

func storeGet(t *testing.T, f Fixture) {
	ctx := context.Background()
	e := event(t, outbox.WithAggregate(outbox.AggregateName("Order"), "o-1"), outbox.WithHeader("h", "v"))
	insert(t, f, t0, ownerA, e)
	r, err := f.Store.Get(ctx, e.ID())
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if r.ID != e.ID() || r.Status != outbox.StatusNew || r.LockedBy != ownerA || r.Envelope.AggregateID() != "o-1" || r.Envelope.PayloadString() != e.PayloadString() {
		t.Fatalf("Get = %+v, want the event as inserted, claimed by %s", r, ownerA)
	}
	if h, _ := r.Envelope.Header("h"); h != "v" {
		t.Errorf("header h = %q, want v", h)
	}
	if _, err := f.Store.MarkDone(ctx, ownerA, []string{e.ID()}, t0); err != nil {
		t.Fatal(err)
	}
	if r, err := f.Store.Get(ctx, e.ID()); err != nil || r.Status != outbox.StatusDone || r.LockedBy != "" {
		t.Fatalf("Get after MarkDone = %+v, %v; want DONE and unclaimed", r, err)
	}
	if _, err := f.Store.Get(ctx, "no-such-id"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("Get of an unknown id = %v, want ErrNotFound", err)
	}
	// The id filter of List and Count.
	others := events(t, 3)
	insert(t, f, t0, "", others...)
	want := []string{others[0].ID(), others[2].ID()}
	q := outbox.Query{IDs: append(want, "no-such-id")}
	if got := recIDs(listAll(t, f, q)); !slices.Equal(got, want) {
		t.Errorf("List by ids = %v, want %v", got, want)
	}
	if n := countRows(t, f, q); n != 2 {
		t.Errorf("Count by ids = %d, want 2", n)
	}
	q.Statuses = []outbox.Status{outbox.StatusDone}
	if n := countRows(t, f, q); n != 0 {
		t.Errorf("Count by ids and DONE = %d, want 0", n)
	}
}

// storeInsertWrongTx checks that Insert refuses a transaction it cannot
// write in, rather than writing elsewhere.
func storeInsertWrongTx(t *testing.T, f Fixture) {
	err := f.Store.Insert(context.Background(), foreignTx{}, t0, "", []outbox.Envelope{event(t)})
	if !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("Insert with a foreign Tx = %v, want ErrInvalidConfig", err)
	}
	if n := countRows(t, f, outbox.Query{}); n != 0 {
		t.Fatalf("count = %d, want 0", n)
	}
}

// foreignTx is an outbox.Tx of no store.
type foreignTx struct{}

func (foreignTx) AfterCommit(func())   {}
func (foreignTx) AfterRollback(func()) {}
