package outboxfx

import (
	"fmt"

	"github.com/go-outbox/outbox/core/sqlstore"
	"go.uber.org/fx"
)

// ParseDatabaseURL maps a database URL, as given on a command line or in an
// environment variable, to a database/sql driver name and DSN, as
// sqlstore.ParseURL does. It imports no driver: the application imports
// the one it needs.
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
	src, err := sqlstore.ParseURL(raw)
	if err != nil {
		return "", "", fmt.Errorf("outboxfx: %w", err)
	}
	return src.Driver, src.DSN, nil
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
