package sqlstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// DefaultTable is the outbox table's name unless WithTable sets another.
const DefaultTable = "outbox_event"

//go:embed schema/*.sql
var schemaFS embed.FS

var tableNameRE = regexp.MustCompile(`^(?:[A-Za-z_][A-Za-z0-9_]{0,63}\.)?[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// ValidateTableName checks that name is a plain SQL identifier of at most 64
// characters (letters, digits, underscores, not starting with a digit),
// optionally prefixed by a schema of the same form and a dot, and that
// neither part is a word one of the supported databases reserves (order,
// select, group, user, …). Only such names are ever written into SQL text,
// unquoted; a name is held to what every supported database accepts. The
// error wraps outbox.ErrInvalidConfig and names the reserved word.
func ValidateTableName(name string) error {
	if !tableNameRE.MatchString(name) {
		return fmt.Errorf("%w: sqlstore: table name %q is not allowed: use letters, digits and underscores "+
			"(1-64, not starting with a digit), optionally prefixed by \"schema.\"", outbox.ErrInvalidConfig, name)
	}
	for _, part := range strings.Split(name, ".") {
		if by := reservedBy(part); len(by) > 0 {
			return fmt.Errorf("%w: sqlstore: table name %q is not allowed: %q is a reserved word of SQL in %s, "+
				"which refuse it as a table or schema name (choose another name, such as %q)",
				outbox.ErrInvalidConfig, name, strings.ToLower(part), strings.Join(by, ", "), strings.ToLower(part)+"_outbox")
		}
	}
	return nil
}

// reservedWords maps each word a supported database reserves to the
// titles of those databases, in the registry's order.
var reservedWords = func() map[string][]string {
	m := map[string][]string{}
	for _, d := range registry {
		for _, w := range strings.Fields(d.reserved) {
			m[w] = append(m[w], d.title)
		}
	}
	return m
}()

// reservedBy returns the databases (by title, such as "PostgreSQL") that
// reserve word, in any case, so that it cannot name a table unquoted; nil
// for a word every supported database accepts.
func reservedBy(word string) []string {
	return reservedWords[strings.ToLower(word)]
}

// renderSchema returns the DDL statements of d for the (validated) table.
// The template's statements end with a semicolon at the end of a line; lines
// starting with -- are comments.
func renderSchema(d *dialect, table string) ([]string, error) {
	raw, err := schemaFS.ReadFile(d.schemaFile)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: %s schema: %w", d.name, err)
	}
	schema, name := "", table
	if i := strings.IndexByte(table, '.'); i >= 0 {
		schema, name = table[:i+1], table[i+1:]
	}
	text := strings.NewReplacer("{{table}}", table, "{{name}}", name, "{{schema}}", schema).Replace(string(raw))
	var stmts []string
	var cur strings.Builder
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		if cur.Len() > 0 {
			cur.WriteByte('\n')
		}
		cur.WriteString(strings.TrimRight(line, " \t\r"))
		if strings.HasSuffix(trimmed, ";") {
			stmts = append(stmts, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if rest := strings.TrimSpace(cur.String()); rest != "" {
		stmts = append(stmts, rest)
	}
	return stmts, nil
}

// upgrade brings a table made by an earlier version up to date: the
// dialect's own steps (dialect.upgrade), then the columns added since,
// as the CREATE TABLE statement declares them.
func (s *Store) upgrade(ctx context.Context) error {
	if s.d.upgrade != nil {
		if err := s.d.upgrade(ctx, s); err != nil {
			return err
		}
	}
	return s.addColumns(ctx, "schema_version", "subscribers", "parked")
}

// addColumns adds those of cols the table lacks, one at a time and in
// order, as the CREATE TABLE statement declares them.
func (s *Store) addColumns(ctx context.Context, cols ...string) error {
	for _, col := range cols {
		has, err := s.hasColumn(ctx, col)
		if err != nil {
			return err
		}
		if has {
			continue
		}
		if _, err := s.db.Exec(ctx, "ALTER TABLE "+s.table+" ADD COLUMN "+schemaLine(s.schema[0], col+" ")); err != nil {
			return err
		}
	}
	return nil
}

// hasColumn reports whether the store's table has the column col.
func (s *Store) hasColumn(ctx context.Context, col string) (bool, error) {
	query, args := s.d.columnQuery(s.tableParts())
	n, err := s.queryInt(ctx, query, append(args, col)...)
	return n > 0, err
}

// Schema returns the DDL statements that create the store's table and
// indexes (idempotent: CREATE … IF NOT EXISTS), without trailing
// semicolons, for users who run migrations with their own tools.
func (s *Store) Schema() []string { return append([]string(nil), s.schema...) }

// Migrate creates the store's table and indexes if they do not exist, on
// the store's pool, then checks in the database's catalog that every index
// the outbox relies on exists: without them claims and purges scan the
// whole table. It is safe to run at every start. On a store made
// WithPartitions it creates the table partitioned, with its DEFAULT
// partition and the partitions of the current interval and the
// PartitionsAhead next ones, and fails with outbox.ErrInvalidConfig on a
// table of that name that is not partitioned.
func (s *Store) Migrate(ctx context.Context) error {
	for i, stmt := range s.schema {
		if _, err := s.db.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("sqlstore: migrate %s: %w", s.table, err)
		}
		// The first statement creates the table: a table made by an
		// earlier version is brought up to date before its indexes.
		if i == 0 {
			if s.part != nil {
				if err := s.checkPartitioned(ctx); err != nil {
					return err
				}
			}
			if err := s.upgrade(ctx); err != nil {
				return fmt.Errorf("sqlstore: migrate %s: upgrade: %w", s.table, err)
			}
		}
	}
	missing, err := s.missingIndexes(ctx)
	if err != nil {
		return fmt.Errorf("sqlstore: migrate %s: list its indexes: %w", s.table, err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("sqlstore: migrate %s: index %s missing after CREATE INDEX IF NOT EXISTS (an index of that name on another table, or a name the database cut?)",
			s.table, strings.Join(missing, ", "))
	}
	_, err = s.MaintainPartitions(ctx, time.Now(), time.Time{})
	return err
}

// missingIndexes returns the indexes of the schema that the database's
// catalog does not list for the table.
func (s *Store) missingIndexes(ctx context.Context) ([]string, error) {
	schema, name := s.tableParts()
	query, args := s.d.indexQuery(schema, name)
	rows, err := s.db.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for rows.Next() {
		var idx string
		if err := rows.Scan(&idx); err != nil {
			_ = rows.Close()
			return nil, err
		}
		have[strings.ToLower(idx)] = true
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	var missing []string
	for _, idx := range s.indexes {
		if !have[strings.ToLower(idx)] {
			missing = append(missing, idx)
		}
	}
	return missing, nil
}

// tableParts splits the table name into its schema ("" for none) and name.
func (s *Store) tableParts() (schema, name string) {
	if i := strings.IndexByte(s.table, '.'); i >= 0 {
		return s.table[:i], s.table[i+1:]
	}
	return "", s.table
}

// indexNameRE finds the index names of the DDL: CREATE INDEX statements,
// and KEY clauses of a MySQL CREATE TABLE.
var indexNameRE = regexp.MustCompile(`(?i)(?:CREATE\s+INDEX\s+IF\s+NOT\s+EXISTS\s+(?:\w+\.)?(\w+))|(?:\bKEY\s+(\w+)\s*\()`)

// checkIdentifiers checks the table name and the names of the indexes its
// DDL creates against the dialect's identifier limit, and returns the index
// names. The error wraps outbox.ErrInvalidConfig.
func checkIdentifiers(d *dialect, table string, schema []string) ([]string, error) {
	var indexes []string
	for _, stmt := range schema {
		for _, m := range indexNameRE.FindAllStringSubmatch(stmt, -1) {
			indexes = append(indexes, m[1]+m[2])
		}
	}
	if d.maxIdent == 0 {
		return indexes, nil
	}
	for _, part := range strings.Split(table, ".") {
		if len(part) > d.maxIdent {
			return nil, fmt.Errorf("%w: sqlstore: table name %q: %q has %d characters, %s keeps %d",
				outbox.ErrInvalidConfig, table, part, len(part), d.name, d.maxIdent)
		}
	}
	for _, idx := range indexes {
		if len(idx) > d.maxIdent {
			return nil, fmt.Errorf("%w: sqlstore: table name %q is too long for %s: its index %s would have %d characters, %s keeps %d (shorten the table name by %d)",
				outbox.ErrInvalidConfig, table, d.name, idx, len(idx), d.name, d.maxIdent, len(idx)-d.maxIdent)
		}
	}
	return indexes, nil
}
