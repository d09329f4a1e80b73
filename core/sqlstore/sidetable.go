package sqlstore

import (
	"context"
	"fmt"
	"strings"
)

// sideTable is a table the framework keeps beside the outbox table, in
// the same database (the consumer inbox's, the idempotency keys'): reached
// through the pool and dialect of a Store, whose own table plays no part.
type sideTable struct {
	// tab is the table seen as a Store without statements: its pool,
	// dialect, name, DDL and index names, for what Store does with any
	// table (the index check, explaining a missing table).
	tab *Store
	// kind names the table in errors ("inbox").
	kind string
}

// Table returns the table's name.
func (t sideTable) Table() string { return t.tab.table }

// Dialect returns the table's dialect.
func (t sideTable) Dialect() Dialect { return t.tab.d }

// Schema returns the DDL statements that create the table and its index
// (idempotent: CREATE … IF NOT EXISTS), without trailing semicolons, for
// users who run migrations with their own tools.
func (t sideTable) Schema() []string { return append([]string(nil), t.tab.schema...) }

// Migrate creates the table and its index if they do not exist, on the
// pool, then checks in the database's catalog that the index exists. It
// is safe to run at every start.
func (t sideTable) Migrate(ctx context.Context) error {
	for _, stmt := range t.tab.schema {
		if _, err := t.tab.db.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("sqlstore: migrate %s %s: %w", t.kind, t.tab.table, err)
		}
	}
	missing, err := t.tab.missingIndexes(ctx)
	if err != nil {
		return fmt.Errorf("sqlstore: migrate %s %s: list its indexes: %w", t.kind, t.tab.table, err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("sqlstore: migrate %s %s: index %s missing after CREATE INDEX IF NOT EXISTS (an index of that name on another table?)",
			t.kind, t.tab.table, strings.Join(missing, ", "))
	}
	return nil
}
