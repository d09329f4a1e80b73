package outboxsql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/sqlstore"
)

// Store is the outbox Store and Purger of package sqlstore, here bound to
// a *sql.DB.
type Store = sqlstore.Store

// Option configures Open: sqlstore.WithTable, sqlstore.WithDialect.
type Option = sqlstore.Option

// Dialect is a database family: PostgreSQL, MySQL or SQLite.
type Dialect = sqlstore.Dialect

// The dialects, for WithDialect and Rebind.
var (
	PostgreSQL = sqlstore.PostgreSQL
	MySQL      = sqlstore.MySQL
	SQLite     = sqlstore.SQLite
)

// WithTable sets the outbox table's name (default "outbox_event"),
// optionally schema-qualified ("app.outbox_event"); it is validated.
func WithTable(name string) Option { return sqlstore.WithTable(name) }

// WithPartitions makes the PostgreSQL table partitioned, one partition
// per interval, its retention dropping whole partitions: see
// sqlstore.WithPartitions.
func WithPartitions(interval time.Duration) Option { return sqlstore.WithPartitions(interval) }

// WithDialect sets the database family instead of detecting it from the
// driver: for drivers Open does not know.
func WithDialect(d Dialect) Option { return sqlstore.WithDialect(d) }

// Rebind rewrites the ? placeholders of query into d's style ($1, $2, … on
// PostgreSQL), so application SQL can be written once for every database.
func Rebind(d Dialect, query string) string { return sqlstore.Rebind(d, query) }

// Open returns the Store of the outbox table in db; the Store runs its
// statements on db (and never closes it), while Insert runs in the
// caller's transaction. The dialect is detected from db's driver unless
// WithDialect sets it. Open does not touch the database: call
// Store.Migrate to create the table.
func Open(db *sql.DB, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: outboxsql: nil *sql.DB", outbox.ErrInvalidConfig)
	}
	if sqlstore.Apply(opts...).Dialect == nil {
		d, err := DetectDialect(db)
		if err != nil {
			return nil, err
		}
		opts = append([]Option{WithDialect(d)}, opts...)
	}
	return sqlstore.New(pool{db}, opts...)
}

// DetectDialect picks the Dialect for db from the type of its driver, as
// sqlstore.DriverDialect does: lib/pq and pgx's stdlib are PostgreSQL,
// go-sql-driver/mysql is MySQL, modernc.org/sqlite and mattn/go-sqlite3
// are SQLite. For another driver it returns an error wrapping
// outbox.ErrInvalidConfig; pass WithDialect to Open then.
func DetectDialect(db *sql.DB) (Dialect, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: outboxsql: nil *sql.DB", outbox.ErrInvalidConfig)
	}
	d, err := sqlstore.DriverDialect(db.Driver())
	if err != nil {
		return nil, fmt.Errorf("%w; pass outboxsql.WithDialect to Open", err)
	}
	return d, nil
}

// Executor is the part of database/sql that the outbox writes through:
// *sql.DB, *sql.Tx and *sql.Conn satisfy it, and so do the transactions
// of sqlx and bun.
type Executor interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// conn is a sqlstore.Conn on an Executor.
type conn struct{ ex Executor }

func (c conn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := c.ex.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c conn) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	rows, err := c.ex.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// pool is the sqlstore.DB of a Store: a *sql.DB.
type pool struct{ db *sql.DB }

func (p pool) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return conn{p.db}.Exec(ctx, query, args...)
}

func (p pool) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	return conn{p.db}.Query(ctx, query, args...)
}

func (p pool) ReadCommitted(ctx context.Context, fn func(tx sqlstore.Conn) error) error {
	tx, err := p.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	if err := fn(conn{tx}); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
