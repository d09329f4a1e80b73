package outboxsqltest

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/go-outbox/outbox/core/outboxsql"
)

// OpenIsolated returns a database of its own for one test, in which fixed
// table names (such as sqlstore.DefaultTable) are free: a new SQLite file,
// a new PostgreSQL schema first on the search_path, or a new MySQL
// database. It is closed (and the schema or database dropped) at cleanup.
// Tests of ORM models, whose table name is fixed, use it.
func (b Backend) OpenIsolated(t *testing.T) *sql.DB {
	t.Helper()
	if !b.IsServer() {
		return b.Open(t)
	}
	admin := b.Open(t) // skips, or fails, when the server is down
	name := TableName("outbox_schema")
	var create, drop, dsn string
	switch b.Dialect.Name() {
	case "postgres":
		create, drop = "CREATE SCHEMA "+name, "DROP SCHEMA IF EXISTS "+name+" CASCADE"
		dsn = withPostgresParam(b.DSN(t), "search_path", name)
	case "mysql":
		create, drop = "CREATE DATABASE "+name, "DROP DATABASE IF EXISTS "+name
		dsn = withMySQLDatabase(b.DSN(t), name)
	default:
		t.Fatalf("outboxsqltest: no isolated databases for dialect %s", b.Dialect.Name())
	}
	ctx := context.Background()
	if _, err := admin.ExecContext(ctx, create); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.ExecContext(ctx, drop) })
	db, err := sql.Open(b.DriverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// withPostgresParam sets a run-time parameter in a PostgreSQL DSN (URL or
// key=value form); lib/pq and pgx both pass unknown parameters to the server.
func withPostgresParam(dsn, key, value string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " " + key + "=" + value
}

// withMySQLDatabase replaces the database of a go-sql-driver/mysql DSN
// ([user[:password]@][net[(addr)]]/dbname[?params]).
func withMySQLDatabase(dsn, db string) string {
	params := ""
	if i := strings.IndexByte(dsn, '?'); i >= 0 {
		dsn, params = dsn[:i], dsn[i:]
	}
	if i := strings.LastIndexByte(dsn, '/'); i >= 0 {
		dsn = dsn[:i]
	}
	return dsn + "/" + db + params
}

// Shape describes a table as the database's catalog sees it, normalized so
// that two tables created by different tools (outboxsql's DDL, an ORM's
// migration) compare equal exactly when the database treats them the same:
// the columns in order with their types, nullability, defaults, collations
// and generation expressions; the indexes with their columns, expressions
// and predicates; the constraints; the storage engine. The table's own
// name reads T in index definitions.
type Shape struct {
	Columns     []string
	Indexes     []string
	Constraints []string
	Options     []string
}

// Diff returns the differences between two shapes, one line each, or nil.
func (s Shape) Diff(other Shape) []string {
	var out []string
	diff := func(what string, a, b []string) {
		for i := 0; i < len(a) || i < len(b); i++ {
			var x, y string
			if i < len(a) {
				x = a[i]
			}
			if i < len(b) {
				y = b[i]
			}
			if x != y {
				out = append(out, fmt.Sprintf("%s %d: %q != %q", what, i, x, y))
			}
		}
	}
	diff("column", s.Columns, other.Columns)
	diff("index", s.Indexes, other.Indexes)
	diff("constraint", s.Constraints, other.Constraints)
	diff("option", s.Options, other.Options)
	return out
}

// CompareWithDDL fails t unless table, in the current schema of db, has
// the shape of the table outboxsql's DDL creates under the same name
// (created for the comparison in a database of its own, see OpenIsolated).
// ORM models of the outbox table are checked with it.
func (b Backend) CompareWithDDL(t *testing.T, db *sql.DB, table string) {
	t.Helper()
	ref := b.OpenIsolated(t)
	store, err := outboxsql.Open(ref, outboxsql.WithDialect(b.Dialect), outboxsql.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	want, got := b.Shape(t, ref, table), b.Shape(t, db, table)
	diff := want.Diff(got)
	for _, d := range diff {
		t.Errorf("outboxsql's DDL vs %s: %s", table, d)
	}
	if len(diff) > 0 {
		t.Logf("outboxsql's DDL: %q", want)
		t.Logf("%s: %q", table, got)
	}
}

// Shape returns the shape of table in the current schema of db.
func (b Backend) Shape(t *testing.T, db *sql.DB, table string) Shape {
	t.Helper()
	var (
		s   Shape
		err error
	)
	switch b.Dialect.Name() {
	case "sqlite":
		s, err = sqliteShape(db, table)
	case "postgres":
		s, err = postgresShape(db, table)
	case "mysql":
		s, err = mysqlShape(db, table)
	default:
		err = fmt.Errorf("no catalog queries for dialect %s", b.Dialect.Name())
	}
	if err != nil {
		t.Fatalf("outboxsqltest: shape of %s: %v", table, err)
	}
	if len(s.Columns) == 0 {
		t.Fatalf("outboxsqltest: table %s not found", table)
	}
	return s
}

// strings returns the rows of query, each row's columns joined by " | ".
func rowStrings(db *sql.DB, query string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(context.Background(), query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = "NULL"
			if v.Valid {
				parts[i] = v.String
			}
		}
		out = append(out, strings.Join(parts, " | "))
	}
	return out, rows.Err()
}

var (
	spaces     = regexp.MustCompile(`\s+`)
	punctSpace = regexp.MustCompile(`\s*([(),=<>])\s*`)
)

// normalizeSQL lower-cases DDL, drops quotes, IF NOT EXISTS and insignificant
// white space, and replaces the table's name by T.
func normalizeSQL(ddl, table string) string {
	s := strings.ToLower(ddl)
	s = strings.NewReplacer(`"`, "", "`", "", "if not exists ", "").Replace(s)
	s = strings.ReplaceAll(s, strings.ToLower(table), "T")
	s = spaces.ReplaceAllString(strings.TrimSpace(s), " ")
	return punctSpace.ReplaceAllString(s, "$1")
}

// balanced returns the text of s from the parenthesis at open to the one
// closing it, inclusive.
func balanced(s string, open int) string {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return s[open : i+1]
			}
		}
	}
	return s[open:]
}

