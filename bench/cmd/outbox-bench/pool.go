package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/sqlstore"
)

// conn runs the hand-written SQL of the baselines and of the setup: a pool
// or a transaction of one driver API.
type conn interface {
	// exec runs a statement and returns the rows it changed.
	exec(ctx context.Context, query string, args ...any) (int64, error)
	// query runs a statement and returns the first column of every row
	// ([]byte turned into string); for setup and counts.
	query(ctx context.Context, query string, args ...any) ([]any, error)
	// claim runs a claim statement that returns the outbox columns, reads
	// every column of every row the way a hand-written program of the
	// driver would, and returns the event ids.
	claim(ctx context.Context, query string, args ...any) ([]any, error)
}

// copier is a conn that bulk-loads rows with COPY (native pgx): its raw
// write baseline is the faster of a multi-row INSERT and a COPY.
type copier interface {
	copyRows(ctx context.Context, table string, columns []string, rows [][]any) (int64, error)
}

// txManager is the TxContext the framework writes through, and what runs
// a function in a transaction it carries: outboxsql's or outboxpgx's.
type txManager interface {
	outbox.TxContext
	InTx(ctx context.Context, fn func(ctx context.Context) error) error
}

// pool is the connection pool of one backend: database/sql or native pgx.
type pool interface {
	conn
	// inTx runs fn in a transaction (READ COMMITTED if readCommitted),
	// committed if fn returns nil.
	inTx(ctx context.Context, readCommitted bool, fn func(c conn) error) error
	// store returns the outbox Store of table on this pool.
	store(table string) (*sqlstore.Store, error)
	// txManager returns the framework's transaction manager on this pool.
	txManager() txManager
	close()
}

// sqlPool is a database/sql pool.
type sqlPool struct {
	sqlConn
	db *sql.DB
	// listen hears wake-ups on PostgreSQL, which database/sql cannot.
	listen sqlstore.Listener
}

// executor is what *sql.DB and *sql.Tx share.
type executor interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// sqlConn is a conn on a *sql.DB or *sql.Tx.
type sqlConn struct{ ex executor }

func newSQLPool(db *sql.DB) *sqlPool { return &sqlPool{sqlConn: sqlConn{db}, db: db} }

func (p *sqlPool) inTx(ctx context.Context, readCommitted bool, fn func(c conn) error) error {
	var opts *sql.TxOptions
	if readCommitted {
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	tx, err := p.db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	if err := fn(sqlConn{tx}); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (p *sqlPool) store(table string) (*sqlstore.Store, error) {
	opts := []outboxsql.Option{outboxsql.WithTable(table)}
	if p.listen != nil {
		opts = append(opts, sqlstore.WithListener(p.listen))
	}
	return outboxsql.Open(p.db, opts...)
}

func (p *sqlPool) txManager() txManager { return outboxsql.NewTxManager(p.db) }

func (p *sqlPool) close() { _ = p.db.Close() }

func (c sqlConn) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := c.ex.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c sqlConn) query(ctx context.Context, query string, args ...any) ([]any, error) {
	return c.claim(ctx, query, args...)
}

// claim scans every column into an any, as database/sql code that reads a
// whole row without a struct does.
func (c sqlConn) claim(ctx context.Context, query string, args ...any) ([]any, error) {
	rows, err := c.ex.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var first []any
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		if b, ok := vals[0].([]byte); ok {
			first = append(first, string(b))
		} else {
			first = append(first, vals[0])
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return first, rows.Close()
}

// queryInt runs a query that returns one integer.
func queryInt(ctx context.Context, c conn, query string, args ...any) (int64, error) {
	vals, err := c.query(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	if len(vals) != 1 {
		return 0, fmt.Errorf("%s: %d rows, want 1", query, len(vals))
	}
	switch v := vals[0].(type) {
	case int64:
		return v, nil
	case int32:
		return int64(v), nil
	case int:
		return int64(v), nil
	case string:
		return strconv.ParseInt(v, 10, 64)
	}
	return 0, fmt.Errorf("%s: unexpected %T", query, vals[0])
}
