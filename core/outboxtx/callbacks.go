package outboxtx

import (
	"log/slog"
	"runtime/debug"
	"sync"
)

// callbacks collects after-commit and after-rollback functions for one
// level of a transaction and runs one of the two lists exactly once. It is
// safe for concurrent use.
type callbacks struct {
	mu       sync.Mutex
	commit   []func()
	rollback []func()
	done     bool
	logger   *slog.Logger
}

func (c *callbacks) afterCommit(fn func()) {
	c.mu.Lock()
	if !c.done {
		c.commit = append(c.commit, fn)
	}
	c.mu.Unlock()
}

func (c *callbacks) afterRollback(fn func()) {
	c.mu.Lock()
	if !c.done {
		c.rollback = append(c.rollback, fn)
	}
	c.mu.Unlock()
}

func (c *callbacks) runCommit()   { c.run(true) }
func (c *callbacks) runRollback() { c.run(false) }

// run runs the commit or the rollback functions in registration order,
// once; later calls do nothing. A panicking function is logged and the
// others still run.
func (c *callbacks) run(committed bool) {
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
		c.safeCall(fn)
	}
}

func (c *callbacks) safeCall(fn func()) {
	defer func() {
		if r := recover(); r != nil {
			l := c.logger
			if l == nil {
				l = slog.Default()
			}
			l.Error("outbox: transaction callback panicked", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	fn()
}
