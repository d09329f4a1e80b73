package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordingHook records the calls a writer makes and can transform or fail.
type recordingHook struct {
	mu         sync.Mutex
	calls      []string
	before     func([]Envelope) ([]Envelope, error)
	panicAfter bool
}

func (h *recordingHook) add(s string, n int) {
	h.mu.Lock()
	h.calls = append(h.calls, s+":"+string(rune('0'+n)))
	h.mu.Unlock()
}

func (h *recordingHook) BeforeWrite(_ context.Context, events []Envelope) ([]Envelope, error) {
	h.add("before", len(events))
	if h.before != nil {
		return h.before(events)
	}
	return events, nil
}

func (h *recordingHook) AfterWrite(_ context.Context, events []Envelope) {
	h.add("write", len(events))
	if h.panicAfter {
		panic("after-write boom")
	}
}
func (h *recordingHook) AfterCommit(events []Envelope) {
	h.add("commit", len(events))
	if h.panicAfter {
		panic("after-commit boom")
	}
}
func (h *recordingHook) AfterRollback(events []Envelope) { h.add("rollback", len(events)) }

func (h *recordingHook) trace() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.calls, ",")
}

func newTestWriter(t *testing.T, st *memStore, hook WriterHook) (*writer, *syncBuffer) {
	t.Helper()
	logger, buf := bufferLogger()
	var hooks []WriterHook
	if hook != nil {
		hooks = append(hooks, hook)
	}
	cfg := (Config{Store: st, TxContext: fakeTxContext{}, Hooks: hooks, Logger: logger, Clock: newStepClock()}).WithDefaults()
	w, err := newWriter(cfg, newClaims(cfg, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	return w, buf
}

func TestWriterNoTransaction(t *testing.T) {
	st := newMemStore()
	w, _ := newTestWriter(t, st, nil)
	if _, err := w.Write(context.Background(), evt("E")); !errors.Is(err, ErrNoTransaction) {
		t.Errorf("err = %v, want ErrNoTransaction", err)
	}
	if st.callCount("Insert") != 0 {
		t.Error("wrote without a transaction")
	}
}

func TestWriterCommitAndRollback(t *testing.T) {
	for _, commit := range []bool{true, false} {
		st := newMemStore()
		hook := &recordingHook{}
		w, _ := newTestWriter(t, st, hook)
		ctx, tx := withTx(context.Background())
		e1, e2 := evt("A"), evt("B")
		ids, err := w.Write(ctx, e1, e2)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != 2 || ids[0] != e1.ID() || ids[1] != e2.ID() {
			t.Errorf("ids = %v", ids)
		}
		if r := st.get(e1.ID()); r.Status != StatusNew || r.LockedBy != "" || !r.CreatedAt.Equal(newStepClock().Now()) {
			t.Errorf("inserted row = %+v; want NEW, unclaimed (no dispatcher), created at the writer's clock", r)
		}
		want := "before:2,write:2,rollback:2"
		if commit {
			tx.Commit()
			want = "before:2,write:2,commit:2"
		} else {
			tx.Rollback()
		}
		if got := hook.trace(); got != want {
			t.Errorf("commit=%v: hook calls %s, want %s (one after-commit per batch)", commit, got, want)
		}
	}
}

func TestWriterHookShapesWrite(t *testing.T) {
	tests := []struct {
		name    string
		before  func([]Envelope) ([]Envelope, error)
		wantIDs int
		wantErr bool
	}{
		{"suppress", func([]Envelope) ([]Envelope, error) { return nil, nil }, 0, false},
		{"filter", func(es []Envelope) ([]Envelope, error) { return es[:1], nil }, 1, false},
		{"fail", func([]Envelope) ([]Envelope, error) { return nil, errors.New("rejected") }, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newMemStore()
			w, _ := newTestWriter(t, st, &recordingHook{before: tc.before})
			ctx, _ := withTx(context.Background())
			ids, err := w.Write(ctx, evt("A"), evt("B"))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if err != nil && !strings.Contains(err.Error(), "rejected") {
				t.Errorf("err = %v does not carry the hook's error", err)
			}
			if len(ids) != tc.wantIDs {
				t.Errorf("ids = %v, want %d", ids, tc.wantIDs)
			}
			n, _ := st.Count(context.Background(), Query{})
			if int(n) != tc.wantIDs {
				t.Errorf("%d rows stored, want %d", n, tc.wantIDs)
			}
		})
	}
}

func TestWriterHookPanicsAreLogged(t *testing.T) {
	st := newMemStore()
	w, buf := newTestWriter(t, st, &recordingHook{panicAfter: true})
	ctx, tx := withTx(context.Background())
	ids, err := w.Write(ctx, evt("A"))
	if err != nil || len(ids) != 1 {
		t.Fatalf("Write = %v, %v; a panicking AfterWrite must not fail it", ids, err)
	}
	tx.Commit()
	out := buf.String()
	for _, want := range []string{"after-write hook panicked", "after-write boom", "after-commit hook panicked", "after-commit boom"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

func TestWriterRejectsZeroEnvelopeAndStoreErrors(t *testing.T) {
	st := newMemStore()
	w, _ := newTestWriter(t, st, NopHook{})
	ctx, _ := withTx(context.Background())
	if _, err := w.Write(ctx, evt("A"), Envelope{}); !errors.Is(err, ErrInvalidEnvelope) {
		t.Errorf("zero envelope: err = %v, want ErrInvalidEnvelope", err)
	}
	if ids, err := w.Write(ctx); err != nil || ids != nil {
		t.Errorf("empty write = %v, %v", ids, err)
	}
	twice := evt("A")
	if ids, err := w.Write(ctx, twice, evt("B"), twice); !errors.Is(err, ErrDuplicateEvent) || ids != nil {
		t.Errorf("an id twice in one write = %v, %v; want ErrDuplicateEvent", ids, err)
	}
	if n := st.callCount("Insert"); n != 0 {
		t.Errorf("the store was called %d times for a write with a duplicate id, want 0", n)
	}
	dbErr := errors.New("disk full")
	st.setFail("Insert", dbErr)
	if _, err := w.Write(ctx, evt("A")); !errors.Is(err, dbErr) {
		t.Errorf("store error: err = %v, want it wrapped", err)
	}
}

// tracingHook records its calls, tagged with its name, in a shared trace,
// and can rewrite the events it is given.
type tracingHook struct {
	name   string
	trace  *[]string
	mu     *sync.Mutex
	before func([]Envelope) []Envelope
}

func (h tracingHook) add(what string, events []Envelope) {
	h.mu.Lock()
	*h.trace = append(*h.trace, fmt.Sprintf("%s.%s:%d", h.name, what, len(events)))
	h.mu.Unlock()
}

func (h tracingHook) BeforeWrite(_ context.Context, events []Envelope) ([]Envelope, error) {
	h.add("before", events)
	if h.before != nil {
		return h.before(events), nil
	}
	return events, nil
}
func (h tracingHook) AfterWrite(_ context.Context, events []Envelope) { h.add("write", events) }
func (h tracingHook) AfterCommit(events []Envelope)                   { h.add("commit", events) }
func (h tracingHook) AfterRollback(events []Envelope)                 { h.add("rollback", events) }

// TestWriterHooksChainInOrder: each BeforeWrite gets what the previous one
// returned; every later stage runs in the hooks' order, with the events
// actually written.
func TestWriterHooksChainInOrder(t *testing.T) {
	for _, commit := range []bool{true, false} {
		var mu sync.Mutex
		var trace []string
		extra := evt("Extra")
		first := tracingHook{name: "first", trace: &trace, mu: &mu,
			before: func(es []Envelope) []Envelope { return append(es[:1:1], extra) }}
		second := tracingHook{name: "second", trace: &trace, mu: &mu,
			before: func(es []Envelope) []Envelope { return append(es, evt("Last")) }}
		st := newMemStore()
		cfg := (Config{Store: st, TxContext: fakeTxContext{}, Hooks: []WriterHook{first, second}}).WithDefaults()
		w, err := newWriter(cfg, newClaims(cfg, 0), nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, tx := withTx(context.Background())
		a := evt("A")
		ids, err := w.Write(ctx, a, evt("B"))
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != 3 || ids[0] != a.ID() || ids[1] != extra.ID() {
			t.Errorf("ids = %v, want A, Extra and the second hook's event", ids)
		}
		if n, _ := st.Count(context.Background(), Query{}); n != 3 {
			t.Errorf("%d rows stored, want the 3 the hooks left", n)
		}
		end := "commit"
		if commit {
			tx.Commit()
		} else {
			tx.Rollback()
			end = "rollback"
		}
		want := "first.before:2,second.before:2,first.write:3,second.write:3,first." + end + ":3,second." + end + ":3"
		mu.Lock()
		got := strings.Join(trace, ",")
		mu.Unlock()
		if got != want {
			t.Errorf("commit=%v: trace\n%s\nwant\n%s", commit, got, want)
		}
	}
}

// TestWriterHooksCannotTurnOffClaimAtInsert: with a running dispatcher the
// writer inserts its rows claimed by the dispatcher's owner and hands them
// to the hot path, whatever the hooks do: the hot path is wired through
// newWriter's hot, not through a hook.
func TestWriterHooksCannotTurnOffClaimAtInsert(t *testing.T) {
	h := newHarness(t, nil)
	delivered := make(chan string, 4)
	_ = h.reg.Handle(EventName("E"), func(_ context.Context, e Envelope) error { delivered <- e.ID(); return nil })
	h.start(t)
	replace := &recordingHook{before: func(es []Envelope) ([]Envelope, error) {
		out := make([]Envelope, len(es))
		for i := range es {
			out[i] = evt("E") // new events: the hook does not pass the originals on
		}
		return out, nil
	}}
	cfg := h.cfg
	cfg.Hooks = []WriterHook{NopHook{}, replace, NopHook{}}
	w, err := newWriter(cfg, h.d.claims, h.d)
	if err != nil {
		t.Fatal(err)
	}
	ctx, tx := withTx(context.Background())
	ids, err := w.Write(ctx, evt("E"), evt("E"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if r := h.st.get(id); r.LockedBy != h.d.Owner() || !r.LockedAt.Equal(h.clk.Now()) {
			t.Errorf("row %s locked by %q at %v, want claimed by the dispatcher %q at insert", id, r.LockedBy, r.LockedAt, h.d.Owner())
		}
	}
	tx.Commit()
	for range ids {
		select {
		case <-delivered:
		case <-time.After(5 * time.Second):
			t.Fatal("events not delivered by the hot path")
		}
	}
	for _, id := range ids {
		h.waitStatus(t, id, StatusDone)
	}
	if n := h.metrics.get("HotEnqueued"); n != 2 {
		t.Errorf("HotEnqueued = %d, want 2", n)
	}
	if got := replace.trace(); got != "before:2,write:2,commit:2" {
		t.Errorf("hook calls %s", got)
	}
}
