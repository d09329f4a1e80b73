package main

import (
	"database/sql"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	_ "modernc.org/sqlite"             // registers "sqlite"
)

// target is the database a --db URL names.
type target struct {
	// display names the database in messages, password masked.
	display string
	dialect outboxsql.Dialect
	// sqlitePath is the database file of a SQLite target, "" otherwise.
	sqlitePath string
	// open opens the database; it does not connect yet.
	open func() (*sql.DB, error)
}

// schemes lists the URL forms --db accepts, for messages.
const schemes = "postgres://, postgresql://, mysql:// or sqlite:"

// parseDBURL turns a --db value into a target. Errors are usage errors:
// the value is not a URL outboxctl understands.
//
//   - postgres://… and postgresql://… are handed to pgx's database/sql
//     driver as they are (any libpq URL parameter works: sslmode, …);
//   - mysql://user:pass@host:port/db?param=value becomes a
//     go-sql-driver/mysql configuration: user, password, TCP address (port
//     3306 by default), database, and the URL parameters as driver
//     parameters, with parseTime=true forced;
//   - sqlite:///abs/path.db, sqlite:rel/path.db, or a bare path to an
//     existing file open the file with modernc.org/sqlite, set up by
//     outboxsql.SQLiteDSN.
func parseDBURL(raw string) (*target, error) {
	if raw == "" {
		return nil, usageErr("no database: pass --db URL or set OUTBOX_DB (%s)", schemes)
	}
	scheme, _, hasScheme := strings.Cut(raw, ":")
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return postgresTarget(raw)
	case "mysql":
		return mysqlTarget(raw)
	case "sqlite", "sqlite3":
		return sqliteURLTarget(raw)
	}
	if fi, err := os.Stat(raw); err == nil && fi.Mode().IsRegular() {
		return sqliteTarget(raw, raw)
	}
	if hasScheme && strings.Contains(raw, "://") {
		return nil, usageErr("--db: unknown scheme %q: use %s", scheme, schemes)
	}
	if strings.ContainsAny(raw, ":@") { // perhaps a driver DSN, with a password
		return nil, usageErr("--db: not a URL (%s) and not an existing SQLite file", schemes)
	}
	return nil, usageErr("--db %q: not a URL (%s) and not an existing SQLite file", raw, schemes)
}

func postgresTarget(raw string) (*target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, usageErr("--db: bad PostgreSQL URL: %v", urlErr(err))
	}
	if u.Opaque != "" {
		return nil, usageErr("--db: bad PostgreSQL URL: write postgres://user:password@host:port/database")
	}
	return &target{
		display: u.Redacted(),
		dialect: outboxsql.PostgreSQL,
		open:    func() (*sql.DB, error) { return sql.Open("pgx", u.String()) },
	}, nil
}

func mysqlTarget(raw string) (*target, error) {
	cfg, display, err := mysqlConfig(raw)
	if err != nil {
		return nil, err
	}
	return &target{
		display: display,
		dialect: outboxsql.MySQL,
		open: func() (*sql.DB, error) {
			c, err := mysql.NewConnector(cfg)
			if err != nil {
				return nil, err
			}
			return sql.OpenDB(c), nil
		},
	}, nil
}

// mysqlConfig turns a mysql:// URL into the driver's configuration, and
// returns the URL with its password masked.
func mysqlConfig(raw string) (*mysql.Config, string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "", usageErr("--db: bad MySQL URL: %v", urlErr(err))
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, "", usageErr("--db: bad MySQL URL: write mysql://user:password@host:port/database")
	}
	// The URL's parameters are the driver's: parse them as a DSN with no
	// address, then fill in what the URL says.
	cfg, err := mysql.ParseDSN("/?" + u.RawQuery)
	if err != nil {
		return nil, "", usageErr("--db: bad MySQL URL parameters %q: %v", u.RawQuery, err)
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	port := u.Port()
	if port == "" {
		port = "3306"
	}
	cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(u.Hostname(), port)
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if cfg.DBName == "" || strings.Contains(cfg.DBName, "/") {
		return nil, "", usageErr("--db: MySQL URL %q names no database: write mysql://user:password@host:port/database", u.Redacted())
	}
	cfg.ParseTime = true // the outbox store needs DATETIME columns as time.Time
	if cfg.Loc == nil {
		cfg.Loc = time.UTC
	}
	return cfg, u.Redacted(), nil
}

// sqliteURLTarget reads sqlite:///abs/path.db (an empty host) and
// sqlite:rel/path.db (an opaque path, relative to the working directory).
func sqliteURLTarget(raw string) (*target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, usageErr("--db: bad SQLite URL: %v", urlErr(err))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, usageErr("--db: SQLite URL %q takes no parameters (outboxctl sets WAL and a busy timeout itself)", raw)
	}
	path := u.Opaque
	if path == "" {
		if u.Host != "" && u.Host != "localhost" {
			return nil, usageErr("--db: SQLite URL %q has a host: write sqlite:///absolute/path.db or sqlite:relative/path.db", raw)
		}
		path = u.Path
	} else if p, err := url.PathUnescape(path); err == nil {
		path = p
	}
	if path == "" || strings.HasSuffix(path, "/") {
		return nil, usageErr("--db: SQLite URL %q names no file", raw)
	}
	return sqliteTarget(raw, path)
}

func sqliteTarget(display, path string) (*target, error) {
	return &target{
		display:    display,
		dialect:    outboxsql.SQLite,
		sqlitePath: path,
		open:       func() (*sql.DB, error) { return sql.Open("sqlite", outboxsql.SQLiteDSN(path)) },
	}, nil
}

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

// urlErr returns the reason of a url.Parse error without the URL it
// quotes, which may hold a password.
func urlErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
