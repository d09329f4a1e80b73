package outboxbun

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxtx"
	"github.com/uptrace/bun"
)

// TxContext implements outbox.TxContext for bun. It is also a
// bun.QueryHook: installed on a *bun.DB (db.WithQueryHook(tc)), it sees
// every transaction that DB begins, commits or rolls back, and every
// savepoint of its nested transactions, and runs the outbox callbacks when
// the outermost transaction really commits or rolls back.
//
// The hook attaches the transaction's bookkeeping to the context bun keeps
// for the transaction — the context that db.RunInTx passes to its function.
// The outbox Client then needs the bun.Tx itself, which WithTx adds. The
// zero value is ready to use; callback panics then go to slog.Default().
type TxContext struct {
	logger *slog.Logger
}

var (
	_ outbox.TxContext = (*TxContext)(nil)
	_ bun.QueryHook    = (*TxContext)(nil)
)

// Option configures a TxContext.
type Option func(*TxContext)

// WithLogger sets the logger that receives panics of transaction callbacks
// (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(tc *TxContext) { tc.logger = l }
}

// New returns a TxContext. Install it on the database with
// db = db.WithQueryHook(tc) before beginning transactions.
func New(opts ...Option) *TxContext {
	tc := &TxContext{}
	for _, o := range opts {
		o(tc)
	}
	return tc
}

// stateKey keys a transaction's state in a context, per TxContext, so that
// transactions of several databases can be carried side by side.
type stateKey struct{ tc *TxContext }

// txState is what the hook knows of one transaction.
type txState struct {
	scope *outboxtx.Scope
	mu    sync.Mutex
	begun bool    // the hook saw its BEGIN
	tx    *sql.Tx // the transaction, once Current saw it
}

// adopt marks a state created by TxContext.BeginTx as begun; it reports
// false for a state whose transaction had already begun.
func (s *txState) adopt() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.begun {
		return false
	}
	s.begun = true
	return true
}

func (s *txState) isBegun() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.begun
}

// bind ties the state to tx on first use and reports whether tx is the
// transaction it belongs to.
func (s *txState) bind(tx *sql.Tx) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tx == nil {
		s.tx = tx
	}
	return s.tx == tx
}

func (tc *TxContext) state(ctx context.Context) *txState {
	st, _ := ctx.Value(stateKey{tc}).(*txState)
	return st
}

// BeforeQuery attaches a new transaction's state to the context bun keeps
// for it, at BEGIN.
func (tc *TxContext) BeforeQuery(ctx context.Context, e *bun.QueryEvent) context.Context {
	if e.IQuery != nil || e.Query != "BEGIN" {
		return ctx
	}
	if st := tc.state(ctx); st != nil && st.adopt() {
		return ctx // prepared by TxContext.BeginTx
	}
	return context.WithValue(ctx, stateKey{tc}, &txState{scope: outboxtx.NewScope(tc.logger), begun: true})
}

// AfterQuery reports COMMIT, ROLLBACK and savepoint statements to the
// transaction's Scope.
func (tc *TxContext) AfterQuery(ctx context.Context, e *bun.QueryEvent) {
	if e.IQuery != nil {
		return // a query builder: never a transaction statement
	}
	st := tc.state(ctx)
	if st == nil {
		return
	}
	switch e.Query {
	case "BEGIN":
	case "COMMIT":
		if e.Err != nil {
			st.scope.Rollback()
			return
		}
		st.scope.Commit()
	case "ROLLBACK":
		st.scope.Rollback()
	default:
		if e.Err == nil {
			st.scope.Observe(e.Query)
		}
	}
}

type txKey struct{}

// WithTx returns a copy of ctx carrying the bun transaction tx, for the
// outbox Client (and for business code, see FromContext). ctx must be the
// context of the transaction: the one db.RunInTx (or tx.RunInTx) passes to
// its function, or the one TxContext.BeginTx returns. A context carries one
// bun transaction: the innermost WithTx wins.
func WithTx(ctx context.Context, tx bun.Tx) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

// FromContext returns the bun transaction WithTx put in ctx.
func FromContext(ctx context.Context) (bun.Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(bun.Tx)
	return tx, ok && tx.Tx != nil
}

