package inboxtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/inbox"
	"github.com/go-outbox/outbox/core/outboxtest"
	"github.com/go-outbox/outbox/core/relay"
	"github.com/go-outbox/outbox/core/sqlstore"
)

// The suite's clock runs in a non-UTC zone: the inbox must store and
// compare instants.
var (
	zoneEast = time.FixedZone("X", 9*3600)
	zoneWest = time.FixedZone("Y", -7*3600)
	t0       = time.Date(2024, 5, 6, 7, 8, 9, 123456000, zoneEast)
)

// errConsumer is the error of a consumer function that fails on purpose.
var errConsumer = errors.New("inboxtest: the consumer failed")

// RunSuite checks the inbox on one database and transaction style: a
// redelivery is a duplicate and changes nothing, also within one
// transaction; a rolled-back transaction, a rolled-back savepoint, a
// failing or panicking consumer function leave no record, so a
// redelivery applies the event; concurrent deliveries of one id apply it
// once, the later ones waiting for the first; ids are compared byte for
// byte; purges delete what was processed before a cutoff, also through the
// outbox's PurgeScheduler; a missing table is reported as
// sqlstore.ErrNoTable; the consumer can write outbox events in the same
// transaction; with VerifyKeys, a message forged with an upcoming event's
// id is refused and records nothing, so the real event is applied.
//
// newFixture is called once per subtest and must return a fresh table
// (the inbox table is named after it, with the suffix "_inbox"); Store
// must be a *sqlstore.Store, InsertBusiness must accept names of up to 64
// characters, and Exec is used to drop the inbox table at cleanup.
// Subtests run in parallel.
func RunSuite(t *testing.T, newFixture func(t *testing.T) outboxtest.AdapterFixture) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, f outboxtest.AdapterFixture)
	}{
		{"RedeliveryIsDuplicate", redelivery},
		{"DuplicateInOneTransaction", sameTransaction},
		{"RollbackLeavesNoRecord", rollback},
		{"FailedConsumerLeavesNoRecord", failedConsumer},
		{"PanickingConsumerLeavesNoRecord", panickingConsumer},
		{"SavepointRollbackLeavesNoRecord", savepoint},
		{"NoTransaction", noTransaction},
		{"IDsComparedByteForByte", byteForByte},
		{"ConcurrentDeliveriesApplyOnce", concurrent},
		{"SecondDeliveryWaitsForTheFirst", waits},
		{"Purge", purge},
		{"MigrateAndSchema", migrate},
		{"MissingTable", missingTable},
		{"OutboxWriteInTheSameTransaction", withOutbox},
		{"ForgedMessageSuppressesNothing", forged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newFixture(t))
		})
	}
}

// env is one subtest's fixture with an inbox next to its store's table.
type env struct {
	f     outboxtest.AdapterFixture
	store *sqlstore.Store
	in    *inbox.Inbox
	clock *outboxtest.Clock
}

func newEnv(t *testing.T, f outboxtest.AdapterFixture) *env {
	t.Helper()
	store, ok := f.Store.(*sqlstore.Store)
	if !ok {
		t.Fatalf("inboxtest: the fixture's Store is a %T, want a *sqlstore.Store", f.Store)
	}
	e := &env{f: f, store: store, clock: outboxtest.NewClock(t0)}
	e.in = e.newInbox(t, f.TxContext, f.Table+"_inbox", true)
	return e
}

