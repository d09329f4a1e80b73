package integration

import (
	"database/sql"
	"testing"

	"github.com/go-outbox/outbox/core/idempotency/idempotencytest"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
)

// TestIdempotencySuite runs the idempotency-key suite on every backend
// through database/sql, in transactions of the database's default
// isolation (READ COMMITTED on PostgreSQL, REPEATABLE READ on MariaDB).
func TestIdempotencySuite(t *testing.T) {
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		idempotencytest.RunSuite(t, func(t *testing.T) outboxtest.AdapterFixture { return newSQLAdapterFixture(t, b) })
	})
}

// TestIdempotencySuiteReadCommitted runs the idempotency-key suite on the
// servers with every transaction READ COMMITTED. SQLite has no such level:
// its write transactions run one at a time.
func TestIdempotencySuiteReadCommitted(t *testing.T) {
	for _, b := range outboxsqltest.Backends() {
		if !b.IsServer() {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			idempotencytest.RunSuite(t, func(t *testing.T) outboxtest.AdapterFixture {
				return newSQLAdapterFixture(t, b, outboxsql.WithTxOptions(sql.TxOptions{Isolation: sql.LevelReadCommitted}))
			})
		})
	}
}
