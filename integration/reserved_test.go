package integration

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/sqlstore"
)

// TestReservedTableNames: a table name the database would refuse unquoted
// (a reserved word such as order or select) is refused when the store is
// made, with ErrInvalidConfig naming the word, instead of Migrate failing
// with a syntax error. The words come from the database's own keyword list;
// each is tried as a table name (and as its schema) in the statements the
// store writes, and every one the database refuses must be refused by
// ValidateTableName.
func TestReservedTableNames(t *testing.T) {
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		ctx := context.Background()
		db := b.Open(t)
		for _, tc := range []struct{ name, word string }{
			{"order", "order"}, {"select", "select"}, {"group", "group"}, {"user", "user"},
			{"ORDER", "order"}, {"Select", "select"}, {"app.order", "order"}, {"select.outbox_event", "select"},
		} {
			s, err := outboxsql.Open(db, outboxsql.WithTable(tc.name))
			if err == nil {
				err = s.Migrate(ctx)
			}
			if !errors.Is(err, outbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "reserved word") ||
				!strings.Contains(err.Error(), strconv.Quote(tc.word)) {
				t.Errorf("Open(WithTable(%q)), Migrate: %v; want ErrInvalidConfig naming the reserved word %q", tc.name, err, tc.word)
			}
		}
		var missed []string
		for _, word := range keywords(t, b, db) {
			if refusedAsTable(t, b, db, word) && sqlstore.ValidateTableName(word) == nil {
				missed = append(missed, word)
			}
		}
		if len(missed) > 0 {
			t.Errorf("%s refuses %d keywords as table names that ValidateTableName accepts: %s", b.Name, len(missed), strings.Join(missed, " "))
		}
	})
}

// keywords returns the keywords the database of b lists.
func keywords(t *testing.T, b outboxsqltest.Backend, db *sql.DB) []string {
	t.Helper()
	var query string
	switch b.Dialect {
	case outboxsql.PostgreSQL:
		query = "SELECT word FROM pg_get_keywords()"
	case outboxsql.MySQL:
		query = "SELECT word FROM information_schema.keywords"
	default:
		f, err := os.Open("testdata/sqlite_keywords.txt")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var words []string
		for sc := bufio.NewScanner(f); sc.Scan(); {
			if w := strings.TrimSpace(sc.Text()); w != "" && !strings.HasPrefix(w, "#") {
				words = append(words, w)
			}
		}
		return words
	}
	rows, err := db.QueryContext(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var words []string
	for rows.Next() {
		var w string
		if err := rows.Scan(&w); err != nil {
			t.Fatal(err)
		}
		words = append(words, strings.ToLower(w))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(words) < 100 {
		t.Fatalf("%s lists %d keywords, want its catalog's hundreds", b.Name, len(words))
	}
	return words
}

// refusedAsTable reports whether the database of b refuses word, unquoted,
// as a table name or a schema name in the statements the store writes: a
// syntax error. The statements are only prepared (MySQL), or run in a
// transaction rolled back (PostgreSQL, SQLite): nothing is created.
func refusedAsTable(t *testing.T, b outboxsqltest.Backend, db *sql.DB, word string) bool {
	t.Helper()
	ctx := context.Background()
	for _, stmt := range []string{
		"CREATE TABLE " + word + " (a INTEGER)",
		"CREATE INDEX " + word + "_x_idx ON " + word + " (a)",
		"ALTER TABLE " + word + " ADD COLUMN b INTEGER",
		"SELECT a FROM " + word + " WHERE a = 1",
		"INSERT INTO " + word + " (a) VALUES (1)",
		"UPDATE " + word + " SET a = 1 WHERE a = 2",
		"DELETE FROM " + word + " WHERE a = 1",
		"SELECT a FROM " + word + ".t",
	} {
		var err error
		if b.Dialect == outboxsql.MySQL {
			var st *sql.Stmt
			if st, err = db.PrepareContext(ctx, stmt); err == nil {
				_ = st.Close()
			}
		} else {
			var tx *sql.Tx
			if tx, err = db.BeginTx(ctx, nil); err != nil {
				t.Fatal(err)
			}
			_, err = tx.ExecContext(ctx, stmt)
			_ = tx.Rollback()
		}
		if err != nil && strings.Contains(strings.ToLower(err.Error()), "syntax") {
			return true
		}
	}
	return false
}
