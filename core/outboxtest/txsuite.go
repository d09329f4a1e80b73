package outboxtest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
)

// RunTxContextSuite checks that a TxContext and its InTx behave as the
// outbox Writer requires: callbacks after a real commit only, exactly once;
// after-rollback only on rollback; ErrNoTransaction outside a transaction;
// nested transactions whose callbacks wait for the outermost commit; writes
// through Current(ctx) that commit and roll back with the transaction;
// nested transactions in savepoints whose failure undoes only their own
// writes and callbacks. It writes and counts with fixture.Store.
// newFixture is called once per subtest; subtests run in parallel.
func RunTxContextSuite(t *testing.T, newFixture func(t *testing.T) Fixture) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, f Fixture)
	}{
		{"CommitRunsAfterCommitOnce", txCommit},
		{"RollbackRunsAfterRollbackOnly", txRollback},
		{"NoTransaction", txNone},
		{"WritesInvisibleUntilCommit", txInvisibleUntilCommit},
		{"FinishedTransactionIsNoTransaction", txFinished},
		{"NestedFailureUndoesItsSavepointOnly", txNestedSavepoint},
		{"NestedCallbacksWaitForOutermostCommit", txNestedCommit},
		{"NestedCallbacksDroppedOnOuterRollback", txNestedOuterRollback},
		{"NestedErrorPropagatedRollsBackAll", txNestedInnerError},
		{"PanickingCallbackDoesNotBreakCaller", txPanickingCallback},
		{"PanicInFunctionRollsBack", txPanicInFn},
		{"ConcurrentTransactionsAreSeparate", txConcurrent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newFixture(t))
		})
	}
}

// counter counts callback invocations and remembers their order.
type counter struct {
	mu    sync.Mutex
	n     map[string]int
	order []string
}

func newCounter() *counter { return &counter{n: map[string]int{}} }

func (c *counter) fn(name string) func() {
	return func() {
		c.mu.Lock()
		c.n[name]++
		c.order = append(c.order, name)
		c.mu.Unlock()
	}
}

