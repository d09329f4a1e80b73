package outboxpgx

import (
	"context"
	"fmt"
	"strings"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Option configures Open. The options of package sqlstore apply as they
// are; the dialect is always sqlstore.PostgreSQL.
type Option = sqlstore.Option

// WithTable sets the outbox table's name (default "outbox_event"),
// optionally schema-qualified ("app.outbox_event"); it is validated by
// sqlstore.ValidateTableName.
func WithTable(name string) Option { return sqlstore.WithTable(name) }

// Open returns the Store of the outbox table in the PostgreSQL database of
// pool. The Store runs its statements on pool (and never closes it), while
// Store.Insert runs in the caller's transaction, the one TxManager carries
// in the context. Open does not touch the database: call Store.Migrate to
// create the table. The Store hears the wake-ups of the other instances
// (outbox.Waker) on a connection it takes out of pool for as long as a
// Client listens; WithListenConnString listens elsewhere. Errors wrap
// outbox.ErrInvalidConfig.
func Open(pool *pgxpool.Pool, opts ...Option) (*sqlstore.Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: outboxpgx: nil *pgxpool.Pool", outbox.ErrInvalidConfig)
	}
	if d := sqlstore.Apply(opts...).Dialect; d != nil && d != sqlstore.PostgreSQL {
		return nil, fmt.Errorf("%w: outboxpgx: pgx speaks PostgreSQL, not %s", outbox.ErrInvalidConfig, d.Name())
	}
	opts = append([]Option{sqlstore.WithListener(poolListener{pool})}, opts...) // the caller's Listener wins
	return sqlstore.New(poolDB{pool}, append(opts, sqlstore.WithDialect(sqlstore.PostgreSQL))...)
}

// querier is what a *pgxpool.Pool, a *pgx.Conn and a pgx.Tx have in common.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
}

var (
	_ sqlstore.Conn   = conn{}
	_ sqlstore.Copier = conn{}
	_ sqlstore.DB     = poolDB{}
)

// conn is a sqlstore.Conn and sqlstore.Copier over pgx.
type conn struct{ q querier }

// Exec runs a statement and returns the rows it changed, from the
// command tag.
func (c conn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := c.q.Exec(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// Query runs a statement that returns rows.
func (c conn) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	r, err := c.q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return rows{r}, nil
}

// CopyFrom bulk-loads rows with the COPY protocol.
func (c conn) CopyFrom(ctx context.Context, table string, columns []string, src [][]any) (int64, error) {
	return c.q.CopyFrom(ctx, identifier(table), columns, pgx.CopyFromRows(src))
}

// identifier turns a validated table name, possibly schema-qualified, into
// the pgx.Identifier naming the same table. Validated names are unquoted
// identifiers, which PostgreSQL folds to lower case, while an Identifier
// is always quoted: fold them here.
func identifier(table string) pgx.Identifier {
	parts := strings.Split(table, ".")
	for i, p := range parts {
		parts[i] = strings.ToLower(p)
	}
	return pgx.Identifier(parts)
}

// rows is a sqlstore.Rows over pgx.Rows. pgx hands sql.Scanner targets the
// values database/sql would (string for text, []byte for json and bytea,
// int64 for integers, time.Time for timestamptz, nil for NULL) and scans
// integers into *int64 and text into *string, so Scan needs no help.
type rows struct{ pgx.Rows }

// Close closes the rows and returns the error that ended them, if any.
func (r rows) Close() error {
	r.Rows.Close()
	return r.Rows.Err()
}

// poolDB is the sqlstore.DB of a Store: a pgx pool.
type poolDB struct{ pool *pgxpool.Pool }

func (p poolDB) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return conn{p.pool}.Exec(ctx, query, args...)
}

func (p poolDB) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	return conn{p.pool}.Query(ctx, query, args...)
}

// ReadCommitted runs fn in a READ COMMITTED transaction on one of the
// pool's connections.
func (p poolDB) ReadCommitted(ctx context.Context, fn func(tx sqlstore.Conn) error) error {
	tx, err := p.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return err
	}
	// A no-op after Commit; after an error or a panic in fn it rolls back
	// and returns the connection to the pool.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(conn{tx}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
