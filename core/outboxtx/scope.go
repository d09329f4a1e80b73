package outboxtx

import (
	"log/slog"
	"strings"
	"sync"
)

// Scope tracks the callbacks of one database transaction by savepoint: it
// is the one transaction contract of the outbox, shared by outboxsql's
// TxManager, the ORM adapters and outboxpgx. Its AfterCommit and
// AfterRollback methods are those of outbox.Tx. The zero value is not
// usable; call NewScope. A Scope is safe for concurrent use. Callbacks
// never run while the Scope's lock is held, so a callback may use the Scope.
type Scope struct {
	mu     sync.Mutex
	logger *slog.Logger
	// levels[0] is the transaction itself; levels[i>0] are the open
	// savepoints, innermost last. Each level's Callbacks is chained into
	// the one below it, so running levels[0] runs them all in registration
	// order.
	levels []level
	ended  bool
}

type level struct {
	name string // normalized savepoint name; empty for the transaction
	cb   *callbacks
}

// NewScope returns the Scope of a transaction that has just begun. logger
// receives panics of callbacks; nil means slog.Default().
func NewScope(logger *slog.Logger) *Scope {
	s := &Scope{logger: logger}
	s.levels = []level{{cb: s.newCallbacks()}}
	return s
}

func (s *Scope) newCallbacks() *callbacks { return &callbacks{logger: s.logger} }

// chained returns new callbacks that run when parent runs, in the position
// of this call among parent's registrations.
func (s *Scope) chained(parent *callbacks) *callbacks {
	child := s.newCallbacks()
	parent.afterCommit(child.runCommit)
	parent.afterRollback(child.runRollback)
	return child
}

func (s *Scope) top() *callbacks {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.levels[len(s.levels)-1].cb
}

// AfterCommit registers fn to run once after the outermost transaction
// commits, unless the innermost savepoint open now is rolled back first.
// After the transaction ended, it does nothing.
func (s *Scope) AfterCommit(fn func()) { s.top().afterCommit(fn) }

// AfterRollback registers fn to run once when the work registered with it
// is rolled back: at the rollback of the transaction, or at the ROLLBACK TO
// of the innermost savepoint open now. After the transaction ended, it does
// nothing.
func (s *Scope) AfterRollback(fn func()) { s.top().afterRollback(fn) }

// Savepoint records that the savepoint name was set.
func (s *Scope) Savepoint(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	parent := s.levels[len(s.levels)-1].cb
	s.levels = append(s.levels, level{name: normalizeName(name), cb: s.chained(parent)})
}

// find returns the index of the innermost open savepoint called name, or 0.
func (s *Scope) find(name string) int {
	name = normalizeName(name)
	for i := len(s.levels) - 1; i > 0; i-- {
		if s.levels[i].name == name {
			return i
		}
	}
	return 0
}

// Release records that the savepoint name was released: its work (and that
// of the savepoints set after it) now belongs to the enclosing level. An
// unknown name is ignored.
func (s *Scope) Release(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.find(name); i > 0 && !s.ended {
		s.levels = s.levels[:i]
	}
}

// RollbackTo records that the transaction rolled back to the savepoint
// name: the after-rollback functions registered since it was set run now,
// their after-commit functions never will, and the savepoint stays open for
// what follows. A name the Scope never saw (a savepoint set before the
// Scope observed the transaction) rolls back everything registered so far:
// an event may then be delivered later than it could have been, never
// delivered for a row that is gone.
func (s *Scope) RollbackTo(name string) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	i := s.find(name)
	undone := s.levels[i].cb
	s.levels = s.levels[:i+1]
	if i == 0 {
		s.levels[0].cb = s.newCallbacks()
	} else {
		s.levels[i].cb = s.chained(s.levels[i-1].cb)
	}
	s.mu.Unlock()
	undone.runRollback()
}

// Commit records that the transaction committed and runs the after-commit
// functions that are still live, once.
func (s *Scope) Commit() { s.end(true) }

// Rollback records that the transaction rolled back (or that its commit
// failed) and runs the after-rollback functions that have not run yet, once.
func (s *Scope) Rollback() { s.end(false) }

func (s *Scope) end(committed bool) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	root := s.levels[0].cb
	s.levels = s.levels[:1]
	s.mu.Unlock()
	if committed {
		root.runCommit()
	} else {
		root.runRollback()
	}
}

// Ended reports whether Commit or Rollback was called.
func (s *Scope) Ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// Depth returns how many savepoints the Scope knows to be open.
func (s *Scope) Depth() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.levels) - 1
}

// Observe applies a statement that ran successfully in the transaction:
// SAVEPOINT, RELEASE and ROLLBACK TO change the Scope, anything else is
// ignored. It reports whether the statement was one of those.
func (s *Scope) Observe(query string) bool {
	op, name := ParseSavepoint(query)
	switch op {
	case OpSavepoint:
		s.Savepoint(name)
	case OpRelease:
		s.Release(name)
	case OpRollbackTo:
		s.RollbackTo(name)
	default:
		return false
	}
	return true
}

// normalizeName folds an unquoted savepoint name to lower case (PostgreSQL
// folds unquoted identifiers, MySQL and SQLite compare savepoint names
// without case) and strips the quotes of a quoted one, keeping its case.
func normalizeName(name string) string {
	name = strings.TrimSpace(name)
	if isQuoted(name) {
		return name[1 : len(name)-1]
	}
	return strings.ToLower(name)
}
