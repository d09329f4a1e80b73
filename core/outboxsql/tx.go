package outboxsql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxtx"
	"github.com/go-outbox/outbox/core/sqlstore"
)

var _ outbox.TxContext = (*TxManager)(nil)

// NewTx returns the outbox.Tx of a database/sql transaction: the Store
// inserts through ex, and scope runs the callbacks. TxContexts of ORMs and
// drivers built on database/sql (the GORM, bun and sqlx adapters) return
// one from Current.
func NewTx(ex Executor, scope *outboxtx.Scope) outbox.Tx { return &txHandle{Scope: scope, ex: ex} }

// txHandle is a sqlstore.Tx over a database/sql executor.
type txHandle struct {
	*outboxtx.Scope
	ex Executor
}

func (t *txHandle) Conn() sqlstore.Conn { return conn{t.ex} }

// TxManager runs functions in database/sql transactions and carries the
// running transaction in the context, so that the outbox finds it: it
// implements outbox.TxContext for a plain *sql.DB.
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

// sqlTx is a running transaction.
type sqlTx struct {
	txHandle
	tx         *sql.Tx
	savepoints atomic.Int64 // savepoints set so far, for unique names
}

func (m *TxManager) current(ctx context.Context) *sqlTx {
	t, _ := ctx.Value(txKey{m.db}).(*sqlTx)
	if t == nil || t.Ended() {
		return nil
	}
	return t
}

// Current returns the transaction InTx carries in ctx. With none, or when
// it has already committed or rolled back, it returns an error wrapping
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
// *sql.DB, InTx nests the way GORM, bun and pgx do: fn runs in a savepoint.
// If fn fails, the work since the savepoint is rolled back — events written
// there are never delivered — and fn's error is returned to the enclosing
// fn, which decides whether the outer transaction still commits.
// Callbacks run once, after the outermost transaction commits.
func (m *TxManager) InTx(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	if outer := m.current(ctx); outer != nil {
		return outer.inSavepoint(ctx, fn)
	}
	tx, err := m.db.BeginTx(ctx, m.opts)
	if err != nil {
		return fmt.Errorf("outboxsql: begin transaction: %w", err)
	}
	t := &sqlTx{tx: tx, txHandle: txHandle{Scope: outboxtx.NewScope(m.logger), ex: tx}}
	done := false
	defer func() {
		if done {
			return
		}
		// fn panicked: roll back, then re-raise.
		_ = tx.Rollback()
		t.Rollback()
	}()
	err = fn(context.WithValue(ctx, txKey{m.db}, t))
	done = true
	if err != nil {
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			err = errors.Join(err, fmt.Errorf("outboxsql: rollback: %w", rbErr))
		}
		t.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		t.Rollback()
		return fmt.Errorf("outboxsql: commit: %w", err)
	}
	t.Commit()
	return nil
}

// inSavepoint runs fn in a new savepoint of t.
func (t *sqlTx) inSavepoint(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	name := "outbox_sp_" + strconv.FormatInt(t.savepoints.Add(1), 10)
	if _, err := t.tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return fmt.Errorf("outboxsql: savepoint: %w", err)
	}
	t.Savepoint(name)
	rollback := func() error {
		// The savepoint's rows are gone: their callbacks learn it now.
		_, rbErr := t.tx.ExecContext(context.WithoutCancel(ctx), "ROLLBACK TO SAVEPOINT "+name)
		t.RollbackTo(name)
		t.Release(name)
		return rbErr
	}
	done := false
	defer func() {
		if !done {
			_ = rollback() // fn panicked; the outermost InTx rolls back
		}
	}()
	err = fn(ctx)
	done = true
	if err != nil {
		if rbErr := rollback(); rbErr != nil {
			err = errors.Join(err, fmt.Errorf("outboxsql: rollback to savepoint: %w", rbErr))
		}
		return err
	}
	if _, err := t.tx.ExecContext(ctx, "RELEASE SAVEPOINT "+name); err != nil {
		return fmt.Errorf("outboxsql: release savepoint: %w", err)
	}
	t.Release(name)
	return nil
}
