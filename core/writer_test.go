package outbox

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

// recordingHook records the calls a Writer makes and can transform or fail.
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

func newTestWriter(t *testing.T, st *memStore, hook WriterHook) (*Writer, *syncBuffer) {
	t.Helper()
	logger, buf := bufferLogger()
	w, err := NewWriter(WriterConfig{TxContext: fakeTxContext{}, Store: st, Hook: hook, Logger: logger, Clock: newStepClock()})
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
			t.Errorf("inserted row = %+v; want NEW, unclaimed (not a claiming hook), created at the writer's clock", r)
		}
		want := "before:2,write:2,rollback:2"
		if commit {
			tx.RunCommit()
			want = "before:2,write:2,commit:2"
		} else {
			tx.RunRollback()
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
			n, _ := st.Count(context.Background(), nil, Query{})
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
	tx.RunCommit()
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
	dbErr := errors.New("disk full")
	st.setFail("Insert", dbErr)
	if _, err := w.Write(ctx, evt("A")); !errors.Is(err, dbErr) {
		t.Errorf("store error: err = %v, want it wrapped", err)
	}
}
