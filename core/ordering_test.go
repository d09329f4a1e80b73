package outbox

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestOrderingKey(t *testing.T) {
	order := AggregateName("Order")
	for _, tc := range []struct {
		name    string
		opts    []EnvelopeOption
		key     string
		ordered bool
	}{
		{"no aggregate id", nil, "", false},
		{"aggregate", []EnvelopeOption{WithAggregate(order, "o-1")}, "Order/o-1", false},
		{"explicit", []EnvelopeOption{WithAggregate(order, "o-1"), WithOrderingKey("customer-7")}, "customer-7", true},
		{"explicit empty: unordered", []EnvelopeOption{WithAggregate(order, "o-1"), WithOrderingKey("")}, "", false},
	} {
		e := MustEnvelope(EventName("E"), append([]EnvelopeOption{WithJSON([]byte(`{}`))}, tc.opts...)...)
		if e.OrderingKey() != tc.key || e.Ordered() != tc.ordered {
			t.Errorf("%s: key %q ordered %v, want %q %v", tc.name, e.OrderingKey(), e.Ordered(), tc.key, tc.ordered)
		}
		// What a writer does: an ordered Client marks the events that have a
		// key, an unordered one unmarks all.
		if on := e.inOrder(true); on.Ordered() != (tc.key != "") {
			t.Errorf("%s: marked by an ordered Client: ordered %v, want %v", tc.name, on.Ordered(), tc.key != "")
		}
		if e.inOrder(false).Ordered() {
			t.Errorf("%s: still ordered after an unordered Client's writer", tc.name)
		}
	}
	if _, err := NewEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithOrderingKey(strings.Repeat("k", MaxOrderingKeyLen+1))); !errors.Is(err, ErrInvalidEnvelope) {
		t.Errorf("a key of %d characters: %v, want ErrInvalidEnvelope", MaxOrderingKeyLen+1, err)
	}
	if _, err := NewEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithOrderingKey("a\x00b")); !errors.Is(err, ErrInvalidEnvelope) {
		t.Errorf("a key with NUL: %v, want ErrInvalidEnvelope", err)
	}
	r, err := RestoreEnvelope(EnvelopeFields{ID: "x", Type: "E", Kind: PayloadJSON, Payload: "{}", AggregateType: "Order", AggregateID: "o-1", OrderingKey: "customer-7"})
	if err != nil || !r.Ordered() || r.OrderingKey() != "customer-7" {
		t.Errorf("restored with a stored key: ordered %v key %q (%v)", r.Ordered(), r.OrderingKey(), err)
	}
	r, err = RestoreEnvelope(EnvelopeFields{ID: "x", Type: "E", Kind: PayloadJSON, Payload: "{}", AggregateType: "Order", AggregateID: "o-1"})
	if err != nil || r.Ordered() || r.OrderingKey() != "Order/o-1" {
		t.Errorf("restored without a stored key: ordered %v key %q (%v); want unordered, key Order/o-1", r.Ordered(), r.OrderingKey(), err)
	}
}

func TestDeadPolicyIsValidated(t *testing.T) {
	if _, err := New(Config{Store: newMemStore(), TxContext: fakeTxContext{}, DeadPolicy: DeadPolicy(7)}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New with an unknown DeadPolicy = %v, want ErrInvalidConfig", err)
	}
	if got := DeadSkipsKey.String(); got != "skips-key" {
		t.Errorf("DeadSkipsKey.String() = %q", got)
	}
}

// orderedHarness is a harness whose dispatcher and writer order events.
func orderedHarness(t *testing.T) *harness {
	t.Helper()
	return newHarness(t, func(c *Config) { c.Ordered = true })
}

func keyedEvt(key string) Envelope {
	return MustEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithAggregate(AggregateName("A"), key))
}

// TestOrderedWriteSplitsTheHotPath: an ordered event takes the hot path
// only when nothing of its key is pending and it is the first of its key
// in the write (a delayed one counts); the others are released for the
// poller at commit; unordered events take it as before.
func TestOrderedWriteSplitsTheHotPath(t *testing.T) {
	h := orderedHarness(t)
	block := make(chan struct{})
	_ = h.reg.Handle(EventName("E"), func(ctx context.Context, e Envelope) error { <-block; return nil })
	h.start(t)
	defer close(block)
	pendingKey := keyedEvt("busy")
	h.commit(t, pendingKey) // first of its key: hot
	if r := h.st.get(pendingKey.ID()); r.LockedBy != h.d.Owner() || !r.Envelope.Ordered() {
		t.Fatalf("the first event of a free key: locked by %q, ordered %v; want the hot path's, ordered", r.LockedBy, r.Envelope.Ordered())
	}
	delayed := MustEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithAggregate(AggregateName("A"), "late"), WithAvailableAt(h.clk.Now().Add(time.Hour)))
	afterDelayed := keyedEvt("late")
	a1, a2, busy, free := keyedEvt("x"), keyedEvt("x"), keyedEvt("busy"), MustEnvelope(EventName("E"), WithJSON([]byte(`{}`)))
	ids := h.commit(t, a1, delayed, a2, busy, afterDelayed, free)
	if n := h.st.callCount("PendingKeys"); n != 2 {
		t.Errorf("PendingKeys called %d times, want once per write", n)
	}
	want := map[string]bool{a1.ID(): true, free.ID(): true} // claimed by the hot path
	for i, id := range ids {
		r := h.st.get(id)
		if hot := r.LockedBy == h.d.Owner(); hot != want[id] {
			t.Errorf("event %d (%s): claimed %v, want %v (locked by %q)", i, r.Envelope.OrderingKey(), hot, want[id], r.LockedBy)
		}
	}
	if n := h.st.callCount("Release"); n != 1 {
		t.Errorf("Release called %d times at commit, want once for the waiting events", n)
	}
	// A write with nothing for the hot path is inserted unclaimed.
	w := keyedEvt("busy")
	h.commit(t, w)
	if r := h.st.get(w.ID()); r.LockedBy != "" {
		t.Errorf("an event whose key is pending is claimed at insert by %q", r.LockedBy)
	}
	if n := h.st.callCount("Release"); n != 1 {
		t.Errorf("Release called again (%d) for a write inserted unclaimed", n)
	}
}

