package sqlstore

import (
	"context"
	"embed"
	"fmt"
	"regexp"
	"strings"

	outbox "github.com/go-outbox/outbox/core"
)

// DefaultTable is the outbox table's name unless WithTable sets another.
const DefaultTable = "outbox_event"

//go:embed schema/*.sql
var schemaFS embed.FS

var tableNameRE = regexp.MustCompile(`^(?:[A-Za-z_][A-Za-z0-9_]{0,63}\.)?[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// ValidateTableName checks that name is a plain SQL identifier of at most 64
// characters (letters, digits, underscores, not starting with a digit),
// optionally prefixed by a schema of the same form and a dot. Only such
// names are ever written into SQL text. The error wraps outbox.ErrInvalidConfig.
func ValidateTableName(name string) error {
	if !tableNameRE.MatchString(name) {
		return fmt.Errorf("%w: sqlstore: table name %q is not allowed: use letters, digits and underscores "+
			"(1-64, not starting with a digit), optionally prefixed by \"schema.\"", outbox.ErrInvalidConfig, name)
	}
	return nil
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

// Schema returns the DDL statements that create the store's table and
// indexes (idempotent: CREATE … IF NOT EXISTS), without trailing
// semicolons, for users who run migrations with their own tools.
func (s *Store) Schema() []string { return append([]string(nil), s.schema...) }

// Migrate creates the store's table and indexes if they do not exist, on
// the store's pool. It is safe to run at every start.
func (s *Store) Migrate(ctx context.Context) error {
	for _, stmt := range s.schema {
		if _, err := s.db.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("sqlstore: migrate %s: %w", s.table, err)
		}
	}
	return nil
}
