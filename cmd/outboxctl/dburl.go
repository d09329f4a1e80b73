package main

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/sqlstore"
	_ "github.com/go-sql-driver/mysql" // registers "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	_ "modernc.org/sqlite"             // registers "sqlite"
)

// target is the database a --db URL names.
type target struct {
	// display names the database in messages, password masked.
	display string
	dialect outboxsql.Dialect
	// driver and dsn open the database with database/sql.
	driver, dsn string
	// sqlitePath is the database file of a SQLite target, "" otherwise.
	sqlitePath string
}

// schemes lists the URL forms --db accepts, for messages.
var schemes = strings.Join(sqlstore.URLForms(), ", ")

// parseDBURL turns a --db value into a target, as sqlstore.ParseURL reads
// it; a value that is no URL must be a driver DSN (PostgreSQL key=value,
// MySQL user:password@tcp(host)/db) or an existing SQLite file. Errors are
// usage errors: the value is not a URL outboxctl understands. No message
// shows a secret of the value (sqlstore.RedactDSN).
func parseDBURL(raw string) (*target, error) {
	if raw == "" {
		return nil, usageErr("no database: pass --db URL or set OUTBOX_DB (%s)", schemes)
	}
	src, err := sqlstore.ParseURL(raw)
	if scheme, _, hasScheme := strings.Cut(raw, ":"); !hasScheme || len(scheme) == 1 || errors.Is(err, sqlstore.ErrUnknownScheme) {
		fi, statErr := os.Stat(raw)
		switch {
		case statErr == nil && fi.Mode().IsRegular():
			src, err = sqlstore.ParseDSN(sqlstore.SQLite, raw)
		case hasScheme && strings.Contains(raw, "://"):
			return nil, usageErr("--db: unknown scheme %q: use %s", scheme, schemes)
		case sqlstore.DSNDialect(raw) != nil: // ParseDSN's Display is RedactDSN's
			src, err = sqlstore.ParseDSN(sqlstore.DSNDialect(raw), raw)
		default:
			return nil, usageErr("--db %q: not a URL (%s), not a driver DSN (host=… user=… or user:password@tcp(host)/database) and not an existing SQLite file",
				sqlstore.RedactDSN(raw), schemes)
		}
	}
	var ue *sqlstore.URLError
	if errors.As(err, &ue) {
		return nil, usageErr("--db: %s", ue.Reason)
	}
	if err != nil {
		return nil, usageErr("--db: %v", err)
	}
	// The driver reads its parameters as it opens the pool, before any
	// connection: a bad one is a usage error too.
	db, err := sql.Open(src.Driver, src.DSN)
	if err != nil {
		return nil, usageErr("--db %s: the driver refuses its parameters: %v", src.Display, err)
	}
	_ = db.Close()
	return &target{display: src.Display, dialect: src.Dialect, driver: src.Driver, dsn: src.DSN, sqlitePath: src.Path}, nil
}

// open opens the database; it does not connect yet.
func (t *target) open() (*sql.DB, error) { return sql.Open(t.driver, t.dsn) }

// checkExists fails with a not-found error when a SQLite target's file does
// not exist: opening it would create an empty database.
func (t *target) checkExists() error {
	if t.sqlitePath == "" {
		return nil
	}
	fi, err := os.Stat(t.sqlitePath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		abs, _ := filepath.Abs(t.sqlitePath)
		return notFoundErr("database file %s does not exist; run `outboxctl migrate --apply` to create it", abs)
	case err != nil:
		return failErr("database file %s: %v", t.sqlitePath, err)
	case !fi.Mode().IsRegular():
		return usageErr("--db: %s is not a file", t.sqlitePath)
	}
	return nil
}
