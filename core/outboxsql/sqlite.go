package outboxsql

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
	drivers:     []string{"modernc.org/sqlite.Driver"},
	schemaFile:  "schema/sqlite.sql",
	placeholder: questionMark,
	timeArg:     func(t time.Time) any { return t.UnixMicro() },
	scanTime:    scanUnixMicro,
	missingTable: func(err error) bool {
		return strings.Contains(err.Error(), "no such table")
	},
	maxBatch: 500,
}

func init() { register(sqliteDialect) }

func scanUnixMicro(src any) (time.Time, error) {
	switch v := src.(type) {
	case int64:
		return time.UnixMicro(v), nil
	case float64:
		return time.UnixMicro(int64(v)), nil
	case time.Time:
		return v, nil
	}
	return time.Time{}, fmt.Errorf("outboxsql: timestamp column holds %T %v, want INTEGER Unix microseconds", src, src)
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
