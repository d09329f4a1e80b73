package integration

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/go-outbox/outbox/core/inbox/inboxtest"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
)

// newSQLAdapterFixture returns the fixture of plain database/sql on b: a
// store on a fresh table, outboxsql's TxManager (with opts) and a fresh
// business table written through the transaction it carries.
func newSQLAdapterFixture(t *testing.T, b outboxsqltest.Backend, opts ...outboxsql.TxOption) outboxtest.AdapterFixture {
	t.Helper()
	db := b.Open(t)
	store := b.NewStore(t, db)
	txm := outboxsql.NewTxManager(db, append([]outboxsql.TxOption{outboxsql.WithTxLogger(quietLogger)}, opts...)...)
	business := outboxsqltest.TableName("orders")
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+business+" (name VARCHAR(64) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+business) })
	exec := func(ctx context.Context, query string, args ...any) error {
		tx, ok := txm.Tx(ctx)
		if !ok {
			return errors.New("no transaction in the context")
		}
		_, err := tx.ExecContext(ctx, outboxsql.Rebind(b.Dialect, query), args...)
		return err
	}
	return outboxtest.AdapterFixture{
		Fixture: outboxsqltest.Fixture(db, store, txm, txm.InTx),
		InsertBusiness: func(ctx context.Context, name string) error {
			return exec(ctx, "INSERT INTO "+business+" (name) VALUES (?)", name)
		},
		ExecBusiness: func(ctx context.Context, query string) error { return exec(ctx, query) },
		BusinessRows: func(t testing.TB) []string {
			t.Helper()
			rows, err := db.QueryContext(context.Background(), "SELECT name FROM "+business)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var names []string
			for rows.Next() {
				var name string
				if err := rows.Scan(&name); err != nil {
					t.Fatal(err)
				}
				names = append(names, name)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return names
		},
	}
}

// TestInboxSuite runs the inbox suite on every backend through
// database/sql, in transactions of the database's default isolation
// (READ COMMITTED on PostgreSQL, REPEATABLE READ on MariaDB).
func TestInboxSuite(t *testing.T) {
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		inboxtest.RunSuite(t, func(t *testing.T) outboxtest.AdapterFixture { return newSQLAdapterFixture(t, b) })
	})
}

// TestInboxSuiteReadCommitted runs the inbox suite on the servers with
// every transaction READ COMMITTED, the weakest isolation the inbox
// supports (MariaDB's default is REPEATABLE READ). SQLite has no such
// level: its write transactions run one at a time.
func TestInboxSuiteReadCommitted(t *testing.T) {
	for _, b := range outboxsqltest.Backends() {
		if !b.IsServer() {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			inboxtest.RunSuite(t, func(t *testing.T) outboxtest.AdapterFixture {
				return newSQLAdapterFixture(t, b, outboxsql.WithTxOptions(sql.TxOptions{Isolation: sql.LevelReadCommitted}))
			})
		})
	}
}
