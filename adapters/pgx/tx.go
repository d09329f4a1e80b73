package outboxpgx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxtx"
	"github.com/go-outbox/outbox/core/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

var (
	_ outbox.TxContext = (*TxManager)(nil)
	_ sqlstore.Tx      = (*level)(nil)
	_ pgx.Tx           = (*businessTx)(nil)
)

// TxManager runs functions in pgx transactions and carries the running
// transaction in the context, so that the outbox finds it: it implements
// outbox.TxContext for a *pgxpool.Pool.
type TxManager struct {
	pool   *pgxpool.Pool
	opts   pgx.TxOptions
	logger *slog.Logger
}

// TxOption configures a TxManager.
type TxOption func(*TxManager)

// WithTxOptions sets the isolation level, access mode and deferrable mode
// of the transactions InTx begins (default: the server's defaults).
func WithTxOptions(opts pgx.TxOptions) TxOption {
	return func(m *TxManager) { m.opts = opts }
}

// WithTxLogger sets the logger that receives panics of transaction
// callbacks (default slog.Default()).
func WithTxLogger(l *slog.Logger) TxOption {
	return func(m *TxManager) { m.logger = l }
}

// NewTxManager returns a TxManager that begins its transactions on pool.
func NewTxManager(pool *pgxpool.Pool, opts ...TxOption) *TxManager {
	m := &TxManager{pool: pool}
	for _, o := range opts {
		o(m)
	}
	return m
}

// txKey keys the running transaction of one pool in a context, so that
// transactions of several databases can be carried side by side. Every
// TxManager of the same pool finds it.
type txKey struct{ pool *pgxpool.Pool }

// errManaged is returned by Commit and Rollback of the transactions that
// InTx begins: InTx ends them when fn returns.
var errManaged = errors.New("outboxpgx: this transaction is ended by TxManager.InTx when its function returns: return nil to commit or an error to roll back")

// level is one level of a running transaction: the transaction itself or
// one of its savepoints. It is the outbox.Tx (and sqlstore.Tx) that Current
// returns. All levels of a transaction share one Scope, which tracks the
// savepoints.
type level struct {
	scope  *outboxtx.Scope
	tx     pgx.Tx
	parent *level        // nil for the transaction itself
	name   string        // the savepoint's name in the Scope; "" for the transaction
	seq    *atomic.Int64 // savepoints set so far in the transaction, for unique names
	inTx   bool          // begun and ended by InTx, not by business code
	ended  atomic.Bool
}

// AfterCommit registers fn to run once after the transaction commits,
// unless the innermost savepoint open now is rolled back first.
func (l *level) AfterCommit(fn func()) { l.scope.AfterCommit(fn) }

// AfterRollback registers fn to run once when the work registered with it
// is rolled back: with the transaction, or with the innermost savepoint
// open now.
func (l *level) AfterRollback(fn func()) { l.scope.AfterRollback(fn) }

// Conn returns the connection of the transaction, for Store.Insert; it
// copies large batches with pgx's CopyFrom.
func (l *level) Conn() sqlstore.Conn { return conn{l.tx} }

// end records that the transaction committed or rolled back and runs its
// callbacks.
func (l *level) end(committed bool) {
	l.ended.Store(true)
	if committed {
		l.scope.Commit()
	} else {
		l.scope.Rollback()
	}
}

// savepoint sets a savepoint in l (pgx's nested transaction) and returns
// its level.
func (l *level) savepoint(ctx context.Context) (*level, error) {
	sp, err := l.tx.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("outboxpgx: savepoint: %w", err)
	}
	in := &level{scope: l.scope, tx: sp, parent: l, seq: l.seq, name: "outbox_sp_" + strconv.FormatInt(l.seq.Add(1), 10)}
	l.scope.Savepoint(in.name)
	return in, nil
}

// release releases the savepoint l, keeping its work in the enclosing
// level. If that fails the transaction cannot commit the savepoint's work
// (PostgreSQL aborts a transaction at any error; a broken connection loses
// it), so its callbacks learn that it is rolled back.
func (l *level) release(ctx context.Context) error {
	err := l.tx.Commit(ctx)
	l.ended.Store(true)
	if err != nil {
		l.scope.RollbackTo(l.name)
	}
	l.scope.Release(l.name)
	return err
}

// rollback rolls back to the savepoint l and ends it. Its rows are gone:
// its callbacks learn it now, even if the transaction commits later.
func (l *level) rollback(ctx context.Context) error {
	err := l.tx.Rollback(context.WithoutCancel(ctx))
	l.ended.Store(true)
	l.scope.RollbackTo(l.name)
	l.scope.Release(l.name)
	return err
}

// current returns the innermost live level carried by ctx, or nil.
func (m *TxManager) current(ctx context.Context) *level {
	l, _ := ctx.Value(txKey{m.pool}).(*level)
	for l != nil && l.ended.Load() {
		l = l.parent // a savepoint that ended: its enclosing level goes on
	}
	if l == nil || l.scope.Ended() {
		return nil
	}
	return l
}

