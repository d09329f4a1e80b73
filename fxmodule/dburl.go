package outboxfx

import (
	"fmt"
	"net/url"
	"strings"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"go.uber.org/fx"
)

// ParseDatabaseURL maps a database URL, as given on a command line or in an
// environment variable, to a database/sql driver name and DSN. It imports no
// driver: the application imports the one it needs.
//
//	postgres://user:pass@host:5432/db?sslmode=disable  → "pgx" (github.com/jackc/pgx/v5/stdlib), the URL unchanged
//	postgresql://…                                    → the same
//	mysql://user:pass@host:3306/db?param=value         → "mysql" (github.com/go-sql-driver/mysql),
//	                                                     "user:pass@tcp(host:3306)/db?param=value&parseTime=true"
//	                                                     (parseTime=true unless the URL sets it)
//	sqlite:path/app.db, sqlite:///abs/app.db, app.db   → "sqlite" (modernc.org/sqlite), outboxsql.SQLiteDSN(path)
//	file:app.db?_pragma=…                              → "sqlite", the DSN unchanged
//
// Errors wrap outbox.ErrInvalidConfig and never echo a password.
func ParseDatabaseURL(raw string) (driverName, dsn string, err error) {
	raw = strings.TrimSpace(raw)
	scheme, rest, hasScheme := strings.Cut(raw, ":")
	if !hasScheme || len(scheme) == 1 { // a plain path (or a Windows drive letter)
		if raw == "" {
			return "", "", fmt.Errorf("%w: outboxfx: empty database URL", outbox.ErrInvalidConfig)
		}
		return "sqlite", outboxsql.SQLiteDSN(raw), nil
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return "pgx", raw, nil
	case "mysql":
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return "", "", fmt.Errorf("%w: outboxfx: MySQL URL must look like mysql://user:pass@host:3306/db", outbox.ErrInvalidConfig)
		}
		var b strings.Builder
		if u.User != nil {
			b.WriteString(u.User.Username())
			if p, ok := u.User.Password(); ok {
				b.WriteString(":" + p)
			}
			b.WriteString("@")
		}
		b.WriteString("tcp(" + u.Host + ")/" + strings.TrimPrefix(u.Path, "/"))
		q := u.RawQuery
		if !u.Query().Has("parseTime") {
			q = strings.TrimPrefix(q+"&parseTime=true", "&")
		}
		b.WriteString("?" + q)
		return "mysql", b.String(), nil
	case "sqlite", "sqlite3":
		path := strings.TrimPrefix(rest, "//")
		if path == "" {
			return "", "", fmt.Errorf("%w: outboxfx: SQLite URL %q names no file", outbox.ErrInvalidConfig, raw)
		}
		return "sqlite", outboxsql.SQLiteDSN(path), nil
	case "file":
		return "sqlite", raw, nil
	}
	return "", "", fmt.Errorf("%w: outboxfx: database URL scheme %q: want postgres://, mysql://, sqlite: or a file path", outbox.ErrInvalidConfig, scheme)
}

// SQLDBFromURL is SQLDB with the driver and DSN given by ParseDatabaseURL.
// A URL it cannot map makes the app fail to start.
func SQLDBFromURL(dataSource, databaseURL string) fx.Option {
	driver, dsn, err := ParseDatabaseURL(databaseURL)
	if err != nil {
		return fx.Error(fmt.Errorf("outboxfx: data source %q: %w", displayName(dataSource), err))
	}
	return SQLDB(dataSource, driver, dsn)
}
