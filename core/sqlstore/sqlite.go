package sqlstore

import (
	"fmt"
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
	oneWriter:  true,
	maxBatch:   500,
	maxListIDs: 4096, // variables per statement: at most 32766 (SQLITE_MAX_VARIABLE_NUMBER)
	seq:        "rowid",
	openKey:    partialOpenKey,
	heads:      scalarHeads,
	upgrade:    sqliteUpgrade,
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
