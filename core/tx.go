package outbox

import (
	"context"
	"database/sql"
	"log/slog"
	"runtime/debug"
	"sync"
)

// Executor runs SQL. *sql.DB, *sql.Tx, *sql.Conn, sqlx's Tx and bun's Tx all
// satisfy it. Store methods take the Executor they run on: the business
// transaction for inserts, a pool for everything else.
type Executor interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Tx is a running database transaction as the outbox sees it: where to
// write, and how to be told when it ends.
type Tx interface {
	// Executor returns the executor bound to the transaction.
	Executor() Executor
	// AfterCommit registers fn to run once, after the outermost transaction
	// really commits (not when a savepoint is released). Panics in fn are
	// recovered and logged.
	AfterCommit(fn func())
	// AfterRollback registers fn to run once, after the transaction rolls back.
	AfterRollback(fn func())
}

// TxContext finds the transaction carried by a context, the way a Java
// framework would use a thread-local. Adapters for database/sql, GORM, bun
// and sqlx implement it.
type TxContext interface {
	// Current returns the transaction active in ctx, or an error wrapping
	// ErrNoTransaction.
	Current(ctx context.Context) (Tx, error)
}

// Callbacks collects after-commit and after-rollback functions for one
// transaction and runs them exactly once. TxContext implementations embed or
// hold one; the zero value is ready to use and safe for concurrent use.
type Callbacks struct {
	mu       sync.Mutex
	commit   []func()
	rollback []func()
	done     bool
	// Logger receives recovered panics; nil means slog.Default().
	Logger *slog.Logger
}

// AfterCommit registers fn to run on RunCommit. After the callbacks have run,
// registering is a no-op.
func (c *Callbacks) AfterCommit(fn func()) {
	c.mu.Lock()
	if !c.done {
		c.commit = append(c.commit, fn)
	}
	c.mu.Unlock()
}

// AfterRollback registers fn to run on RunRollback.
func (c *Callbacks) AfterRollback(fn func()) {
	c.mu.Lock()
	if !c.done {
		c.rollback = append(c.rollback, fn)
	}
	c.mu.Unlock()
}

// RunCommit runs the after-commit functions in registration order, once;
// later calls of RunCommit or RunRollback do nothing.
func (c *Callbacks) RunCommit() { c.run(true) }

// RunRollback runs the after-rollback functions in registration order, once.
func (c *Callbacks) RunRollback() { c.run(false) }

func (c *Callbacks) run(committed bool) {
	c.mu.Lock()
	if c.done {
		c.mu.Unlock()
		return
	}
	c.done = true
	fns := c.rollback
	if committed {
		fns = c.commit
	}
	c.commit, c.rollback = nil, nil
	c.mu.Unlock()
	for _, fn := range fns {
		safeCall(c.Logger, "transaction callback", fn)
	}
}

// safeCall runs fn, logging instead of propagating a panic.
func safeCall(logger *slog.Logger, what string, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			loggerOr(logger).Error("outbox: "+what+" panicked", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	fn()
}

func loggerOr(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}
