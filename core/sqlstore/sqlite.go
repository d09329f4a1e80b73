package sqlstore

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// SQLite is the dialect of SQLite 3.35 or later (for UPDATE … RETURNING), as
// served by modernc.org/sqlite. Timestamps are stored as INTEGER Unix
// microseconds in UTC; the claim is a single UPDATE … RETURNING statement
// over a partial index of pending rows.
var SQLite Dialect = sqliteDialect

var sqliteDialect = &dialect{
	name:        "sqlite",
	title:       "SQLite",
	driverNames: []string{"sqlite", "sqlite3", "nrsqlite3"},
	driverTypes: []string{"modernc.org/sqlite.Driver", "github.com/mattn/go-sqlite3.SQLiteDriver"},
	schemes:     []string{"sqlite", "sqlite3", "file"},
	schemeSep:   ":",
	fromURL:     sqliteURL,
	fromDSN:     sqlitePath,
	embedded:    true,
	// The keywords of SQLite (sqlite3_keyword_name) it refuses as an
	// unquoted table name (see ValidateTableName).
	reserved: "add all alter and as autoincrement between case check collate commit constraint create " +
		"default deferrable delete distinct drop else escape except exists foreign from group " +
		"having if in index insert intersect into is isnull join limit not nothing notnull null " +
		"on or order primary references returning select set table then to transaction union " +
		"unique update using values when where",
	schemaFile:  "schema/sqlite.sql",
	placeholder: questionMark,
	timeArg:     func(t time.Time) any { return t.UnixMicro() },
	scanTime:    scanUnixMicro,
	missingTable: func(err error) bool {
		return strings.Contains(err.Error(), "no such table")
	},
	uniqueViolation: func(err error) bool {
		return strings.Contains(err.Error(), "UNIQUE constraint failed")
	},
	columnQuery: func(schema, name string) (string, []any) {
		if schema == "" {
			schema = "main"
		}
		return "SELECT COUNT(*) FROM pragma_table_info(?, ?) WHERE name = ?", []any{name, schema}
	},
	indexQuery: func(schema, name string) (string, []any) {
		if schema != "" {
			schema += "." // a validated identifier: safe in SQL text
		}
		return "SELECT name FROM " + schema + "sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL", []any{name}
	},
	oneWriter:   true,
	maxBatch:    500,
	maxListIDs:  4096, // variables per statement: at most 32766 (SQLITE_MAX_VARIABLE_NUMBER)
	rowID:       "rowid",
	seq:         "rowid",
	openKey:     partialOpenKey,
	openKeyCol:  partialOpenKeyCol,
	openKeyCond: partialOpenKeyCond,
	heads:       scalarHeads,
	repark:      partialRepark,
	sweep:       partialSweep,
	headArgs: func(cursor string, limit int, now, recent any) []any {
		return []any{cursor, limit, now, recent}
	},
	lockHeads: func(t, set, claimable, selectList string) (string, string) {
		return "UPDATE " + t + " SET " + set + " WHERE " + claimable, " RETURNING " + selectList
	},
	upgrade:      sqliteUpgrade,
	pendingRows:  partialPendingRows,
	claimedWhere: partialClaimedWhere,
	owedWhere:    partialOwedWhere,
	// The span of the rowids: the rows inserted since the oldest that is
	// left, less none of those deleted since.
	rowsEstimate: func(table string) (string, []any) {
		return "SELECT COALESCE((SELECT MAX(rowid) FROM " + table + ") - (SELECT MIN(rowid) FROM " + table + ") + 1, 0)", nil
	},
	upsert: excludedUpsert,
}

func scanUnixMicro(src any) (time.Time, error) {
	switch v := src.(type) {
	case int64:
		return time.UnixMicro(v), nil
	case float64:
		return time.UnixMicro(int64(v)), nil
	case time.Time:
		return v, nil
	}
	return time.Time{}, fmt.Errorf("sqlstore: timestamp column holds %T %v, want INTEGER Unix microseconds", src, src)
}

// SQLiteDSN returns a modernc.org/sqlite data source name for the database
// file at path, set up for an outbox shared by concurrent writers:
//
//   - journal_mode(WAL): readers do not block the writer and vice versa;
//   - busy_timeout(10000): a connection that finds the database locked waits
//     up to 10 s instead of failing at once with SQLITE_BUSY;
//   - _txlock=immediate: transactions take the write lock at BEGIN, so two
//     transactions that read and then write cannot deadlock on the lock
//     upgrade (which SQLite reports as SQLITE_BUSY without waiting);
//   - foreign_keys(1): enforce foreign keys, off by default in SQLite.
func SQLiteDSN(path string) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// sqlitePath opens the database file at path with SQLiteDSN.
func sqlitePath(d *dialect, path string) (Source, error) {
	return Source{Dialect: d, Driver: d.driverNames[0], DSN: SQLiteDSN(path), Display: path, Path: path}, nil
}

// sqliteURL reads sqlite:///abs/path.db (an empty host), sqlite:rel/path.db
// (an opaque path, relative to the working directory), a plain path, and a
// file: URI, which is the driver's DSN and is taken as it is.
func sqliteURL(d *dialect, raw string) (Source, error) {
	scheme, rest, hasScheme := strings.Cut(raw, ":")
	if !hasScheme || len(scheme) == 1 {
		return sqlitePath(d, raw)
	}
	if strings.EqualFold(scheme, "file") {
		path, _, _ := strings.Cut(rest, "?")
		return Source{Dialect: d, Driver: d.driverNames[0], DSN: raw, Display: raw, Path: strings.TrimPrefix(path, "//")}, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Source{}, urlErr("bad SQLite URL: %v", parseURLErr(err))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return Source{}, urlErr("SQLite URL %q takes no parameters (it is opened with WAL and a busy timeout; "+
			"a file: URI is taken as the driver's DSN)", raw)
	}
	path := u.Opaque
	if path == "" {
		if u.Host != "" && u.Host != "localhost" {
			return Source{}, urlErr("SQLite URL %q has a host: write sqlite:///absolute/path.db or sqlite:relative/path.db", raw)
		}
		path = u.Path
	} else if p, err := url.PathUnescape(path); err == nil {
		path = p
	}
	if path == "" || strings.HasSuffix(path, "/") {
		return Source{}, urlErr("SQLite URL %q names no file", raw)
	}
	s, err := sqlitePath(d, path)
	s.Display = raw
	return s, err
}