// Current returns the transaction WithTx put in ctx. The outbox row is
// written through the transaction's *sql.Tx (bun.Tx embeds it): bun.Tx's own
// Exec methods would rewrite the store's driver placeholders with bun's "?"
// formatting. Current fails with an error wrapping outbox.ErrNoTransaction
// when ctx carries no transaction, when the hook did not see the
// transaction begin (hook not installed, or ctx not the transaction's
// context), when ctx belongs to another transaction, or when the
// transaction already ended.
func (tc *TxContext) Current(ctx context.Context) (outbox.Tx, error) {
	tx, ok := FromContext(ctx)
	if !ok {
		return nil, fmt.Errorf("%w (outboxbun: put the transaction in the context with outboxbun.WithTx)", outbox.ErrNoTransaction)
	}
	st := tc.state(ctx)
	switch {
	case st == nil || !st.isBegun():
		return nil, fmt.Errorf("%w (outboxbun: the context is not the context of a transaction the outboxbun hook saw begin: "+
			"install the hook with db.WithQueryHook(tc), and use the context db.RunInTx passes or the one TxContext.BeginTx returns)", outbox.ErrNoTransaction)
	case !st.bind(tx.Tx):
		return nil, fmt.Errorf("%w (outboxbun: the transaction in the context is not the one its context began)", outbox.ErrNoTransaction)
	case st.scope.Ended():
		return nil, fmt.Errorf("%w (outboxbun: the transaction in the context already ended)", outbox.ErrNoTransaction)
	}
	return outboxsql.NewTx(tx.Tx, st.scope), nil
}

// BeginTx begins a transaction on db (a *bun.DB or bun.Conn with the hook
// installed) the way db.BeginTx does, and also returns the transaction's
// context, already carrying the transaction (WithTx). Commit or roll back
// with the bun.Tx's own Commit and Rollback; nested transactions are the
// bun.Tx's own BeginTx and RunInTx, given this context.
//
// db.BeginTx alone cannot be used for outbox writes: bun keeps the context
// of a transaction it begins private, and the outbox needs it.
func (tc *TxContext) BeginTx(ctx context.Context, db bun.IDB, opts *sql.TxOptions) (context.Context, bun.Tx, error) {
	st := &txState{scope: outboxtx.NewScope(tc.logger)}
	ctx = context.WithValue(ctx, stateKey{tc}, st)
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return nil, bun.Tx{}, fmt.Errorf("outboxbun: begin transaction: %w", err)
	}
	if !st.isBegun() {
		_ = tx.Rollback()
		return nil, bun.Tx{}, fmt.Errorf("%w: outboxbun: the hook did not see the transaction begin: "+
			"db must be a *bun.DB or bun.Conn with the hook installed (db.WithQueryHook(tc))", outbox.ErrInvalidConfig)
	}
	return WithTx(ctx, tx), tx, nil
}

// RunInTx runs fn in bun's own RunInTx on db and passes it a context that
// carries the transaction (WithTx). If ctx already carries a running
// transaction of the same database, fn runs in a nested transaction of it
// (a savepoint), as tx.RunInTx would; a transaction that already ended
// counts as none. bun's semantics apply unchanged: fn's error or a panic
// rolls back.
func (tc *TxContext) RunInTx(ctx context.Context, db bun.IDB, opts *sql.TxOptions, fn func(ctx context.Context, tx bun.Tx) error) error {
	if outer, ok := FromContext(ctx); ok && sameDatabase(outer, db) && !tc.ended(ctx) {
		// bun passes the outer transaction's context to a nested
		// function; keep the caller's, which carries the same transaction.
		return outer.RunInTx(ctx, opts, func(_ context.Context, sp bun.Tx) error {
			return fn(WithTx(ctx, sp), sp)
		})
	}
	return db.RunInTx(ctx, opts, func(ctx context.Context, tx bun.Tx) error {
		return fn(WithTx(ctx, tx), tx)
	})
}

// ended reports whether the transaction whose context ctx is has ended.
func (tc *TxContext) ended(ctx context.Context) bool {
	st := tc.state(ctx)
	return st != nil && st.scope.Ended()
}

func sameDatabase(a, b bun.IDB) bool {
	da, db := a.NewSelect().DB(), b.NewSelect().DB()
	return da != nil && db != nil && da.DB == db.DB
}