func sqliteShape(db *sql.DB, table string) (Shape, error) {
	var s Shape
	var err error
	// cid | name | type | notnull | dflt_value | pk | hidden
	// An empty-string default written "" (as GORM writes it) is the same
	// string literal as '' in SQLite.
	if s.Columns, err = rowStrings(db, `
		SELECT cid, name, upper(type), "notnull", CASE WHEN dflt_value = '""' THEN '''''' ELSE dflt_value END, pk, hidden
		FROM pragma_table_xinfo(?) ORDER BY cid`, table); err != nil {
		return s, err
	}
	idx, err := rowStrings(db, `SELECT COALESCE(sql, name) FROM sqlite_master WHERE type = 'index' AND tbl_name = ? ORDER BY name`, table)
	if err != nil {
		return s, err
	}
	for _, ddl := range idx {
		s.Indexes = append(s.Indexes, normalizeSQL(ddl, table))
	}
	var ddl string
	if err := db.QueryRowContext(context.Background(), `SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&ddl); err != nil {
		return s, err
	}
	norm := normalizeSQL(ddl, table)
	for rest := norm; ; {
		i := strings.Index(rest, "check(")
		if i < 0 {
			break
		}
		c := balanced(rest, i+len("check"))
		s.Constraints = append(s.Constraints, "check"+c)
		rest = rest[i+len("check")+len(c):]
	}
	return s, nil // the primary key is in the columns (pk)
}

func postgresShape(db *sql.DB, table string) (Shape, error) {
	var s Shape
	var err error
	if s.Columns, err = rowStrings(db, `
		SELECT column_name, data_type, character_maximum_length, numeric_precision, datetime_precision,
		       is_nullable, column_default, collation_name, is_generated, generation_expression
		FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1
		ORDER BY ordinal_position`, table); err != nil {
		return s, err
	}
	idx, err := rowStrings(db, `
		SELECT indexdef FROM pg_indexes
		WHERE schemaname = current_schema() AND tablename = $1 ORDER BY indexname`, table)
	if err != nil {
		return s, err
	}
	var schema string
	if err := db.QueryRowContext(context.Background(), `SELECT current_schema()`).Scan(&schema); err != nil {
		return s, err
	}
	for _, def := range idx {
		s.Indexes = append(s.Indexes, normalizeSQL(strings.ReplaceAll(def, schema+".", ""), table))
	}
	if s.Constraints, err = rowStrings(db, `
		SELECT c.contype, pg_get_constraintdef(c.oid)
		FROM pg_constraint c
		JOIN pg_class r ON r.oid = c.conrelid
		JOIN pg_namespace n ON n.oid = r.relnamespace
		WHERE n.nspname = current_schema() AND r.relname = $1
		ORDER BY 1, 2`, table); err != nil {
		return s, err
	}
	return s, nil
}

func mysqlShape(db *sql.DB, table string) (Shape, error) {
	var s Shape
	var err error
	if s.Columns, err = rowStrings(db, `
		SELECT column_name, column_type, is_nullable, column_default, character_set_name, collation_name,
		       extra, generation_expression
		FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = ?
		ORDER BY ordinal_position`, table); err != nil {
		return s, err
	}
	if s.Indexes, err = rowStrings(db, `
		SELECT index_name, non_unique, GROUP_CONCAT(column_name ORDER BY seq_in_index)
		FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND table_name = ?
		GROUP BY index_name, non_unique ORDER BY index_name`, table); err != nil {
		return s, err
	}
	if s.Constraints, err = rowStrings(db, `
		SELECT tc.constraint_type, cc.check_clause
		FROM information_schema.table_constraints tc
		LEFT JOIN information_schema.check_constraints cc
		       ON cc.constraint_schema = tc.constraint_schema AND cc.constraint_name = tc.constraint_name
		WHERE tc.table_schema = DATABASE() AND tc.table_name = ?
		ORDER BY 1, 2`, table); err != nil {
		return s, err
	}
	if s.Options, err = rowStrings(db, `
		SELECT engine FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name = ?`, table); err != nil {
		return s, err
	}
	return s, nil
}
