package sqlstore

import (
	"context"

	outbox "github.com/go-outbox/outbox/core"
)

// Conn runs SQL: a pool, a connection or a transaction of some driver API.
// Package outboxsql implements it for database/sql, outboxpgx for pgx.
// Placeholders are the dialect's ("?" or "$n").
type Conn interface {
	// Exec runs a statement and returns the number of rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// Query runs a statement that returns rows.
	Query(ctx context.Context, query string, args ...any) (Rows, error)
}

// Rows is the result of Conn.Query. *sql.Rows satisfies it. Scan targets
// are pointers to int64, string, and types with a Scan(src any) error
// method (sql.Scanner), which receive nil, int64, float64, bool, string,
// []byte or time.Time.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// DB is the pool a Store owns: it runs the store's statements outside any
// business transaction.
type DB interface {
	Conn
	// ReadCommitted runs fn in a READ COMMITTED transaction on one
	// connection, committed if fn returns nil and rolled back otherwise.
	// Dialects whose claim needs several statements use it.
	ReadCommitted(ctx context.Context, fn func(tx Conn) error) error
}

// Tx is the outbox.Tx of a business transaction that a Store can insert
// in: the TxContexts of package outboxsql, of the ORM adapters and of
// outboxpgx return one.
type Tx interface {
	outbox.Tx
	// Conn returns the transaction's connection.
	Conn() Conn
}

// Copier is a Conn that bulk-loads rows faster than a multi-row INSERT,
// such as pgx's CopyFrom. Insert uses it for batches of at least
// CopyThreshold events. table is the validated table name, possibly
// schema-qualified.
type Copier interface {
	CopyFrom(ctx context.Context, table string, columns []string, rows [][]any) (int64, error)
}

// CopyThreshold is the smallest batch Insert copies through a Copier:
// below it, one multi-row INSERT costs less than setting up a COPY.
const CopyThreshold = 64
