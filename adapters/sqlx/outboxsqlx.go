package outboxsqlx

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxtx"
	"github.com/jmoiron/sqlx"
)

// Option configures OpenDB, Connect, NewDb, New and NewTxManager.
type Option func(*options)

type options struct {
	logger *slog.Logger
	txOpts *sql.TxOptions
}

// WithLogger sets the logger that receives panics of transaction callbacks
// (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// WithTxOptions sets the options of the transactions NewTxManager's InTx
// begins (isolation level, read-only); other constructors ignore it.
func WithTxOptions(opts sql.TxOptions) Option {
	return func(o *options) { o.txOpts = &opts }
}

func apply(opts []Option) options {
	var o options
	for _, fn := range opts {
		fn(&o)
	}
	return o
}

// OpenDB opens a database like sqlx.Open, with the connections of the
// registered driver driverName wrapped so that every transaction reports
// its real commit or rollback and its savepoints to the outbox. Transactions
// begun any way on the returned DB (Beginx, MustBegin, BeginTxx, the
// embedded *sql.DB's BeginTx) then run the outbox callbacks when they
// commit. Like sqlx.Open, it does not connect. (Open, as in outboxsql,
// returns the outbox Store of a database.)
func OpenDB(driverName, dsn string, opts ...Option) (*sqlx.DB, error) {
	probe, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, err
	}
	drv := probe.Driver()
	_ = probe.Close()
	var c driver.Connector = dsnConnector{dsn: dsn, drv: drv}
	if dc, ok := drv.(driver.DriverContext); ok {
		if c, err = dc.OpenConnector(dsn); err != nil {
			return nil, err
		}
	}
	return NewDb(c, driverName, opts...), nil
}