// TestOrderedWriteFailsWithPendingKeys: when the pending-keys query fails,
// the write fails and inserts nothing.
func TestOrderedWriteFailsWithPendingKeys(t *testing.T) {
	h := orderedHarness(t)
	h.start(t)
	h.st.setFail("PendingKeys", errors.New("db down"))
	ctx, tx := withTx(context.Background())
	defer tx.Rollback()
	if _, err := h.w.Write(ctx, keyedEvt("k")); err == nil || !strings.Contains(err.Error(), "db down") {
		t.Fatalf("Write = %v, want the pending-keys error", err)
	}
	if n := h.st.callCount("Insert"); n != 0 {
		t.Fatalf("Insert called %d times after the failed look-up", n)
	}
}

// TestUnorderedWriterStoresNoKeys: a writer without Ordered unmarks
// events that asked for a key, and never asks for pending keys.
func TestUnorderedWriterStoresNoKeys(t *testing.T) {
	h := newHarness(t, nil)
	h.start(t)
	e := MustEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithOrderingKey("k"))
	h.commit(t, e)
	if r := h.st.get(e.ID()); r.Envelope.Ordered() {
		t.Fatal("an unordered Client stored an ordering key")
	}
	if n := h.st.callCount("PendingKeys"); n != 0 {
		t.Fatalf("PendingKeys called %d times by an unordered writer", n)
	}
}

// TestDeadEventsSkip: Skip moves a DEAD event to DONE with the note and
// wakes the poller; it fails with ErrNotFound for anything else.
func TestDeadEventsSkip(t *testing.T) {
	st := newMemStore()
	st.put(Record{ID: "dead", Status: StatusDead, Envelope: keyedEvt("k")})
	st.put(Record{ID: "new", Status: StatusNew, Envelope: keyedEvt("k")})
	woken := 0
	d := newDeadEvents(st, nil)
	d.wake = func() { woken++ }
	if err := d.Skip(context.Background(), "dead", "by hand"); err != nil {
		t.Fatal(err)
	}
	if r := st.get("dead"); r.Status != StatusDone || r.LastError != SkipNote+": by hand" || r.DoneAt.IsZero() {
		t.Fatalf("skipped event = %+v", r)
	}
	if err := d.Skip(context.Background(), "new", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Skip of a NEW event = %v, want ErrNotFound", err)
	}
	if woken != 1 {
		t.Fatalf("poller woken %d times, want once", woken)
	}
}

// TestOrderedDeadBlocksIsReported: an ordered event that goes DEAD under
// DeadBlocksKey is counted (KeyBlocked) and logged with its key; under
// DeadSkipsKey it is not.
func TestOrderedDeadBlocksIsReported(t *testing.T) {
	for _, policy := range []DeadPolicy{DeadBlocksKey, DeadSkipsKey} {
		h := newHarness(t, func(c *Config) { c.Ordered, c.DeadPolicy, c.MaxAttempts = true, policy, 1 })
		_ = h.reg.Handle(EventName("E"), func(context.Context, Envelope) error { return errors.New("boom") })
		h.start(t)
		e := keyedEvt("k")
		h.commit(t, e)
		deadline := time.Now().Add(5 * time.Second)
		for h.st.get(e.ID()).Status != StatusDead {
			if time.Now().After(deadline) {
				t.Fatalf("%v: the event did not go DEAD", policy)
			}
			time.Sleep(time.Millisecond)
		}
		if err := h.d.Close(context.Background()); err != nil { // the worker has finished the delivery
			t.Fatal(err)
		}
		logged := strings.Contains(h.log.String(), "ordering key blocked") && strings.Contains(h.log.String(), "ordering_key=A/k")
		if want := policy == DeadBlocksKey; (h.metrics.get("KeyBlocked") == 1) != want || logged != want {
			t.Errorf("%v: KeyBlocked %d, logged %v; want counted and logged: %v", policy, h.metrics.get("KeyBlocked"), logged, want)
		}
	}
}

func TestOrderedKeysOfAWrite(t *testing.T) {
	a, b := keyedEvt("a"), keyedEvt("b")
	late := MustEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithAggregate(AggregateName("A"), "c"), WithAvailableAt(time.Now().Add(time.Hour)))
	evs := []Envelope{a.inOrder(true), b.inOrder(true), a.inOrder(true), late.inOrder(true), evt("E")}
	if got := orderedKeys(evs); !slices.Equal(got, []string{"A/a", "A/b"}) {
		t.Fatalf("orderedKeys = %v, want the keys of the ordered events that are not delayed", got)
	}
}
