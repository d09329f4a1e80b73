package outboxsql

import "github.com/go-outbox/outbox/core/sqlstore"

// SQLiteDSN returns a modernc.org/sqlite data source name for the database
// file at path, set up for an outbox shared by concurrent writers (WAL, a
// busy timeout, transactions that take the write lock at BEGIN, foreign
// keys): see sqlstore.SQLiteDSN.
func SQLiteDSN(path string) string { return sqlstore.SQLiteDSN(path) }
