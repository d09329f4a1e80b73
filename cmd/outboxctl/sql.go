package main

import (
	"context"
	"time"

	"github.com/go-outbox/outbox/core/outboxsql"
)

// The statements of outboxctl's own: the outbox's queries have none for
// them. Written once, in the SQL every database reads (placeholders are
// rebound per dialect), but for the catalog of SQLite.

// outboxColumns are three columns that only an outbox table has together.
const outboxColumns = "'event_id', 'available_at', 'locked_by'"

// maxListedTables bounds the outbox tables a message lists.
const maxListedTables = 10

// Outbox tables in the catalog: every schema (database, on MySQL) the
// user can see, schema-qualified; SQLite's main database only. The
// partitions of a partitioned PostgreSQL table have its columns but are
// not tables of their own.
const (
	tablesSQL = "SELECT table_schema, table_name FROM information_schema.columns WHERE column_name IN (" + outboxColumns + ")" +
		" GROUP BY table_schema, table_name HAVING COUNT(*) = 3 ORDER BY 1, 2"
	postgresTablesSQL = "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace" +
		" WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND has_table_privilege(c.oid, 'SELECT') AND" +
		" (SELECT COUNT(*) FROM pg_attribute a WHERE a.attrelid = c.oid AND NOT a.attisdropped AND a.attname IN (" + outboxColumns + ")) = 3" +
		" ORDER BY 1, 2"
	sqliteTablesSQL = "SELECT '', m.name FROM sqlite_master m WHERE m.type = 'table' AND" +
		" (SELECT COUNT(*) FROM pragma_table_info(m.name) WHERE name IN (" + outboxColumns + ")) = 3 ORDER BY 2"
)

// tablesQuery is the query of the outbox tables of d's catalog.
func tablesQuery(d outboxsql.Dialect) string {
	switch d {
	case outboxsql.SQLite:
		return sqliteTablesSQL
	case outboxsql.PostgreSQL:
		return postgresTablesSQL
	}
	return tablesSQL
}

// outboxTables returns the outbox tables of the session's database, at
// most maxListedTables of them, found in its catalog by their columns; on
// any error, none: the list only helps a message.
func (s *session) outboxTables(ctx context.Context) []string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	rows, err := s.db.QueryContext(ctx, tablesQuery(s.t.dialect))
	if err != nil {
		return nil
	}
	defer rows.Close()
	var tables []string
	for rows.Next() && len(tables) < maxListedTables {
		var schema, name string
		if err := rows.Scan(&schema, &name); err != nil {
			return nil
		}
		if schema != "" {
			name = schema + "." + name
		}
		tables = append(tables, name)
	}
	if rows.Err() != nil {
		return nil
	}
	return tables
}