// Connect is OpenDB followed by a ping, like sqlx.ConnectContext.
func Connect(ctx context.Context, driverName, dsn string, opts ...Option) (*sqlx.DB, error) {
	db, err := OpenDB(driverName, dsn, opts...)
	if err != nil {
		return nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// NewDb returns a *sqlx.DB over the connector c, wrapped as OpenDB wraps a
// driver; driverName selects sqlx's bind variables (see sqlx.BindType).
// The DB's Driver is c's, so Open detects the dialect as usual.
func NewDb(c driver.Connector, driverName string, opts ...Option) *sqlx.DB {
	o := apply(opts)
	return sqlx.NewDb(sql.OpenDB(&connector{inner: c, logger: o.logger}), driverName)
}

// TxContext implements outbox.TxContext for sqlx: it finds the *sqlx.Tx a
// context carries (WithTx, or TxManager.InTx) and the outbox bookkeeping of that
// transaction. The outbox row is written through the transaction's
// embedded *sql.Tx. The zero value is ready to use, with slog.Default()
// receiving the panics of callbacks of transactions TxManager.InTx tracks
// itself.
type TxContext struct {
	logger *slog.Logger
}

var _ outbox.TxContext = (*TxContext)(nil)

// New returns a TxContext. Its logger option applies to transactions
// TxManager.InTx runs on a database not opened through this package.
func New(opts ...Option) *TxContext {
	return &TxContext{logger: apply(opts).logger}
}

type txKey struct{}

// txEntry is the transaction a context carries.
type txEntry struct {
	tx *sqlx.Tx
	db *sqlx.DB // the database InTx began it on; nil after WithTx
	// own is the Scope InTx keeps for a database whose connections do not
	// report their transactions (not opened through this package).
	own *outboxtx.Scope

	mu    sync.Mutex
	scope *outboxtx.Scope // the connection's Scope, once found
}

// WithTx returns a copy of ctx carrying tx, for the outbox Client (and for
// business code, see FromContext). tx must come from a database opened
// through OpenDB, Connect or NewDb, which report its commit. A context
// carries one sqlx transaction: the innermost WithTx wins.
func WithTx(ctx context.Context, tx *sqlx.Tx) context.Context {
	return context.WithValue(ctx, txKey{}, &txEntry{tx: tx})
}

// FromContext returns the sqlx transaction ctx carries (WithTx or
// TxManager.InTx): the transaction a function run by InTx works in.
func FromContext(ctx context.Context) (*sqlx.Tx, bool) {
	if e := entry(ctx); e != nil {
		return e.tx, true
	}
	return nil, false
}

func entry(ctx context.Context) *txEntry {
	e, _ := ctx.Value(txKey{}).(*txEntry)
	if e == nil || e.tx == nil {
		return nil
	}
	return e
}

// errUntracked explains a transaction whose commit nobody reports.
var errUntracked = fmt.Errorf("%w (outboxsqlx: the transaction in the context does not report its commit: "+
	"open the database with outboxsqlx.OpenDB, Connect or NewDb, or run the transaction with TxManager.InTx)", outbox.ErrNoTransaction)

// errEnded explains a transaction that already committed or rolled back.
var errEnded = fmt.Errorf("%w (outboxsqlx: the transaction in the context already ended)", outbox.ErrNoTransaction)

// Current returns the transaction ctx carries. It fails with an error
// wrapping outbox.ErrNoTransaction when ctx carries none, when the
// transaction's database was not opened through this package (and
// TxManager.InTx did not begin it), or when the transaction already ended.
func (tc *TxContext) Current(ctx context.Context) (outbox.Tx, error) {
	e := entry(ctx)
	if e == nil {
		return nil, fmt.Errorf("%w (outboxsqlx: put the transaction in the context with outboxsqlx.WithTx, or use TxManager.InTx)", outbox.ErrNoTransaction)
	}
	scope, err := e.find(ctx)
	if err != nil {
		return nil, err
	}
	return outboxsql.NewTx(e.tx.Tx, scope), nil
}

// find returns the Scope of the transaction, which is still running; it
// fails with errEnded for a transaction that committed or rolled back.
func (e *txEntry) find(ctx context.Context) (*outboxtx.Scope, error) {
	scope := e.own
	if scope == nil {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.scope == nil {
			found, err := connScope(ctx, e.tx)
			switch {
			case errors.Is(err, sql.ErrTxDone):
				return nil, errEnded
			case err != nil:
				return nil, err
			case found == nil:
				return nil, errUntracked
			}
			e.scope = found
		}
		scope = e.scope
	}
	if scope.Ended() {
		return nil, errEnded
	}
	return scope, nil
}

// ended reports whether the transaction is known to have committed or
// rolled back.
func (e *txEntry) ended(ctx context.Context) bool {
	_, err := e.find(ctx)
	return errors.Is(err, errEnded)
}

// connScope asks tx's connection for the Scope of the transaction running
// on it, with a statement the connection answers itself (the context marks
// it). It returns nil if the connection is not one of this package's: the
// statement, harmless, then really ran.
func connScope(ctx context.Context, tx *sqlx.Tx) (*outboxtx.Scope, error) {
	p := &probe{}
	if _, err := tx.ExecContext(context.WithValue(ctx, probeKey{}, p), "SELECT 1"); err != nil {
		return nil, fmt.Errorf("outboxsqlx: find the transaction's state: %w", err)
	}
	return p.scope, nil
}

var savepointSeq atomic.Uint64

// TxManager runs transactions on one *sqlx.DB, with the InTx of
// outboxsql's and outboxpgx's TxManager. It is also the Client's
// TxContext: it embeds the TxContext that finds the transaction in a
// context.
type TxManager struct {
	*TxContext
	db   *sqlx.DB
	opts *sql.TxOptions
}

// NewTxManager returns the TxManager of db. Its options: WithLogger (the
// panics of callbacks of transactions it tracks itself, on a database not
// opened through this package) and WithTxOptions.
func NewTxManager(db *sqlx.DB, opts ...Option) *TxManager {
	o := apply(opts)
	return &TxManager{TxContext: &TxContext{logger: o.logger}, db: db, opts: o.txOpts}
}

// InTx runs fn in a transaction and passes it a context carrying the
// transaction (as WithTx does; FromContext returns it): committed if fn
// returns nil, rolled back (and fn's error returned) otherwise, rolled
// back and re-panicked if fn panics. After-commit callbacks run once the
// commit succeeded.
//
// Called with a context that already carries a running transaction (of
// the manager's database, or put there by WithTx), InTx nests: fn runs in
// a savepoint of that transaction, released on success and rolled back to
// on failure, so a failed nested fn undoes its own work (and its
// after-rollback callbacks run at once, its after-commit callbacks never)
// only; the outer transaction decides the rest. A transaction in ctx that
// already ended counts as none.
//
// InTx works on any *sqlx.DB. On one not opened through this package, it
// tracks the transactions it begins itself; Beginx and WithTx need OpenDB.
func (m *TxManager) InTx(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	if outer := entry(ctx); outer != nil && (outer.db == nil || outer.db == m.db) && !outer.ended(ctx) {
		return outer.nest(ctx, fn)
	}
	tx, err := m.db.BeginTxx(ctx, m.opts)
	if err != nil {
		return fmt.Errorf("outboxsqlx: begin transaction: %w", err)
	}
	e := &txEntry{tx: tx, db: m.db}
	scope, err := connScope(ctx, tx)
	if err != nil {
		_ = tx.Rollback()
		return err
	}
	if scope == nil {
		e.own = outboxtx.NewScope(m.logger)
	}
	e.scope = scope
	done := false
	defer func() {
		if !done { // fn panicked
			_ = tx.Rollback()
			e.endOwn(false)
		}
	}()
	err = fn(context.WithValue(ctx, txKey{}, e))
	done = true
	if err != nil {
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			err = errors.Join(err, fmt.Errorf("outboxsqlx: rollback: %w", rbErr))
		}
		e.endOwn(false)
		return err
	}
	if err := tx.Commit(); err != nil {
		e.endOwn(false)
		return fmt.Errorf("outboxsqlx: commit: %w", err)
	}
	e.endOwn(true)
	return nil
}

// endOwn ends the Scope InTx keeps itself, if any.
func (e *txEntry) endOwn(committed bool) {
	switch {
	case e.own == nil:
	case committed:
		e.own.Commit()
	default:
		e.own.Rollback()
	}
}

// nest runs fn in a savepoint of e's transaction, as outboxsql's TxManager
// nests: the savepoint is released when fn succeeds; when fn fails or
// panics, the transaction rolls back to it and then releases it, so the
// Scope drops the savepoint's callbacks and its level at once.
func (e *txEntry) nest(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	name := "outbox_sp" + strconv.FormatUint(savepointSeq.Add(1), 10)
	if err := e.exec(ctx, "SAVEPOINT "+name); err != nil {
		return fmt.Errorf("outboxsqlx: nested transaction: %w", err)
	}
	rollback := func() error {
		// fn may have failed because ctx was canceled: undo its work anyway.
		ctx := context.WithoutCancel(ctx)
		if err := e.exec(ctx, "ROLLBACK TO SAVEPOINT "+name); err != nil {
			return err
		}
		return e.exec(ctx, "RELEASE SAVEPOINT "+name)
	}
	done := false
	defer func() {
		if !done { // fn panicked; the outermost transaction rolls back
			_ = rollback()
		}
	}()
	err = fn(ctx)
	done = true
	if err != nil {
		if rbErr := rollback(); rbErr != nil {
			err = errors.Join(err, fmt.Errorf("outboxsqlx: roll back nested transaction: %w", rbErr))
		}
		return err
	}
	if err := e.exec(ctx, "RELEASE SAVEPOINT "+name); err != nil {
		return fmt.Errorf("outboxsqlx: release nested transaction: %w", err)
	}
	return nil
}

// exec runs a savepoint statement and reports it to the Scope InTx keeps
// itself, if any (a reporting connection observes it on its own).
func (e *txEntry) exec(ctx context.Context, stmt string) error {
	if _, err := e.tx.ExecContext(ctx, stmt); err != nil {
		return err
	}
	if e.own != nil {
		e.own.Observe(stmt)
	}
	return nil
}
