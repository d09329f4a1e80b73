package outboxsqltest

import (
	"context"
	"database/sql"
	"testing"
)

// CommitFailure creates a table in db with a deferred foreign key, dropped
// at cleanup, and returns a statement that, run in a transaction, makes that
// transaction's COMMIT fail (the constraint is checked at commit). It
// returns "" for a database without deferred constraints (MySQL, MariaDB),
// which cannot fail a commit on purpose.
func (b Backend) CommitFailure(t *testing.T, db *sql.DB) string {
	t.Helper()
	switch b.Dialect.Name() {
	case "sqlite", "postgres":
	default:
		return ""
	}
	table := TableName("deferred")
	ctx := context.Background()
	ddl := "CREATE TABLE " + table + " (id INTEGER NOT NULL PRIMARY KEY, parent INTEGER REFERENCES " +
		table + " (id) DEFERRABLE INITIALLY DEFERRED)"
	if _, err := db.ExecContext(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table) })
	return "INSERT INTO " + table + " (id, parent) VALUES (1, 2)"
}
