package outboxtest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// AdapterFixture is an ORM adapter under test: the Fixture of its
// transaction style, whose InTx uses the ORM's own transaction API and nests
// in savepoints (a nested InTx that fails rolls back its own work only), plus
// business writes through the ORM.
type AdapterFixture struct {
	Fixture
	// InsertBusiness inserts one row called name into a business table,
	// through the ORM, in the transaction ctx carries (as InTx passes it).
	InsertBusiness func(ctx context.Context, name string) error
	// BusinessRows returns the names of the committed business rows.
	BusinessRows func(t testing.TB) []string
	// ExecBusiness runs a statement without arguments through the ORM in
	// the transaction ctx carries.
	ExecBusiness func(ctx context.Context, query string) error
	// FailCommitSQL, run in a transaction, makes its COMMIT fail (a
	// deferred constraint, see outboxsqltest.Backend.CommitFailure); empty
	// skips the failed-commit test on databases that cannot do it.
	FailCommitSQL string
}

// RunAdapterSuite checks what an ORM adapter promises beyond the
// TxContext suite, through a real outbox Writer: business rows and outbox
// rows commit together and roll back together (on an error, on a panic and
// when the COMMIT itself fails, which must not count as committed);
// a nested transaction that rolls back to its savepoint takes its business
// rows, its outbox rows and its after-commit callbacks with it while the
// outer transaction commits; and the dispatcher's hot path never delivers an
// event whose row was rolled back. newFixture is called once per subtest;
// subtests run in parallel.
func RunAdapterSuite(t *testing.T, newFixture func(t *testing.T) AdapterFixture) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, f AdapterFixture)
	}{
		{"BusinessAndOutboxCommitTogether", adCommitTogether},
		{"BusinessAndOutboxRollBackTogether", adRollbackTogether},
		{"PanicRollsBackBoth", adPanic},
		{"FailedCommitRunsAfterRollback", adFailedCommit},
		{"SavepointRollbackKeepsTheOuterWork", adSavepointRollback},
		{"NestedCommitThenOuterRollback", adNestedThenOuterRollback},
		{"ThreeLevelsMiddleSurvivesInnerFailure", adThreeLevels},
		{"HotPathSkipsRolledBackSavepoint", adHotPathSavepoint},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newFixture(t))
		})
	}
}

// WantNoTransaction fails t unless tc.Current(ctx) fails with an error
// wrapping outbox.ErrNoTransaction whose message mentions hint: adapters
// say why a context carries no usable transaction.
func WantNoTransaction(t testing.TB, ctx context.Context, tc outbox.TxContext, hint string) {
	t.Helper()
	_, err := tc.Current(ctx)
	if !errors.Is(err, outbox.ErrNoTransaction) || !strings.Contains(err.Error(), hint) {
		t.Errorf("Current = %v, want ErrNoTransaction mentioning %q", err, hint)
	}
}

// WantNewTxAfterEnd checks what an adapter's helper that runs a function
// in a transaction, inTx, does with a context whose transaction already
// ended: that context carries none, so inTx begins a new transaction,
// whose after-commit callbacks run when it commits, instead of nesting in
// the ended one.
func WantNewTxAfterEnd(t testing.TB, tc outbox.TxContext, inTx func(ctx context.Context, fn func(ctx context.Context) error) error) {
	t.Helper()
	var kept context.Context
	if err := inTx(context.Background(), func(ctx context.Context) error {
		kept = ctx
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	committed := false
	err := inTx(kept, func(ctx context.Context) error {
		cur, err := tc.Current(ctx)
		if err != nil {
			return err
		}
		cur.AfterCommit(func() { committed = true })
		return nil
	})
	if err != nil || !committed {
		t.Fatalf("a transaction begun with the context of an ended one = %v, committed %v; want a new transaction that commits", err, committed)
	}
}

// hookRecorder is a WriterHook that records the ids it was told about.
type hookRecorder struct {
	outbox.NopHook
	mu                    sync.Mutex
	committed, rolledBack []string
}

func (h *hookRecorder) AfterCommit(events []outbox.Envelope) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range events {
		h.committed = append(h.committed, e.ID())
	}
}

func (h *hookRecorder) AfterRollback(events []outbox.Envelope) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range events {
		h.rolledBack = append(h.rolledBack, e.ID())
	}
}

