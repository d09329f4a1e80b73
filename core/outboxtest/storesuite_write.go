package outboxtest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// The store suite's cases of inserting and reading back: round trips, batches,
// duplicates, transactions, claimed inserts, time zones and undecodable rows.

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