// Current returns the transaction InTx carries in ctx, an outbox.Tx that
// implements sqlstore.Tx. With none, or when it has already committed or
// rolled back, it returns an error wrapping outbox.ErrNoTransaction.
func (m *TxManager) Current(ctx context.Context) (outbox.Tx, error) {
	if l := m.current(ctx); l != nil {
		return l, nil
	}
	return nil, fmt.Errorf("%w (outboxpgx: run the write inside TxManager.InTx)", outbox.ErrNoTransaction)
}

// Tx returns the transaction InTx carries in ctx, for business code that
// writes in the same transaction as the outbox; false when there is none
// or it has ended.
//
// Its Begin sets a savepoint (pgx's nested transaction) that the outbox
// tracks: rolling it back also drops the events written in it, as a failing
// nested InTx does. SAVEPOINT, RELEASE and ROLLBACK TO statements run
// through its Exec are tracked too. Its own Commit and Rollback return an
// error: InTx ends the transaction when fn returns.
func (m *TxManager) Tx(ctx context.Context) (pgx.Tx, bool) {
	if l := m.current(ctx); l != nil {
		return &businessTx{Tx: l.tx, l: l}, true
	}
	return nil, false
}

// InTx runs fn in a transaction carried by the context fn receives. If fn
// returns nil the transaction commits and the after-commit callbacks run;
// otherwise it rolls back, the after-rollback callbacks run, and fn's error
// is returned. A panic in fn rolls back and is re-raised.
//
// Called with a context that already carries a transaction of the same
// pool, InTx nests the way pgx does: fn runs in a savepoint. If fn fails,
// the work since the savepoint is rolled back — events written there are
// never delivered — and fn's error is returned to the enclosing fn, which
// decides whether the outer transaction still commits. Callbacks run once,
// after the outermost transaction commits.
func (m *TxManager) InTx(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	if m == nil || m.pool == nil {
		return fmt.Errorf("%w: outboxpgx: TxManager without a pool (use NewTxManager)", outbox.ErrInvalidConfig)
	}
	if outer := m.current(ctx); outer != nil {
		return m.inSavepoint(ctx, outer, fn)
	}
	tx, err := m.pool.BeginTx(ctx, m.opts)
	if err != nil {
		return fmt.Errorf("outboxpgx: begin transaction: %w", err)
	}
	root := &level{scope: outboxtx.NewScope(m.logger), tx: tx, seq: new(atomic.Int64), inTx: true}
	done := false
	defer func() {
		if done {
			return
		}
		// fn panicked: roll back, then re-raise.
		_ = tx.Rollback(context.WithoutCancel(ctx))
		root.end(false)
	}()
	err = fn(context.WithValue(ctx, txKey{m.pool}, root))
	done = true
	if err != nil {
		if rbErr := tx.Rollback(context.WithoutCancel(ctx)); rbErr != nil && !errors.Is(rbErr, pgx.ErrTxClosed) {
			err = errors.Join(err, fmt.Errorf("outboxpgx: rollback: %w", rbErr))
		}
		root.end(false)
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		root.end(false)
		return fmt.Errorf("outboxpgx: commit: %w", err)
	}
	root.end(true)
	return nil
}

// inSavepoint runs fn in a new savepoint of outer.
func (m *TxManager) inSavepoint(ctx context.Context, outer *level, fn func(ctx context.Context) error) (err error) {
	sp, err := outer.savepoint(ctx)
	if err != nil {
		return err
	}
	sp.inTx = true
	done := false
	defer func() {
		if !done {
			_ = sp.rollback(ctx) // fn panicked; the outermost InTx rolls back
		}
	}()
	err = fn(context.WithValue(ctx, txKey{m.pool}, sp))
	done = true
	if err != nil {
		if rbErr := sp.rollback(ctx); rbErr != nil {
			err = errors.Join(err, fmt.Errorf("outboxpgx: rollback to savepoint: %w", rbErr))
		}
		return err
	}
	if err := sp.release(ctx); err != nil {
		return fmt.Errorf("outboxpgx: release savepoint: %w", err)
	}
	return nil
}

// businessTx is the pgx.Tx that TxManager.Tx returns: a level's pgx.Tx
// whose savepoints the level's Scope follows.
type businessTx struct {
	pgx.Tx
	l *level
}

// Begin sets a savepoint that the outbox tracks.
func (b *businessTx) Begin(ctx context.Context) (pgx.Tx, error) {
	in, err := b.l.savepoint(ctx)
	if err != nil {
		return nil, err
	}
	return &businessTx{Tx: in.tx, l: in}, nil
}

// Commit releases a savepoint set by Begin. The transactions of InTx are
// not committed here.
func (b *businessTx) Commit(ctx context.Context) error {
	if b.l.inTx {
		return errManaged
	}
	if b.l.ended.Load() {
		return pgx.ErrTxClosed
	}
	return b.l.release(ctx)
}

// Rollback rolls back to a savepoint set by Begin; the events written since
// are never delivered. The transactions of InTx are not rolled back here.
func (b *businessTx) Rollback(ctx context.Context) error {
	if b.l.inTx {
		return errManaged
	}
	if b.l.ended.Load() {
		return pgx.ErrTxClosed
	}
	return b.l.rollback(ctx)
}

// Exec runs a statement; savepoint statements are reported to the Scope.
func (b *businessTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := b.Tx.Exec(ctx, sql, args...)
	if err == nil {
		b.l.scope.Observe(sql)
	}
	return tag, err
}