// newInbox returns an inbox on table, migrated when migrate is set, whose
// transactions tc finds; the table is dropped at cleanup.
func (e *env) newInbox(t *testing.T, tc outbox.TxContext, table string, migrate bool) *inbox.Inbox {
	t.Helper()
	in, err := inbox.New(inbox.Config{Store: e.store, TxContext: tc, Table: table, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	if e.f.Exec != nil {
		t.Cleanup(func() { _ = e.f.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })
	}
	if migrate {
		if err := in.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return in
}

// deliver processes event id in a transaction of its own, as a consumer of
// a broker does: the consumer function inserts the business row name.
func (e *env) deliver(t testing.TB, id, name string) (duplicate bool) {
	t.Helper()
	calls := 0
	err := e.f.InTx(context.Background(), func(ctx context.Context) error {
		var err error
		duplicate, err = e.in.Process(ctx, id, func(ctx context.Context) error {
			calls++
			return e.f.InsertBusiness(ctx, name)
		})
		return err
	})
	if err != nil {
		t.Fatalf("deliver %q: %v", id, err)
	}
	if want := map[bool]int{false: 1, true: 0}[duplicate]; calls != want {
		t.Fatalf("deliver %q: duplicate %v, but the consumer ran %d times", id, duplicate, calls)
	}
	return duplicate
}

// applied delivers id and fails t unless the delivery applied it.
func (e *env) applied(t testing.TB, id, name string) {
	t.Helper()
	if e.deliver(t, id, name) {
		t.Fatalf("deliver %q: a duplicate, want it applied", id)
	}
}

// duplicate delivers id and fails t unless the delivery was a duplicate.
func (e *env) duplicate(t testing.TB, id, name string) {
	t.Helper()
	if !e.deliver(t, id, name) {
		t.Fatalf("deliver %q: applied again, want a duplicate", id)
	}
}

// wantRows fails t unless the committed business rows are want, in any order.
func (e *env) wantRows(t testing.TB, want ...string) {
	t.Helper()
	got := e.f.BusinessRows(t)
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("business rows %q, want %q", got, want)
	}
}

func redelivery(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	e.applied(t, "evt-1", "first")
	e.duplicate(t, "evt-1", "again")
	e.duplicate(t, "evt-1", "and again")
	e.applied(t, "evt-2", "second")
	e.wantRows(t, "first", "second")
}

func sameTransaction(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	var dups []bool
	err := f.InTx(context.Background(), func(ctx context.Context) error {
		for _, name := range []string{"one", "two"} {
			dup, err := e.in.Process(ctx, "evt-1", func(ctx context.Context) error { return f.InsertBusiness(ctx, name) })
			if err != nil {
				return err
			}
			dups = append(dups, dup)
		}
		return nil
	})
	if err != nil || !slices.Equal(dups, []bool{false, true}) {
		t.Fatalf("two deliveries in one transaction: duplicates %v, %v; want [false true]", dups, err)
	}
	e.wantRows(t, "one")
	e.duplicate(t, "evt-1", "three")
}

func rollback(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	errLater := errors.New("a later step of the transaction failed")
	err := f.InTx(context.Background(), func(ctx context.Context) error {
		if _, err := e.in.Process(ctx, "evt-1", func(ctx context.Context) error { return f.InsertBusiness(ctx, "rolled back") }); err != nil {
			return err
		}
		return errLater
	})
	if !errors.Is(err, errLater) {
		t.Fatalf("InTx = %v, want the transaction's own error", err)
	}
	e.wantRows(t)
	e.applied(t, "evt-1", "redelivered")
	e.wantRows(t, "redelivered")
}

func failedConsumer(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	// The caller ignores the consumer's error and commits: the id must
	// not stay recorded without the consumer's effect.
	var dup bool
	var perr error
	err := f.InTx(context.Background(), func(ctx context.Context) error {
		dup, perr = e.in.Process(ctx, "evt-1", func(context.Context) error { return errConsumer })
		return nil
	})
	if err != nil || dup || !errors.Is(perr, errConsumer) {
		t.Fatalf("Process with a failing consumer = %v, %v (commit: %v); want the consumer's error", dup, perr, err)
	}
	e.applied(t, "evt-1", "redelivered")
	e.duplicate(t, "evt-1", "again")
	e.wantRows(t, "redelivered")
}

func panickingConsumer(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	var recovered any
	err := f.InTx(context.Background(), func(ctx context.Context) error {
		func() {
			defer func() { recovered = recover() }()
			_, _ = e.in.Process(ctx, "evt-1", func(context.Context) error { panic("consumer bug") })
		}()
		return nil // the caller recovers and commits
	})
	if err != nil || recovered != "consumer bug" {
		t.Fatalf("a panicking consumer: recovered %v, commit %v; want the panic passed on", recovered, err)
	}
	e.applied(t, "evt-1", "redelivered")
	// A panic the caller does not recover rolls the transaction back.
	func() {
		defer func() { recovered = recover() }()
		_ = f.InTx(context.Background(), func(ctx context.Context) error {
			_, err := e.in.Process(ctx, "evt-2", func(context.Context) error { panic("consumer bug") })
			return err
		})
	}()
	if recovered != "consumer bug" {
		t.Fatalf("InTx with a panicking consumer recovered %v", recovered)
	}
	e.applied(t, "evt-2", "second")
	e.wantRows(t, "redelivered", "second")
}

func savepoint(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	errInner := errors.New("the nested transaction failed")
	ctx := context.Background()
	// The nested transaction that recorded the id rolls back to its
	// savepoint; the outer one commits.
	err := f.InTx(ctx, func(ctx context.Context) error {
		if err := f.InsertBusiness(ctx, "outer"); err != nil {
			return err
		}
		err := f.InTx(ctx, func(ctx context.Context) error {
			if _, err := e.in.Process(ctx, "evt-1", func(ctx context.Context) error { return f.InsertBusiness(ctx, "inner") }); err != nil {
				return err
			}
			return errInner
		})
		if !errors.Is(err, errInner) {
			return fmt.Errorf("nested InTx = %w, want its own error", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.wantRows(t, "outer")
	e.applied(t, "evt-1", "redelivered")
	// The nested transaction commits, the outer one rolls back.
	errOuter := errors.New("the outer transaction failed")
	err = f.InTx(ctx, func(ctx context.Context) error {
		err := f.InTx(ctx, func(ctx context.Context) error {
			_, err := e.in.Process(ctx, "evt-2", func(ctx context.Context) error { return f.InsertBusiness(ctx, "inner") })
			return err
		})
		if err != nil {
			return err
		}
		return errOuter
	})
	if !errors.Is(err, errOuter) {
		t.Fatalf("InTx = %v, want the outer transaction's error", err)
	}
	e.applied(t, "evt-2", "second")
	e.wantRows(t, "outer", "redelivered", "second")
}

func noTransaction(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	ran := false
	dup, err := e.in.Process(context.Background(), "evt-1", func(context.Context) error { ran = true; return nil })
	if dup || ran || !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("Process without a transaction = %v, %v (consumer ran: %v); want ErrNoTransaction", dup, err, ran)
	}
	e.applied(t, "evt-1", "in a transaction")
}

func byteForByte(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	long := strings.Repeat("é", 127) + "x" // 255 bytes
	ids := []string{"ab", "Ab", "AB", "ab ", " ab", "ab\t", "äb", "a\u0308b", long}
	for i, id := range ids {
		e.applied(t, id, fmt.Sprintf("row-%d", i))
	}
	for i, id := range ids {
		e.duplicate(t, id, fmt.Sprintf("again-%d", i))
	}
	for _, id := range []string{"", long + "y", "bad\xff"} {
		err := f.InTx(context.Background(), func(ctx context.Context) error {
			_, err := e.in.Process(ctx, id, func(context.Context) error { return errors.New("must not run") })
			return err
		})
		if !errors.Is(err, inbox.ErrInvalidID) {
			t.Errorf("Process(%q) = %v, want ErrInvalidID", id, err)
		}
	}
	if got := len(f.BusinessRows(t)); got != len(ids) {
		t.Fatalf("%d business rows, want %d", got, len(ids))
	}
}

// concurrent delivers each of several ids from several goroutines at once,
// each delivery in its own transaction and retried when it fails (a
// deadlock, a busy database, or a consumer that fails on purpose the first
// time it runs for an id): each id is applied exactly once.
func concurrent(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	const ids, copies, maxAttempts = 8, 4, 50
	var (
		mu       sync.Mutex
		appliedN = map[string]int{}
		failed   = map[string]bool{}
		errs     []error
		start    = make(chan struct{})
		wg       sync.WaitGroup
	)
	for i := range ids {
		id := fmt.Sprintf("evt-%02d", i)
		for c := range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for attempt := 1; ; attempt++ {
					var dup bool
					err := f.InTx(context.Background(), func(ctx context.Context) error {
						var err error
						dup, err = e.in.Process(ctx, id, func(ctx context.Context) error {
							mu.Lock()
							first := !failed[id]
							failed[id] = true
							mu.Unlock()
							if first { // the first run of every id fails: a rollback while others wait
								return errConsumer
							}
							return f.InsertBusiness(ctx, id)
						})
						return err
					})
					if err == nil {
						if !dup {
							mu.Lock()
							appliedN[id]++
							mu.Unlock()
						}
						return
					}
					if attempt == maxAttempts {
						mu.Lock()
						errs = append(errs, fmt.Errorf("%s copy %d: %d attempts, the last: %w", id, c, attempt, err))
						mu.Unlock()
						return
					}
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range ids {
		id := fmt.Sprintf("evt-%02d", i)
		want = append(want, id)
		if appliedN[id] != 1 {
			t.Errorf("%s applied %d times, want once", id, appliedN[id])
		}
	}
	e.wantRows(t, want...)
}

// waits holds the first delivery of an id inside its consumer function
// while a second delivery of the same id starts: the second must wait for
// the first one's transaction and then be a duplicate (it committed) or
// apply the event (it rolled back).
func waits(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	arr := outboxtest.NewArrivals(f.TxContext)
	in := e.newInbox(t, arr, e.in.Table(), false) // the same table
	// SQLite runs one write transaction at a time: the second delivery
	// cannot begin before the first ends, so the first does not wait for it.
	serialized := e.store.Dialect() == sqlstore.SQLite
	for _, firstCommits := range []bool{true, false} {
		id := fmt.Sprintf("evt-commit-%v", firstCommits)
		ctx := outboxtest.WithArrival(context.Background(), id)
		inside := make(chan struct{})
		firstDone := make(chan error, 1)
		go func() {
			firstDone <- f.InTx(ctx, func(ctx context.Context) error {
				_, err := in.Process(ctx, id, func(ctx context.Context) error {
					if err := f.InsertBusiness(ctx, "first-"+id); err != nil {
						return err
					}
					close(inside)
					if !serialized {
						// Until the second delivery is about to record the id
						// (bounded, so that a pool too small for both
						// transactions cannot hang the test).
						wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
						arr.Wait(wctx, id, 2)
						cancel()
					}
					if !firstCommits {
						return errConsumer
					}
					return nil
				})
				return err
			})
		}()
		<-inside
		var dup bool
		var calls int
		err := f.InTx(ctx, func(ctx context.Context) error {
			var err error
			dup, err = in.Process(ctx, id, func(ctx context.Context) error {
				calls++
				return f.InsertBusiness(ctx, "second-"+id)
			})
			return err
		})
		firstErr := <-firstDone
		if firstCommits && firstErr != nil || !firstCommits && !errors.Is(firstErr, errConsumer) {
			t.Fatalf("first delivery (commits: %v) = %v", firstCommits, firstErr)
		}
		if err != nil || dup != firstCommits || calls != map[bool]int{true: 0, false: 1}[firstCommits] {
			t.Fatalf("second delivery after the first one (commits: %v): duplicate %v, consumer ran %d times, %v", firstCommits, dup, calls, err)
		}
	}
	e.wantRows(t, "first-evt-commit-true", "second-evt-commit-false")
}

func purge(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	ctx := context.Background()
	e.applied(t, "a", "a1")
	e.applied(t, "b", "b1")
	e.clock.Advance(time.Hour)
	e.applied(t, "c", "c1")
	cutoff := t0.Add(30 * time.Minute).In(zoneWest)
	for _, tc := range []struct {
		limit int
		want  int64
	}{{0, 0}, {1, 1}, {10, 1}, {10, 0}} {
		if n, err := e.in.Purge(ctx, cutoff, tc.limit); n != tc.want || err != nil {
			t.Fatalf("Purge(limit %d) = %d, %v; want %d", tc.limit, n, err, tc.want)
		}
	}
	if n, err := e.in.Purger().Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDead, Before: t0.Add(time.Hour * 24), Limit: 10}); n != 0 || err != nil {
		t.Fatalf("Purger().Purge(DEAD) = %d, %v; want 0: an inbox has no dead events", n, err)
	}
	e.applied(t, "a", "a2") // purged: applied again
	e.applied(t, "b", "b2")
	e.duplicate(t, "c", "c2") // kept
	// The outbox's scheduler, one retention later.
	e.clock.Advance(2 * time.Hour)
	sched, err := outbox.NewPurgeScheduler(outbox.PurgeConfig{Purger: e.in.Purger(), Retention: 90 * time.Minute, BatchSize: 2, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	// c at t0+1h is older than the cutoff t0+1h30; a and b at t0+1h too.
	if n, err := sched.PurgeOnce(ctx); n != 3 || err != nil {
		t.Fatalf("PurgeOnce = %d, %v; want 3", n, err)
	}
	e.applied(t, "c", "c3")
	e.wantRows(t, "a1", "b1", "c1", "a2", "b2", "c3")
}

func migrate(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	e.applied(t, "evt-1", "kept")
	if err := e.in.Migrate(context.Background()); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	e.duplicate(t, "evt-1", "again")
	schema := e.in.Schema()
	if len(schema) == 0 || !strings.Contains(schema[0], e.in.Table()) {
		t.Fatalf("Schema does not create %s: %q", e.in.Table(), schema)
	}
}

func missingTable(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	in := e.newInbox(t, f.TxContext, f.Table+"_absent", false)
	ran := false
	err := f.InTx(context.Background(), func(ctx context.Context) error {
		_, err := in.Process(ctx, "evt-1", func(context.Context) error { ran = true; return nil })
		return err
	})
	if ran || !errors.Is(err, sqlstore.ErrNoTable) || !strings.Contains(err.Error(), in.Table()) {
		t.Fatalf("Process on a missing table = %v (consumer ran: %v); want ErrNoTable naming the table", err, ran)
	}
	if _, err := in.Purge(context.Background(), t0, 10); !errors.Is(err, sqlstore.ErrNoTable) {
		t.Fatalf("Purge on a missing table = %v, want ErrNoTable", err)
	}
}

// withOutbox is a consumer that applies an event and writes an event of its
// own, in one transaction: the inbox record, the business row and the
// outbox row commit together, and a redelivery writes nothing.
func withOutbox(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	client, err := outbox.New(outbox.Config{Store: f.Store, TxContext: f.TxContext, Mode: outbox.ModeWriterOnly})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	var written []string
	consume := func() (bool, error) {
		var dup bool
		err := f.InTx(context.Background(), func(ctx context.Context) error {
			var err error
			dup, err = e.in.Process(ctx, "order-placed-1", func(ctx context.Context) error {
				if err := f.InsertBusiness(ctx, "shipment-1"); err != nil {
					return err
				}
				ev, err := outbox.NewEnvelope(outbox.EventName("ShipmentRequested"), outbox.WithJSON([]byte(`{"order":1}`)))
				if err != nil {
					return err
				}
				written, err = client.Write(ctx, ev)
				return err
			})
			return err
		})
		return dup, err
	}
	if dup, err := consume(); dup || err != nil || len(written) != 1 {
		t.Fatalf("first delivery = %v, %v, wrote %v", dup, err, written)
	}
	if _, err := f.Store.Get(context.Background(), written[0]); err != nil {
		t.Fatalf("the consumer's own event is not in the outbox: %v", err)
	}
	if dup, err := consume(); !dup || err != nil {
		t.Fatalf("redelivery = %v, %v; want a duplicate", dup, err)
	}
	if n, err := f.Store.Count(context.Background(), outbox.Query{}); n != 1 || err != nil {
		t.Fatalf("%d outbox rows (%v), want 1", n, err)
	}
	e.wantRows(t, "shipment-1")
}

// forged: ids are predictable, so a message published with an upcoming
// event's id ahead of it would make the real event a duplicate. With
// VerifyKeys, forged messages (unsigned, signed with another key, a
// signature taken from another event, the real signature over another
// payload) are refused with relay.ErrSignature and record nothing; the
// real message is applied, and its redelivery is a duplicate.
func forged(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	key := []byte("0123456789abcdef0123456789abcdef")
	next := []byte("fedcba9876543210fedcba9876543210")
	in, err := inbox.New(inbox.Config{Store: e.store, TxContext: f.TxContext, Table: e.in.Table(), Clock: e.clock, VerifyKeys: [][]byte{next, key}})
	if err != nil {
		t.Fatal(err)
	}
	message := func(ev outbox.Envelope, k []byte) relay.Message {
		m, err := relay.Kafka.Message(ev, nil, k)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	real := outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithTenant("acme"), outbox.WithJSON([]byte(`{"total":12}`)))
	other := outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithJSON([]byte(`{"total":1}`)))
	signed := message(real, key)
	stolen := message(real, nil)
	stolen.Headers[relay.HeaderSignature] = message(other, key).Signature
	changed := message(real, key)
	changed.Payload = []byte(`{"total":0}`)
	attacks := map[string]relay.Message{
		"unsigned": message(real, nil), "another key": message(real, []byte("an attacker's own key of 32 bytes")),
		"a signature of another event": stolen, "another payload": changed,
	}
	deliver := func(m relay.Message, name string) (bool, error) {
		var dup bool
		err := f.InTx(context.Background(), func(ctx context.Context) error {
			var err error
			dup, err = in.ProcessMessage(ctx, m, func(ctx context.Context) error { return f.InsertBusiness(ctx, name) })
			return err
		})
		return dup, err
	}
	for name, m := range attacks {
		if dup, err := deliver(m, "forged: "+name); dup || !errors.Is(err, relay.ErrSignature) {
			t.Errorf("%s, before the real message: duplicate %v, %v; want relay.ErrSignature", name, dup, err)
		}
	}
	if dup, err := deliver(signed, "real"); dup || err != nil {
		t.Fatalf("the real message after the forged ones: duplicate %v, %v; want it applied", dup, err)
	}
	if dup, err := deliver(signed, "redelivered"); !dup || err != nil {
		t.Errorf("the real message again: duplicate %v, %v; want a duplicate", dup, err)
	}
	for name, m := range attacks {
		if dup, err := deliver(m, "forged: "+name); dup || !errors.Is(err, relay.ErrSignature) {
			t.Errorf("%s, after the real message: duplicate %v, %v; want relay.ErrSignature", name, dup, err)
		}
	}
	e.wantRows(t, "real")
	t.Logf("%d forged messages refused before and after the real one", len(attacks))
}
