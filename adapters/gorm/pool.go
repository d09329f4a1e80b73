package outboxgorm

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/go-outbox/outbox/core/outboxtx"
	"gorm.io/gorm"
)

// pool wraps the ConnPool of a *gorm.DB. GORM begins every transaction
// through its ConnPool (db.Begin, db.Transaction) and commits or rolls back
// through the ConnPool that BeginTx returned, so wrapping it observes every
// real commit whatever API the application uses.
type pool struct {
	inner gorm.ConnPool
	tc    *TxContext
}

var (
	_ gorm.ConnPool         = (*pool)(nil)
	_ gorm.ConnPoolBeginner = (*pool)(nil)
	_ gorm.GetDBConnector   = (*pool)(nil)
)

func (p *pool) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.inner.PrepareContext(ctx, query)
}

func (p *pool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return p.inner.ExecContext(ctx, query, args...)
}

func (p *pool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return p.inner.QueryContext(ctx, query, args...)
}

func (p *pool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return p.inner.QueryRowContext(ctx, query, args...)
}

// BeginTx begins a transaction on the wrapped pool and returns it wrapped,
// with a fresh Scope.
func (p *pool) BeginTx(ctx context.Context, opts *sql.TxOptions) (gorm.ConnPool, error) {
	var (
		tx  gorm.ConnPool
		err error
	)
	switch b := p.inner.(type) {
	case gorm.TxBeginner:
		var sqlTx *sql.Tx
		if sqlTx, err = b.BeginTx(ctx, opts); err == nil {
			tx = sqlTx
		}
	case gorm.ConnPoolBeginner:
		tx, err = b.BeginTx(ctx, opts)
	default:
		return nil, gorm.ErrInvalidTransaction
	}
	if err != nil {
		return nil, err
	}
	committer, ok := tx.(gorm.TxCommitter)
	if !ok {
		return nil, fmt.Errorf("outboxgorm: %T began a transaction %T that cannot commit: %w", p.inner, tx, gorm.ErrInvalidTransaction)
	}
	return &txConn{inner: tx, committer: committer, pool: p, scope: outboxtx.NewScope(p.tc.logger)}, nil
}

// GetDBConn returns the *sql.DB under the pool, so that gorm.DB.DB works.
func (p *pool) GetDBConn() (*sql.DB, error) {
	switch c := p.inner.(type) {
	case *sql.DB:
		return c, nil
	case gorm.GetDBConnector:
		return c.GetDBConn()
	}
	return nil, gorm.ErrInvalidDB
}

// Ping pings the database, as GORM's own pools do.
func (p *pool) Ping() error {
	if pinger, ok := p.inner.(interface{ Ping() error }); ok {
		return pinger.Ping()
	}
	db, err := p.GetDBConn()
	if err != nil {
		return err
	}
	return db.Ping()
}

// txConn is a transaction begun through pool: it reports its commit or
// rollback, and the savepoints GORM's nested transactions set and roll back
// (GORM runs them as SQL through this ConnPool), to its Scope.
type txConn struct {
	inner     gorm.ConnPool
	committer gorm.TxCommitter
	pool      *pool
	scope     *outboxtx.Scope
}

var (
	_ gorm.Tx             = (*txConn)(nil)
	_ gorm.GetDBConnector = (*txConn)(nil)
)

func (t *txConn) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return t.inner.PrepareContext(ctx, query)
}

func (t *txConn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	res, err := t.inner.ExecContext(ctx, query, args...)
	if err == nil {
		t.scope.Observe(query)
	}
	return res, err
}

func (t *txConn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	rows, err := t.inner.QueryContext(ctx, query, args...)
	if err == nil {
		t.scope.Observe(query)
	}
	return rows, err
}

func (t *txConn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.inner.QueryRowContext(ctx, query, args...)
}

// StmtContext returns stmt bound to the transaction, for GORM's prepared
// statement mode.
func (t *txConn) StmtContext(ctx context.Context, stmt *sql.Stmt) *sql.Stmt {
	if s, ok := t.inner.(interface {
		StmtContext(context.Context, *sql.Stmt) *sql.Stmt
	}); ok {
		return s.StmtContext(ctx, stmt)
	}
	return stmt
}

// Commit commits and then runs the after-commit callbacks; a failed commit
// runs the after-rollback callbacks instead.
func (t *txConn) Commit() error {
	if err := t.committer.Commit(); err != nil {
		t.scope.Rollback()
		return err
	}
	t.scope.Commit()
	return nil
}

// Rollback rolls back and runs the after-rollback callbacks (nothing if the
// transaction already committed).
func (t *txConn) Rollback() error {
	err := t.committer.Rollback()
	t.scope.Rollback()
	return err
}

// GetDBConn returns the *sql.DB under the transaction.
func (t *txConn) GetDBConn() (*sql.DB, error) { return t.pool.GetDBConn() }
