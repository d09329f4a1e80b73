package outboxgorm

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"gorm.io/gorm"
)

// PluginName is the name under which the TxContext is registered as a GORM
// plugin (gorm.DB.Plugins).
const PluginName = "outboxgorm"

// TxContext finds the GORM transaction carried by a context (see WithTx)
// and implements outbox.TxContext: the outbox row is written through the
// transaction's own connection (tx.Statement.ConnPool), and after-commit
// callbacks run once the outermost transaction really commits.
//
// It is also a gorm.Plugin: installing it (New does) wraps the *gorm.DB's
// connection pool, so every transaction GORM begins from then on reports its
// commit, rollback and savepoints, whichever GORM API begins it. The zero
// value is ready to use, for example in gorm.Config.Plugins; callback panics
// then go to slog.Default().
type TxContext struct {
	logger *slog.Logger
}

var (
	_ outbox.TxContext = (*TxContext)(nil)
	_ gorm.Plugin      = (*TxContext)(nil)
)

// Option configures a TxContext.
type Option func(*TxContext)

// WithLogger sets the logger that receives panics of transaction callbacks
// (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(tc *TxContext) { tc.logger = l }
}

// New installs the outbox plugin on db and returns its TxContext. Install
// it right after gorm.Open, before any transaction begins and before
// sessions are derived from db: sessions derived earlier keep the
// unwrapped pool. Calling New again on the same db returns the installed
// TxContext (and ignores opts).
func New(db *gorm.DB, opts ...Option) (*TxContext, error) {
	if db == nil || db.Config == nil {
		return nil, fmt.Errorf("%w: outboxgorm: nil *gorm.DB", outbox.ErrInvalidConfig)
	}
	if p, ok := db.Plugins[PluginName]; ok {
		if tc, ok := p.(*TxContext); ok {
			return tc, nil
		}
		return nil, fmt.Errorf("%w: outboxgorm: another plugin is registered as %q", outbox.ErrInvalidConfig, PluginName)
	}
	tc := &TxContext{}
	for _, o := range opts {
		o(tc)
	}
	if err := db.Use(tc); err != nil {
		return nil, fmt.Errorf("outboxgorm: install plugin: %w", err)
	}
	return tc, nil
}

// Name returns PluginName.
func (tc *TxContext) Name() string { return PluginName }

// Initialize wraps db's connection pool. GORM calls it when the plugin is
// installed, by db.Use or through gorm.Config.Plugins.
func (tc *TxContext) Initialize(db *gorm.DB) error {
	if db.ConnPool == nil {
		return fmt.Errorf("%w: outboxgorm: the *gorm.DB has no connection pool", outbox.ErrInvalidConfig)
	}
	if _, ok := db.ConnPool.(*pool); ok {
		return nil
	}
	p := &pool{inner: db.ConnPool, tc: tc}
	if db.Statement != nil && db.Statement.ConnPool == db.ConnPool {
		db.Statement.ConnPool = p
	}
	db.ConnPool = p
	return nil
}

type txKey struct{}

// WithTx returns a copy of ctx carrying the GORM transaction tx, for the
// outbox Client (and for business code, see FromContext). tx is the
// *gorm.DB that db.Transaction passes to its function, or that db.Begin
// returned; a nested transaction's tx works the same. A context carries one
// GORM transaction: the innermost WithTx wins.
func WithTx(ctx context.Context, tx *gorm.DB) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

// FromContext returns the GORM transaction WithTx put in ctx.
func FromContext(ctx context.Context) (*gorm.DB, bool) {
	tx, ok := ctx.Value(txKey{}).(*gorm.DB)
	return tx, ok && tx != nil
}

// Current returns the transaction WithTx put in ctx. It fails with an error
// wrapping outbox.ErrNoTransaction when ctx carries none, when the *gorm.DB
// it carries is not in a transaction, when the transaction was not begun
// through a pool this TxContext wraps, or when it already ended.
func (tc *TxContext) Current(ctx context.Context) (outbox.Tx, error) {
	db, ok := FromContext(ctx)
	if !ok {
		return nil, fmt.Errorf("%w (outboxgorm: put the transaction in the context with outboxgorm.WithTx)", outbox.ErrNoTransaction)
	}
	t, err := tc.txConn(db)
	if err != nil {
		return nil, err
	}
	return outboxsql.NewTx(t, t.scope), nil
}

func (tc *TxContext) txConn(db *gorm.DB) (*txConn, error) {
	if db.Statement == nil {
		return nil, fmt.Errorf("%w (outboxgorm: the *gorm.DB in the context is not in a transaction)", outbox.ErrNoTransaction)
	}
	conn := db.Statement.ConnPool
	if p, ok := conn.(*gorm.PreparedStmtTX); ok {
		conn = p.Tx
	}
	t, ok := conn.(*txConn)
	switch {
	case !ok:
		if _, inTx := conn.(gorm.TxCommitter); inTx {
			return nil, fmt.Errorf("%w (outboxgorm: the transaction in the context was not begun through the outboxgorm plugin: "+
				"call outboxgorm.New on the *gorm.DB before beginning transactions, and do not begin them inside db.Connection)", outbox.ErrNoTransaction)
		}
		return nil, fmt.Errorf("%w (outboxgorm: the *gorm.DB in the context is not in a transaction)", outbox.ErrNoTransaction)
	case t.pool.tc != tc:
		return nil, fmt.Errorf("%w (outboxgorm: the transaction in the context belongs to a database of another TxContext)", outbox.ErrNoTransaction)
	case t.scope.Ended():
		return nil, fmt.Errorf("%w (outboxgorm: the transaction in the context already ended)", outbox.ErrNoTransaction)
	}
	return t, nil
}

// Transaction runs fn in GORM's own db.Transaction and passes it a context
// that carries the transaction (WithTx). If ctx already carries a running
// transaction of the same database, fn runs in a nested transaction of it
// (a savepoint), as tx.Transaction would; a transaction that already ended
// counts as none. fn's error, or a panic, rolls back; GORM's semantics
// apply unchanged.
func Transaction(ctx context.Context, db *gorm.DB, fn func(ctx context.Context, tx *gorm.DB) error, opts ...*sql.TxOptions) error {
	base := db
	if outer, ok := FromContext(ctx); ok && sameDatabase(outer, db) && running(outer) {
		base = outer
	}
	return base.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return fn(WithTx(ctx, tx), tx)
	}, opts...)
}

// running reports whether db is in a transaction that has not ended.
func running(db *gorm.DB) bool {
	conn := db.Statement.ConnPool
	if p, ok := conn.(*gorm.PreparedStmtTX); ok {
		conn = p.Tx
	}
	if t, ok := conn.(*txConn); ok {
		return !t.scope.Ended()
	}
	_, inTx := conn.(gorm.TxCommitter)
	return inTx
}

func sameDatabase(a, b *gorm.DB) bool {
	if a.Statement == nil || b.Statement == nil {
		return false
	}
	da, errA := a.DB()
	db, errB := b.DB()
	return errA == nil && errB == nil && da == db
}
