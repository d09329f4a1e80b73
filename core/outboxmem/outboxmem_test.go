package outboxmem_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
	"github.com/go-outbox/outbox/core/outboxtest"
)

func newFixture(t *testing.T) outboxtest.Fixture {
	s := outboxmem.New()
	t.Cleanup(func() {
		if !s.IndexesMatch() {
			t.Error("the store's claim indexes do not match its rows")
		}
	})
	// No SQL table: the suite's corrupt-row test skips, saying why.
	return outboxtest.Fixture{Store: s, Purger: s, TxContext: s, InTx: s.InTx}
}

func TestStoreSuite(t *testing.T)     { outboxtest.RunStoreSuite(t, newFixture) }
func TestTxContextSuite(t *testing.T) { outboxtest.RunTxContextSuite(t, newFixture) }
func TestEndToEndSuite(t *testing.T)  { outboxtest.RunEndToEndSuite(t, newFixture) }

var (
	evt = outbox.EventName("E")
	t0  = time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 3600))
)

func event(t *testing.T, opts ...outbox.EnvelopeOption) outbox.Envelope {
	t.Helper()
	e, err := outbox.NewEnvelope(evt, append([]outbox.EnvelopeOption{outbox.WithJSON([]byte(`{}`))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// insert writes events in a transaction of their own.
func insert(s *outboxmem.Store, now time.Time, owner string, events ...outbox.Envelope) error {
	return s.InTx(context.Background(), func(ctx context.Context) error {
		tx, err := s.Current(ctx)
		if err != nil {
			return err
		}
		return s.Insert(ctx, tx, now, owner, events)
	})
}

func count(t *testing.T, s *outboxmem.Store) int64 {
	t.Helper()
	n, err := s.Count(context.Background(), outbox.Query{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestTimesAreUTCMicroseconds(t *testing.T) {
	s := outboxmem.New()
	e := event(t, outbox.WithOccurredAt(t0))
	if err := insert(s, t0, "owner", e); err != nil {
		t.Fatal(err)
	}
	r, err := s.Get(context.Background(), e.ID())
	if err != nil {
		t.Fatal(err)
	}
	want := t0.UTC().Truncate(time.Microsecond)
	for name, got := range map[string]time.Time{"created": r.CreatedAt, "available": r.AvailableAt, "locked": r.LockedAt, "occurred": r.Envelope.OccurredAt()} {
		if !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("%s at %v, want %v", name, got, want)
		}
	}
}

func TestNestedInTxDiscardsOnlyItsOwnEvents(t *testing.T) {
	s := outboxmem.New()
	ctx := context.Background()
	outer, inner, deeper, after := event(t), event(t), event(t), event(t)
	var delivered []string
	boom := errors.New("inner fails")
	write := func(ctx context.Context, e outbox.Envelope) error {
		tx, err := s.Current(ctx)
		if err != nil {
			return err
		}
		tx.AfterCommit(func() { delivered = append(delivered, e.ID()) })
		return s.Insert(ctx, tx, t0, "", []outbox.Envelope{e})
	}
	err := s.InTx(ctx, func(ctx context.Context) error {
		if err := write(ctx, outer); err != nil {
			return err
		}
		err := s.InTx(ctx, func(ctx context.Context) error {
			if err := write(ctx, inner); err != nil {
				return err
			}
			// A savepoint released inside the failing one goes with it.
			if err := s.InTx(ctx, func(ctx context.Context) error { return write(ctx, deeper) }); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Errorf("nested InTx = %v, want %v", err, boom)
		}
		if n := count(t, s); n != 0 {
			t.Errorf("%d rows visible before the commit", n)
		}
		return write(ctx, after)
	})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := s.List(ctx, outbox.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].ID != outer.ID() || recs[1].ID != after.ID() {
		t.Fatalf("committed %v, want the outer and the later event", recs)
	}
	if len(delivered) != 2 || delivered[0] != outer.ID() || delivered[1] != after.ID() {
		t.Fatalf("after-commit callbacks for %v, want the outer and the later event", delivered)
	}
	// The discarded ids are free again.
	if err := insert(s, t0, "", inner, deeper); err != nil {
		t.Fatalf("re-insert of rolled back ids: %v", err)
	}
}

func TestCurrentAndForeignTransactions(t *testing.T) {
	a, b := outboxmem.New(), outboxmem.New()
	ctx := context.Background()
	if _, err := a.Current(ctx); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("Current outside InTx = %v", err)
	}
	var kept context.Context
	err := a.InTx(ctx, func(ctx context.Context) error {
		kept = ctx
		if _, err := b.Current(ctx); !errors.Is(err, outbox.ErrNoTransaction) {
			t.Errorf("another Store's Current in a's transaction = %v, want ErrNoTransaction", err)
		}
		tx, err := a.Current(ctx)
		if err != nil {
			return err
		}
		if err := b.Insert(ctx, tx, t0, "", []outbox.Envelope{event(t)}); !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("Insert into b with a's transaction = %v, want ErrInvalidConfig", err)
		}
		// b's own transaction nests beside a's, independent of it.
		return b.InTx(ctx, func(ctx context.Context) error {
			btx, err := b.Current(ctx)
			if err != nil {
				return err
			}
			return b.Insert(ctx, btx, t0, "", []outbox.Envelope{event(t)})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := a.Current(kept)
	if !errors.Is(err, outbox.ErrNoTransaction) || tx != nil {
		t.Fatalf("Current after the commit = %v, %v; want ErrNoTransaction", tx, err)
	}
	if count(t, a) != 0 || count(t, b) != 1 {
		t.Fatalf("rows: a %d, b %d; want 0 and 1", count(t, a), count(t, b))
	}
}

func TestInsertWithAnEndedTransaction(t *testing.T) {
	s := outboxmem.New()
	var tx outbox.Tx
	if err := s.InTx(context.Background(), func(ctx context.Context) (err error) {
		tx, err = s.Current(ctx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Insert(context.Background(), tx, t0, "", []outbox.Envelope{event(t)}); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("Insert after the commit = %v, want ErrNoTransaction", err)
	}
	if n := count(t, s); n != 0 {
		t.Fatalf("%d rows", n)
	}
}

func TestDuplicateIDFailsTheWholeInsert(t *testing.T) {
	s := outboxmem.New()
	a, b := event(t), event(t)
	if err := insert(s, t0, "", a); err != nil {
		t.Fatal(err)
	}
	c := event(t)
	err := s.InTx(context.Background(), func(ctx context.Context) error {
		tx, _ := s.Current(ctx)
		if err := s.Insert(ctx, tx, t0, "", []outbox.Envelope{b, a}); err == nil {
			t.Error("insert of a stored id succeeded")
		}
		if err := s.Insert(ctx, tx, t0, "", []outbox.Envelope{c, c}); err == nil {
			t.Error("insert of one id twice in a batch succeeded")
		}
		return nil // commit: nothing was staged
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, s); n != 1 {
		t.Fatalf("%d rows, want only the first insert's", n)
	}
}

func TestIDStagedByAnotherTransactionIsTaken(t *testing.T) {
	s := outboxmem.New()
	e := event(t)
	staged, finish := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = s.InTx(context.Background(), func(ctx context.Context) error {
			tx, _ := s.Current(ctx)
			if err := s.Insert(ctx, tx, t0, "", []outbox.Envelope{e}); err != nil {
				t.Error(err)
			}
			close(staged)
			<-finish
			return errors.New("roll back")
		})
	}()
	<-staged
	if err := insert(s, t0, "", e); err == nil {
		t.Error("an id staged by a transaction in progress was inserted again")
	}
	close(finish)
	wg.Wait()
	if err := insert(s, t0, "", e); err != nil {
		t.Fatalf("insert after the other transaction rolled back: %v", err)
	}
}

func TestRecordsAreSnapshots(t *testing.T) {
	s := outboxmem.New()
	ctx := context.Background()
	e := event(t, outbox.WithHeader("h", "v"))
	if err := insert(s, t0, "owner", e); err != nil {
		t.Fatal(err)
	}
	before, err := s.Get(ctx, e.ID())
	if err != nil {
		t.Fatal(err)
	}
	h := before.Envelope.Headers()
	h["h"] = "changed"
	if n, err := s.MarkDone(ctx, "owner", []string{e.ID()}, t0); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	if before.Status != outbox.StatusNew || before.LockedBy != "owner" {
		t.Errorf("a record read earlier changed with the row: %+v", before)
	}
	after, err := s.Get(ctx, e.ID())
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := after.Envelope.Header("h"); v != "v" || after.Status != outbox.StatusDone {
		t.Errorf("stored event changed through a returned record: header %q, status %v", v, after.Status)
	}
}

func TestContextDoneRollsBack(t *testing.T) {
	s := outboxmem.New()
	ctx, cancel := context.WithCancel(context.Background())
	rolledBack := false
	err := s.InTx(ctx, func(ctx context.Context) error {
		tx, err := s.Current(ctx)
		if err != nil {
			return err
		}
		tx.AfterRollback(func() { rolledBack = true })
		if err := s.Insert(ctx, tx, t0, "", []outbox.Envelope{event(t)}); err != nil {
			return err
		}
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || !rolledBack {
		t.Fatalf("InTx = %v (rolled back: %v), want context.Canceled and a rollback", err, rolledBack)
	}
	if n := count(t, s); n != 0 {
		t.Fatalf("%d rows", n)
	}
	if err := s.InTx(ctx, func(context.Context) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("InTx with a done context = %v", err)
	}
	if err := s.InTx(context.Background(), nil); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("InTx(nil) = %v, want ErrInvalidConfig", err)
	}
}

func TestClaimWithoutOwner(t *testing.T) {
	s := outboxmem.New()
	if _, err := s.Claim(context.Background(), outbox.ClaimRequest{Now: t0, Limit: 1}); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("Claim without an owner = %v, want ErrInvalidConfig", err)
	}
}
