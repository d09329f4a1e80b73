package outboxsql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	outbox "github.com/go-outbox/outbox/core"
)

var _ outbox.TxContext = (*TxManager)(nil)

// ErrRollbackOnly is returned by the outermost InTx when its function
// succeeded but a nested InTx failed (returned an error or panicked) and the
// error was not propagated: the transaction is rolled back rather than
// committing half of the work.
var ErrRollbackOnly = errors.New("outboxsql: transaction rolled back: a nested InTx failed")

// TxManager runs functions in database/sql transactions and carries the
// running transaction in the context, so that the outbox Writer finds it:
// it implements outbox.TxContext for a plain *sql.DB.
type TxManager struct {
	db     *sql.DB
	opts   *sql.TxOptions
	logger *slog.Logger
}

// TxOption configures a TxManager.
type TxOption func(*TxManager)

// WithTxOptions sets the isolation level and read-only flag of the
// transactions InTx begins.
func WithTxOptions(opts sql.TxOptions) TxOption {
	return func(m *TxManager) { m.opts = &opts }
}

// WithTxLogger sets the logger that receives panics of transaction
// callbacks (default slog.Default()).
func WithTxLogger(l *slog.Logger) TxOption {
	return func(m *TxManager) { m.logger = l }
}

// NewTxManager returns a TxManager for db.
func NewTxManager(db *sql.DB, opts ...TxOption) *TxManager {
	m := &TxManager{db: db}
	for _, o := range opts {
		o(m)
	}
	return m
}

// txKey keys the running transaction of one *sql.DB in a context, so that
// transactions of several databases can be carried side by side.
type txKey struct{ db *sql.DB }

// sqlTx is a running transaction: outbox.Tx plus the nesting state.
type sqlTx struct {
	tx           *sql.Tx
	cb           outbox.Callbacks
	rollbackOnly atomic.Bool
}

func (t *sqlTx) Executor() outbox.Executor { return t.tx }
func (t *sqlTx) AfterCommit(fn func())     { t.cb.AfterCommit(fn) }
func (t *sqlTx) AfterRollback(fn func())   { t.cb.AfterRollback(fn) }

func (m *TxManager) current(ctx context.Context) *sqlTx {
	t, _ := ctx.Value(txKey{m.db}).(*sqlTx)
	return t
}

// Current returns the transaction InTx carries in ctx, or an error wrapping
// outbox.ErrNoTransaction.
func (m *TxManager) Current(ctx context.Context) (outbox.Tx, error) {
	if t := m.current(ctx); t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("%w (outboxsql: run the write inside TxManager.InTx)", outbox.ErrNoTransaction)
}

// Tx returns the *sql.Tx InTx carries in ctx, for business code that writes
// in the same transaction as the outbox.
func (m *TxManager) Tx(ctx context.Context) (*sql.Tx, bool) {
	if t := m.current(ctx); t != nil {
		return t.tx, true
	}
	return nil, false
}

// InTx runs fn in a transaction carried by the context fn receives. If fn
// returns nil the transaction commits and the after-commit callbacks run;
// otherwise it rolls back, the after-rollback callbacks run, and fn's error
// is returned. A panic in fn rolls back and is re-raised.
//
// Called with a context that already carries a transaction of the same
// *sql.DB, InTx joins it: fn runs in the outer transaction, and callbacks
// run once, after the outermost InTx ends. If a nested fn fails, its error
// is returned to the enclosing fn; should that one still return nil, the
// whole transaction is rolled back and InTx returns ErrRollbackOnly.
func (m *TxManager) InTx(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	if outer := m.current(ctx); outer != nil {
		ok := false
		defer func() {
			if !ok {
				outer.rollbackOnly.Store(true)
			}
		}()
		err = fn(ctx)
		ok = err == nil
		return err
	}
	tx, err := m.db.BeginTx(ctx, m.opts)
	if err != nil {
		return fmt.Errorf("outboxsql: begin transaction: %w", err)
	}
	t := &sqlTx{tx: tx}
	t.cb.Logger = m.logger
	done := false
	defer func() {
		if done {
			return
		}
		// fn panicked: roll back, then re-raise.
		_ = tx.Rollback()
		t.cb.RunRollback()
	}()
	err = fn(context.WithValue(ctx, txKey{m.db}, t))
	done = true
	if err == nil && t.rollbackOnly.Load() {
		err = ErrRollbackOnly
	}
	if err != nil {
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			err = errors.Join(err, fmt.Errorf("outboxsql: rollback: %w", rbErr))
		}
		t.cb.RunRollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		t.cb.RunRollback()
		return fmt.Errorf("outboxsql: commit: %w", err)
	}
	t.cb.RunCommit()
	return nil
}