// want checks the ids told so far, in any order.
func (h *hookRecorder) want(t testing.TB, when string, committed, rolledBack []string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if !sameIDs(h.committed, committed) {
		t.Errorf("%s: after-commit told %v, want %v", when, h.committed, committed)
	}
	if !sameIDs(h.rolledBack, rolledBack) {
		t.Errorf("%s: after-rollback told %v, want %v", when, h.rolledBack, rolledBack)
	}
}

func sameIDs(got, want []string) bool {
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	return slices.Equal(g, w)
}

// adapterWriter returns a writer-only Client on f with a recording hook.
func adapterWriter(t testing.TB, f AdapterFixture) (*outbox.Client, *hookRecorder) {
	t.Helper()
	h := &hookRecorder{}
	c, err := outbox.New(outbox.Config{Store: f.Store, TxContext: f.TxContext, Mode: outbox.ModeWriterOnly,
		Hooks: []outbox.WriterHook{h}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return c, h
}

// writeBoth inserts business row name and one event through w in the
// transaction ctx carries, and returns the event's id.
func writeBoth(ctx context.Context, f AdapterFixture, w *outbox.Client, name string) (string, error) {
	if err := f.InsertBusiness(ctx, name); err != nil {
		return "", err
	}
	e, err := outbox.NewEnvelope(evtPing, outbox.WithJSON([]byte(`{"name":"`+name+`"}`)))
	if err != nil {
		return "", err
	}
	if _, err := w.Write(ctx, e); err != nil {
		return "", err
	}
	return e.ID(), nil
}

// wantTables checks the committed business rows and outbox event ids.
func wantTables(t testing.TB, f AdapterFixture, business, events []string) {
	t.Helper()
	if got := f.BusinessRows(t); !sameIDs(got, business) {
		t.Errorf("business rows %v, want %v", got, business)
	}
	recs, err := f.Store.List(context.Background(), outbox.Query{Limit: 1000})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	if !sameIDs(ids, events) {
		t.Errorf("outbox rows %v, want %v", ids, events)
	}
}

func adCommitTogether(t *testing.T, f AdapterFixture) {
	w, h := adapterWriter(t, f)
	var id string
	err := f.InTx(context.Background(), func(ctx context.Context) (err error) {
		id, err = writeBoth(ctx, f, w, "a")
		if err == nil {
			h.want(t, "before commit", nil, nil)
		}
		return err
	})
	if err != nil {
		t.Fatalf("InTx: %v", err)
	}
	h.want(t, "after commit", []string{id}, nil)
	wantTables(t, f, []string{"a"}, []string{id})
}

func adRollbackTogether(t *testing.T, f AdapterFixture) {
	w, h := adapterWriter(t, f)
	boom := errors.New("business rule violated")
	var id string
	err := f.InTx(context.Background(), func(ctx context.Context) (err error) {
		if id, err = writeBoth(ctx, f, w, "a"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx = %v, want %v", err, boom)
	}
	h.want(t, "after rollback", nil, []string{id})
	wantTables(t, f, nil, nil)
}

func adPanic(t *testing.T, f AdapterFixture) {
	w, h := adapterWriter(t, f)
	var id string
	recovered := func() (v any) {
		defer func() { v = recover() }()
		_ = f.InTx(context.Background(), func(ctx context.Context) (err error) {
			if id, err = writeBoth(ctx, f, w, "a"); err != nil {
				t.Error(err)
			}
			panic("business code panics")
		})
		return nil
	}()
	if recovered != "business code panics" {
		t.Fatalf("recovered %v, want the panic re-raised", recovered)
	}
	h.want(t, "after the panic", nil, []string{id})
	wantTables(t, f, nil, nil)
}

func adFailedCommit(t *testing.T, f AdapterFixture) {
	if f.FailCommitSQL == "" {
		t.Skip("the database has no deferred constraints to fail a commit with")
	}
	w, h := adapterWriter(t, f)
	var id string
	err := f.InTx(context.Background(), func(ctx context.Context) (err error) {
		if id, err = writeBoth(ctx, f, w, "a"); err != nil {
			return err
		}
		return f.ExecBusiness(ctx, f.FailCommitSQL)
	})
	if err == nil {
		t.Fatal("InTx = nil, want the commit's failure")
	}
	h.want(t, "after the failed commit", nil, []string{id})
	wantTables(t, f, nil, nil)
}

// savepointScenario: the outer transaction writes a, a nested one writes b
// and fails, the outer one swallows the failure, writes c and commits.
func savepointScenario(t *testing.T, f AdapterFixture, w *outbox.Client, h *hookRecorder) (a, b, c string) {
	t.Helper()
	boom := errors.New("nested step fails")
	err := f.InTx(context.Background(), func(ctx context.Context) (err error) {
		if a, err = writeBoth(ctx, f, w, "a"); err != nil {
			return err
		}
		nested := f.InTx(ctx, func(ctx context.Context) (err error) {
			if b, err = writeBoth(ctx, f, w, "b"); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(nested, boom) {
			t.Errorf("nested InTx = %v, want %v", nested, boom)
		}
		if h != nil {
			h.want(t, "right after the nested rollback", nil, []string{b})
		}
		c, err = writeBoth(ctx, f, w, "c")
		return err
	})
	if err != nil {
		t.Fatalf("InTx: %v", err)
	}
	return a, b, c
}

func adSavepointRollback(t *testing.T, f AdapterFixture) {
	w, h := adapterWriter(t, f)
	a, b, c := savepointScenario(t, f, w, h)
	h.want(t, "after the outer commit", []string{a, c}, []string{b})
	wantTables(t, f, []string{"a", "c"}, []string{a, c})
}

func adNestedThenOuterRollback(t *testing.T, f AdapterFixture) {
	w, h := adapterWriter(t, f)
	boom := errors.New("outer fails")
	var a, b string
	err := f.InTx(context.Background(), func(ctx context.Context) (err error) {
		if a, err = writeBoth(ctx, f, w, "a"); err != nil {
			return err
		}
		err = f.InTx(ctx, func(ctx context.Context) (err error) {
			b, err = writeBoth(ctx, f, w, "b")
			return err
		})
		if err != nil {
			return err
		}
		h.want(t, "after the nested commit", nil, nil)
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx = %v, want %v", err, boom)
	}
	h.want(t, "after the outer rollback", nil, []string{a, b})
	wantTables(t, f, nil, nil)
}

func adThreeLevels(t *testing.T, f AdapterFixture) {
	w, h := adapterWriter(t, f)
	boom := errors.New("innermost fails")
	var a, b, c, d string
	err := f.InTx(context.Background(), func(ctx context.Context) (err error) {
		if a, err = writeBoth(ctx, f, w, "a"); err != nil {
			return err
		}
		return f.InTx(ctx, func(ctx context.Context) (err error) {
			if b, err = writeBoth(ctx, f, w, "b"); err != nil {
				return err
			}
			inner := f.InTx(ctx, func(ctx context.Context) (err error) {
				if c, err = writeBoth(ctx, f, w, "c"); err != nil {
					return err
				}
				return boom
			})
			if !errors.Is(inner, boom) {
				t.Errorf("innermost InTx = %v, want %v", inner, boom)
			}
			d, err = writeBoth(ctx, f, w, "d")
			return err
		})
	})
	if err != nil {
		t.Fatalf("InTx: %v", err)
	}
	h.want(t, "after the outer commit", []string{a, b, d}, []string{c})
	wantTables(t, f, []string{"a", "b", "d"}, []string{a, b, d})
}

func adHotPathSavepoint(t *testing.T, f AdapterFixture) {
	l := NewLedger()
	c := startNode(t, f.Fixture, l.Listener(), outbox.Config{})
	a, b, cc := savepointScenario(t, f, c, nil)
	Eventually(t, 10*time.Second, "committed events delivered", func() bool { return l.Count(a) == 1 && l.Count(cc) == 1 })
	if _, err := c.PollOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	closeClient(t, c)
	if n := l.Count(b); n != 0 {
		t.Fatalf("the event rolled back with its savepoint was delivered %d times", n)
	}
	if total, distinct, dups := l.Summary(); total != 2 || distinct != 2 || dups != 0 {
		t.Fatalf("delivered total=%d distinct=%d duplicates=%d, want 2 events once each", total, distinct, dups)
	}
}
