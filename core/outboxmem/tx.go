package outboxmem

import (
	"context"
	"fmt"
	"strconv"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxtx"
)

// txKey keys the running transaction of one Store in a context, so that
// transactions of several Stores can be carried side by side.
type txKey struct{ s *Store }

// memTx is a running transaction of a Store: the rows it staged, by
// savepoint level, and its callbacks (an outboxtx.Scope). Its fields other
// than store and scope are guarded by store.mu.
type memTx struct {
	store *Store
	scope *outboxtx.Scope

	ended      bool
	levels     []*level // levels[0] is the transaction; then the open savepoints, innermost last
	savepoints int      // savepoints set so far, for unique names
}

// level is the transaction or one savepoint, with the rows staged in it.
type level struct {
	name string
	rows []*row
}

// AfterCommit registers fn to run once after the outermost transaction
// commits, unless the savepoint open now is rolled back first.
func (t *memTx) AfterCommit(fn func()) { t.scope.AfterCommit(fn) }

// AfterRollback registers fn to run once when the work registered with it
// is rolled back: the whole transaction, or the savepoint open now.
func (t *memTx) AfterRollback(fn func()) { t.scope.AfterRollback(fn) }

// live returns the transaction of s that ctx carries, if it has not ended.
func (s *Store) live(ctx context.Context) *memTx {
	t, _ := ctx.Value(txKey{s}).(*memTx)
	if t == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.ended {
		return nil
	}
	return t
}

// Current returns the transaction InTx carries in ctx. With none, or when
// it has already committed or rolled back, it returns an error wrapping
// outbox.ErrNoTransaction.
func (s *Store) Current(ctx context.Context) (outbox.Tx, error) {
	if t := s.live(ctx); t != nil {
		return t, nil
	}
	if _, ok := ctx.Value(txKey{s}).(*memTx); ok {
		return nil, fmt.Errorf("%w (outboxmem: the context's transaction has already ended)", outbox.ErrNoTransaction)
	}
	return nil, fmt.Errorf("%w (outboxmem: run the write inside Store.InTx)", outbox.ErrNoTransaction)
}

// InTx runs fn in a transaction carried by the context fn receives (Current
// finds it there). If fn returns nil the transaction commits: the events
// inserted in it become visible at once, then the after-commit callbacks
// run. Otherwise it rolls back, its events are discarded, the
// after-rollback callbacks run and fn's error is returned. A panic in fn
// rolls back and is re-raised. A context that is done before the commit
// rolls the transaction back, as database/sql does.
//
// Called with a context that already carries a live transaction of this
// Store, InTx runs fn in a savepoint: if fn fails (or panics), the events
// inserted since the savepoint are discarded and never delivered, and fn's
// error is returned to the enclosing function, which decides whether the
// outer transaction still commits. Nested InTx calls of one transaction
// must not run concurrently.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if fn == nil {
		return fmt.Errorf("%w: outboxmem: InTx needs a function", outbox.ErrInvalidConfig)
	}
	if outer := s.live(ctx); outer != nil {
		return outer.inSavepoint(ctx, fn)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("outboxmem: begin transaction: %w", err)
	}
	t := &memTx{store: s, scope: outboxtx.NewScope(nil), levels: []*level{{}}}
	done := false
	defer func() {
		if !done {
			t.end(false) // fn panicked: roll back, then re-raise
		}
	}()
	err := fn(context.WithValue(ctx, txKey{s}, t))
	done = true
	if err != nil {
		t.end(false)
		return err
	}
	if err := ctx.Err(); err != nil {
		t.end(false)
		return fmt.Errorf("outboxmem: commit: %w", err)
	}
	t.end(true)
	return nil
}

// end commits or rolls back t, once: the staged rows become visible or are
// discarded under the store's lock, then the callbacks run outside it.
func (t *memTx) end(commit bool) {
	s := t.store
	s.mu.Lock()
	if t.ended {
		s.mu.Unlock()
		return
	}
	t.ended = true
	for _, l := range t.levels {
		for _, r := range l.rows {
			delete(s.staged, r.f.ID)
			if commit {
				s.rows[r.f.ID] = r
				s.index(r)
			}
		}
	}
	t.levels = nil
	s.mu.Unlock()
	if commit {
		t.scope.Commit()
	} else {
		t.scope.Rollback()
	}
}

// inSavepoint runs fn in a new savepoint of t.
func (t *memTx) inSavepoint(ctx context.Context, fn func(ctx context.Context) error) error {
	s := t.store
	s.mu.Lock()
	if t.ended {
		s.mu.Unlock()
		return fmt.Errorf("%w: outboxmem: the transaction has already ended", outbox.ErrNoTransaction)
	}
	t.savepoints++
	name := "sp_" + strconv.Itoa(t.savepoints)
	t.levels = append(t.levels, &level{name: name})
	s.mu.Unlock()
	t.scope.Savepoint(name)
	done := false
	defer func() {
		if !done {
			t.rollbackTo(name) // fn panicked; the outermost InTx rolls back
		}
	}()
	err := fn(ctx)
	done = true
	if err != nil {
		t.rollbackTo(name)
		return err
	}
	t.release(name)
	return nil
}

// find returns the index of the open savepoint called name, or 0.
func (t *memTx) find(name string) int {
	for i := len(t.levels) - 1; i > 0; i-- {
		if t.levels[i].name == name {
			return i
		}
	}
	return 0
}

// rollbackTo discards the rows staged since the savepoint name was set,
// closes it, and runs the after-rollback callbacks registered since.
func (t *memTx) rollbackTo(name string) {
	s := t.store
	s.mu.Lock()
	i := t.find(name)
	if t.ended || i == 0 {
		s.mu.Unlock()
		return
	}
	for _, l := range t.levels[i:] {
		for _, r := range l.rows {
			delete(s.staged, r.f.ID)
		}
	}
	t.levels = t.levels[:i]
	s.mu.Unlock()
	t.scope.RollbackTo(name)
	t.scope.Release(name)
}

// release closes the savepoint name: its rows now belong to the enclosing
// level.
func (t *memTx) release(name string) {
	s := t.store
	s.mu.Lock()
	i := t.find(name)
	if t.ended || i == 0 {
		s.mu.Unlock()
		return
	}
	parent := t.levels[i-1]
	for _, l := range t.levels[i:] {
		parent.rows = append(parent.rows, l.rows...)
	}
	t.levels = t.levels[:i]
	s.mu.Unlock()
	t.scope.Release(name)
}
