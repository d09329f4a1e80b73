package main

import (
	"context"
	"fmt"
	"time"

	outboxpgx "github.com/go-outbox/outbox/adapters/pgx"
	"github.com/go-outbox/outbox/core/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgxPool is a native pgx pool: the framework runs on it through outboxpgx,
// the baselines through pgx itself.
type pgxPool struct {
	pgxConn
	p *pgxpool.Pool
}

// pgxQuerier is what *pgxpool.Pool and pgx.Tx share.
type pgxQuerier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
}

// pgxConn is a conn on a pgx pool or transaction.
type pgxConn struct{ q pgxQuerier }

// openPgxPool connects a pgxpool of at most conns connections.
func openPgxPool(ctx context.Context, dsn string, conns int) (*pgxPool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(conns)
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := p.Ping(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("connect to postgres/pgx-native: %w", err)
	}
	return &pgxPool{pgxConn: pgxConn{p}, p: p}, nil
}

func (p *pgxPool) inTx(ctx context.Context, readCommitted bool, fn func(c conn) error) error {
	var opts pgx.TxOptions
	if readCommitted {
		opts.IsoLevel = pgx.ReadCommitted
	}
	tx, err := p.p.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	if err := fn(pgxConn{tx}); err != nil {
		_ = tx.Rollback(ctx)
		return err
	}
	return tx.Commit(ctx)
}

func (p *pgxPool) store(table string) (*sqlstore.Store, error) {
	return outboxpgx.Open(p.p, outboxpgx.WithTable(table))
}

func (p *pgxPool) txManager() txManager { return outboxpgx.NewTxManager(p.p) }

func (p *pgxPool) close() { p.p.Close() }

func (c pgxConn) exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := c.q.Exec(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (c pgxConn) query(ctx context.Context, query string, args ...any) ([]any, error) {
	rows, err := c.q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var first []any
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		if b, ok := vals[0].([]byte); ok {
			first = append(first, string(b))
		} else {
			first = append(first, vals[0])
		}
	}
	return first, rows.Err()
}

// copyRows bulk-loads rows into table with COPY (see copier).
func (c pgxConn) copyRows(ctx context.Context, table string, columns []string, rows [][]any) (int64, error) {
	return c.q.CopyFrom(ctx, pgx.Identifier{table}, columns, pgx.CopyFromRows(rows))
}

// claim scans the outbox columns (in the order of the raw drain's claim)
// into typed variables, as a hand-written pgx program does: text and JSON
// into []byte, integers, timestamps into time.Time.
func (c pgxConn) claim(ctx context.Context, query string, args ...any) ([]any, error) {
	rows, err := c.q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		id                                           string
		eventType, aggType, aggID, tenant            []byte
		payload, payloadBytes, headers, lastErr, who []byte
		status                                       int16
		attempts, version                            int32
		occurred, available, created                 time.Time
		doneAt, lockedAt                             *time.Time
		ids                                          []any
	)
	for rows.Next() {
		if err := rows.Scan(&id, &eventType, &aggType, &aggID, &tenant, &version, &payload, &payloadBytes, &headers,
			&status, &attempts, &occurred, &available, &created, &doneAt, &lastErr, &who, &lockedAt); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
