package idempotency

import (
	"context"
	"fmt"
	"net/http"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/sqlstore"
)

// DefaultTable is the idempotency table's name unless NewSQLStore is given
// another.
const DefaultTable = sqlstore.DefaultIdempotencyTable

var _ Store = (*SQLStore)(nil)

// SQLStore is the Store of an SQL database: an idempotency table on
// PostgreSQL, MySQL/MariaDB or SQLite, written through the transactions of
// outboxsql, of the ORM adapters or of outboxpgx. It is safe for
// concurrent use.
type SQLStore struct {
	tab *sqlstore.Idempotency
}

// NewSQLStore returns the Store of the idempotency table named table
// (DefaultTable when empty; validated like the outbox table's name) in the
// database of s — a Store of the service's database, as outboxsql.Open and
// the Open of the GORM, bun, sqlx and pgx adapters return it. The Store's
// own outbox table plays no part. It does not touch the database: call
// Migrate (or apply Schema) to create the table. Errors wrap
// outbox.ErrInvalidConfig.
func NewSQLStore(s *sqlstore.Store, table string) (*SQLStore, error) {
	tab, err := sqlstore.NewIdempotency(s, table)
	if err != nil {
		return nil, fmt.Errorf("idempotency: %w", err)
	}
	return &SQLStore{tab: tab}, nil
}

// Table returns the idempotency table's name.
func (s *SQLStore) Table() string { return s.tab.Table() }

// Schema returns the DDL statements that create the idempotency table and
// its index, for users who run migrations with their own tools.
func (s *SQLStore) Schema() []string { return s.tab.Schema() }

// Migrate creates the idempotency table and its index if they do not
// exist. It is safe to run at every start.
func (s *SQLStore) Migrate(ctx context.Context) error {
	if err := s.tab.Migrate(ctx); err != nil {
		return fmt.Errorf("idempotency: %w", err)
	}
	return nil
}

// conn returns the SQL connection of tx.
func conn(tx outbox.Tx) (sqlstore.Conn, error) {
	stx, ok := tx.(sqlstore.Tx)
	if !ok {
		return nil, fmt.Errorf("%w: idempotency: the transaction (%T) carries no SQL connection: use the TxContext of outboxsql, of an ORM adapter or of outboxpgx",
			outbox.ErrInvalidConfig, tx)
	}
	return stx.Conn(), nil
}

// Reserve implements Store.
func (s *SQLStore) Reserve(ctx context.Context, tx outbox.Tx, scope, key, fingerprint string, now time.Time) (Record, bool, error) {
	c, err := conn(tx)
	if err != nil {
		return Record{}, false, err
	}
	r, fresh, err := s.tab.Reserve(ctx, c, scope, key, fingerprint, now)
	if err != nil {
		return Record{}, false, err
	}
	return Record{
		Scope: r.Scope, Key: r.Key, Fingerprint: r.Fingerprint,
		Response:  Response{Status: r.Status, Header: http.Header(r.Header), Body: r.Body},
		CreatedAt: r.CreatedAt, CompletedAt: r.CompletedAt,
	}, fresh, nil
}

// Complete implements Store.
func (s *SQLStore) Complete(ctx context.Context, tx outbox.Tx, rec Record, now time.Time) error {
	c, err := conn(tx)
	if err != nil {
		return err
	}
	return s.tab.Complete(ctx, c, sqlstore.IdempotencyRecord{
		Scope: rec.Scope, Key: rec.Key, Fingerprint: rec.Fingerprint,
		Status: rec.Response.Status, Header: rec.Response.Header, Body: rec.Response.Body,
	}, now)
}

// Release implements Store.
func (s *SQLStore) Release(ctx context.Context, tx outbox.Tx, scope, key string) error {
	c, err := conn(tx)
	if err != nil {
		return err
	}
	return s.tab.Release(ctx, c, scope, key)
}

// Purge implements Store.
func (s *SQLStore) Purge(ctx context.Context, before time.Time, limit int) (int64, error) {
	return s.tab.Purge(ctx, before, limit)
}