func (c *counter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

func (c *counter) want(t testing.TB, when string, want map[string]int) {
	t.Helper()
	for name, n := range want {
		if got := c.get(name); got != n {
			t.Errorf("%s: callback %q ran %d times, want %d", when, name, got, n)
		}
	}
}

// current returns the transaction in ctx, failing the test if there is none.
func current(t testing.TB, ctx context.Context, f Fixture) outbox.Tx {
	t.Helper()
	tx, err := f.TxContext.Current(ctx)
	if err != nil {
		t.Fatalf("Current inside InTx: %v", err)
	}
	return tx
}

// writeRow inserts one event through the executor of the transaction in ctx.
func writeRow(ctx context.Context, f Fixture, tx outbox.Tx) error {
	e, err := outbox.NewEnvelope(evtTest, outbox.WithJSON([]byte(`{}`)))
	if err != nil {
		return err
	}
	return f.Store.Insert(ctx, tx, t0, "", []outbox.Envelope{e})
}

func rows(t testing.TB, f Fixture) int64 { return countRows(t, f, outbox.Query{}) }

func txCommit(t *testing.T, f Fixture) {
	c := newCounter()
	err := f.InTx(context.Background(), func(ctx context.Context) error {
		tx := current(t, ctx, f)
		tx.AfterCommit(c.fn("commit-1"))
		tx.AfterCommit(c.fn("commit-2"))
		tx.AfterRollback(c.fn("rollback"))
		if err := writeRow(ctx, f, tx); err != nil {
			return err
		}
		c.want(t, "before commit", map[string]int{"commit-1": 0, "commit-2": 0})
		return nil
	})
	if err != nil {
		t.Fatalf("InTx: %v", err)
	}
	c.want(t, "after commit", map[string]int{"commit-1": 1, "commit-2": 1, "rollback": 0})
	if c.order[0] != "commit-1" {
		t.Errorf("callbacks ran in order %v, want registration order", c.order)
	}
	if n := rows(t, f); n != 1 {
		t.Fatalf("%d rows after commit, want 1", n)
	}
}

func txRollback(t *testing.T, f Fixture) {
	c := newCounter()
	boom := errors.New("boom")
	err := f.InTx(context.Background(), func(ctx context.Context) error {
		tx := current(t, ctx, f)
		tx.AfterCommit(c.fn("commit"))
		tx.AfterRollback(c.fn("rollback"))
		if err := writeRow(ctx, f, tx); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx = %v, want %v", err, boom)
	}
	c.want(t, "after rollback", map[string]int{"commit": 0, "rollback": 1})
	if n := rows(t, f); n != 0 {
		t.Fatalf("%d rows after rollback, want 0", n)
	}
}

func txNone(t *testing.T, f Fixture) {
	if _, err := f.TxContext.Current(context.Background()); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("Current without a transaction = %v, want ErrNoTransaction", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := f.InTx(ctx, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := f.TxContext.Current(ctx); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("Current on the caller's context after InTx = %v, want ErrNoTransaction", err)
	}
}

// txInvisibleUntilCommit checks that Insert writes in the caller's
// transaction, not on the store's pool: the row is not visible outside the
// transaction before it commits.
func txInvisibleUntilCommit(t *testing.T, f Fixture) {
	err := f.InTx(context.Background(), func(ctx context.Context) error {
		if err := writeRow(ctx, f, current(t, ctx, f)); err != nil {
			return err
		}
		if n := rows(t, f); n != 0 {
			t.Errorf("the store's pool sees %d rows before the commit, want 0", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := rows(t, f); n != 1 {
		t.Fatalf("%d rows after the commit, want 1", n)
	}
}

// txFinished checks that the context of a transaction that has ended
// carries no transaction any more: a write with it fails with
// ErrNoTransaction rather than with a driver error.
func txFinished(t *testing.T, f Fixture) {
	var kept context.Context
	if err := f.InTx(context.Background(), func(ctx context.Context) error {
		kept = ctx
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.TxContext.Current(kept); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("Current after commit = %v, want ErrNoTransaction", err)
	}
	boom := errors.New("boom")
	_ = f.InTx(context.Background(), func(ctx context.Context) error {
		kept = ctx
		return boom
	})
	if _, err := f.TxContext.Current(kept); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("Current after rollback = %v, want ErrNoTransaction", err)
	}
}

// txNestedSavepoint: a nested transaction that fails is rolled back to its
// savepoint; the enclosing one may still commit its own work. The inner
// events must never be delivered: their after-commit callbacks never run.
func txNestedSavepoint(t *testing.T, f Fixture) {
	c := newCounter()
	boom := errors.New("inner fails")
	err := f.InTx(context.Background(), func(ctx context.Context) error {
		outer := current(t, ctx, f)
		if err := writeRow(ctx, f, outer); err != nil {
			return err
		}
		outer.AfterCommit(c.fn("outer-commit"))
		err := f.InTx(ctx, func(ctx context.Context) error {
			inner := current(t, ctx, f)
			if err := writeRow(ctx, f, inner); err != nil {
				return err
			}
			inner.AfterCommit(c.fn("inner-commit"))
			inner.AfterRollback(c.fn("inner-rollback"))
			return boom
		})
		if !errors.Is(err, boom) {
			t.Errorf("nested InTx = %v, want %v", err, boom)
		}
		return nil // the outer transaction goes on and commits
	})
	if err != nil {
		t.Fatalf("outer InTx = %v, want nil", err)
	}
	c.want(t, "after the outer commit", map[string]int{"outer-commit": 1, "inner-commit": 0, "inner-rollback": 1})
	if n := rows(t, f); n != 1 {
		t.Fatalf("%d rows, want the outer one only", n)
	}
}

func txNestedCommit(t *testing.T, f Fixture) {
	c := newCounter()
	err := f.InTx(context.Background(), func(ctx context.Context) error {
		current(t, ctx, f).AfterCommit(c.fn("outer"))
		err := f.InTx(ctx, func(ctx context.Context) error {
			tx := current(t, ctx, f)
			tx.AfterCommit(c.fn("inner"))
			tx.AfterRollback(c.fn("inner-rollback"))
			return writeRow(ctx, f, tx)
		})
		if err != nil {
			return err
		}
		c.want(t, "after the inner transaction ended", map[string]int{"inner": 0, "outer": 0, "inner-rollback": 0})
		return writeRow(ctx, f, current(t, ctx, f))
	})
	if err != nil {
		t.Fatalf("InTx: %v", err)
	}
	c.want(t, "after the outer commit", map[string]int{"inner": 1, "outer": 1, "inner-rollback": 0})
	if n := rows(t, f); n != 2 {
		t.Fatalf("%d rows, want 2", n)
	}
}

func txNestedOuterRollback(t *testing.T, f Fixture) {
	c := newCounter()
	boom := errors.New("outer fails")
	err := f.InTx(context.Background(), func(ctx context.Context) error {
		current(t, ctx, f).AfterRollback(c.fn("outer-rollback"))
		err := f.InTx(ctx, func(ctx context.Context) error {
			tx := current(t, ctx, f)
			tx.AfterCommit(c.fn("inner-commit"))
			tx.AfterRollback(c.fn("inner-rollback"))
			return writeRow(ctx, f, tx)
		})
		if err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx = %v, want %v", err, boom)
	}
	c.want(t, "after the outer rollback", map[string]int{"inner-commit": 0, "inner-rollback": 1, "outer-rollback": 1})
	if n := rows(t, f); n != 0 {
		t.Fatalf("%d rows after the outer rollback, want 0", n)
	}
}

func txNestedInnerError(t *testing.T, f Fixture) {
	c := newCounter()
	boom := errors.New("inner fails")
	err := f.InTx(context.Background(), func(ctx context.Context) error {
		tx := current(t, ctx, f)
		tx.AfterCommit(c.fn("commit"))
		tx.AfterRollback(c.fn("rollback"))
		if err := writeRow(ctx, f, tx); err != nil {
			return err
		}
		return f.InTx(ctx, func(ctx context.Context) error {
			if err := writeRow(ctx, f, current(t, ctx, f)); err != nil {
				return err
			}
			return boom
		})
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx = %v, want %v", err, boom)
	}
	c.want(t, "after the rollback", map[string]int{"commit": 0, "rollback": 1})
	if n := rows(t, f); n != 0 {
		t.Fatalf("%d rows, want 0: the propagated inner error must roll back everything", n)
	}
}

func txPanickingCallback(t *testing.T, f Fixture) {
	c := newCounter()
	err := f.InTx(context.Background(), func(ctx context.Context) error {
		tx := current(t, ctx, f)
		tx.AfterCommit(func() { panic("callback panics") })
		tx.AfterCommit(c.fn("after-the-panic"))
		return writeRow(ctx, f, tx)
	})
	if err != nil {
		t.Fatalf("InTx = %v, want nil: a callback's panic is not the caller's failure", err)
	}
	c.want(t, "after commit", map[string]int{"after-the-panic": 1})
	if n := rows(t, f); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
	boom := errors.New("boom")
	err = f.InTx(context.Background(), func(ctx context.Context) error {
		tx := current(t, ctx, f)
		tx.AfterRollback(func() { panic("rollback callback panics") })
		tx.AfterRollback(c.fn("rollback-after-the-panic"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx = %v, want %v", err, boom)
	}
	c.want(t, "after rollback", map[string]int{"rollback-after-the-panic": 1})
}

func txPanicInFn(t *testing.T, f Fixture) {
	c := newCounter()
	recovered := func() (v any) {
		defer func() { v = recover() }()
		_ = f.InTx(context.Background(), func(ctx context.Context) error {
			tx := current(t, ctx, f)
			tx.AfterCommit(c.fn("commit"))
			tx.AfterRollback(c.fn("rollback"))
			if err := writeRow(ctx, f, tx); err != nil {
				t.Error(err)
			}
			panic("business code panics")
		})
		return nil
	}()
	if recovered != "business code panics" {
		t.Fatalf("InTx recovered %v, want the panic re-raised", recovered)
	}
	c.want(t, "after the panic", map[string]int{"commit": 0, "rollback": 1})
	if n := rows(t, f); n != 0 {
		t.Fatalf("%d rows after a panic, want 0", n)
	}
}

func txConcurrent(t *testing.T, f Fixture) {
	const workers, perWorker = 8, 5
	var commits, rollbacks atomic.Int32
	boom := errors.New("odd workers roll back")
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := f.InTx(context.Background(), func(ctx context.Context) error {
				tx, err := f.TxContext.Current(ctx)
				if err != nil {
					return err
				}
				tx.AfterCommit(func() { commits.Add(1) })
				tx.AfterRollback(func() { rollbacks.Add(1) })
				for range perWorker {
					if err := writeRow(ctx, f, tx); err != nil {
						return err
					}
				}
				if w%2 == 1 {
					return boom
				}
				return nil
			})
			if (w%2 == 1) != errors.Is(err, boom) {
				t.Errorf("worker %d: InTx = %v", w, err)
			}
		}()
	}
	wg.Wait()
	if c, r := commits.Load(), rollbacks.Load(); c != workers/2 || r != workers/2 {
		t.Errorf("%d commit and %d rollback callbacks, want %d each", c, r, workers/2)
	}
	if n := rows(t, f); n != workers/2*perWorker {
		t.Fatalf("%d rows, want %d", n, workers/2*perWorker)
	}
}
