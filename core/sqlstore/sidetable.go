package sqlstore

import (
	"context"
	"fmt"
	"strings"

	outbox "github.com/go-outbox/outbox/core"
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

// newSideTable returns the side table named table (def when empty) in the
// database of s, whose DDL is schema/<file>_<dialect>.sql; kind names it in
// errors ("inbox"). It validates the name like the outbox table's, refuses
// the outbox table's own, and checks the derived identifiers. Errors wrap
// outbox.ErrInvalidConfig.
func newSideTable(s *Store, table, def, file, kind string) (sideTable, error) {
	if s == nil {
		return sideTable{}, fmt.Errorf("%w: sqlstore: the %s needs the Store of its database", outbox.ErrInvalidConfig, kind)
	}
	if table == "" {
		table = def
	}
	if err := ValidateTableName(table); err != nil {
		return sideTable{}, err
	}
	if strings.EqualFold(table, s.table) {
		return sideTable{}, fmt.Errorf("%w: sqlstore: the %s needs a table of its own, not the outbox table %s", outbox.ErrInvalidConfig, kind, s.table)
	}
	// The DDL of the dialect, rendered like the outbox's.
	d := *s.d
	d.schemaFile = "schema/" + file + "_" + s.d.name + ".sql"
	schema, err := renderSchema(&d, table)
	if err != nil {
		return sideTable{}, err
	}
	indexes, err := checkIdentifiers(s.d, table, schema)
	if err != nil {
		return sideTable{}, err
	}
	return sideTable{tab: &Store{db: s.db, w: s.w, d: s.d, table: table, schema: schema, indexes: indexes}, kind: kind}, nil
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
