package main

import (
	"database/sql"
	"fmt"
	"time"

	outboxgorm "github.com/go-outbox/outbox/adapters/gorm"
	outbox "github.com/go-outbox/outbox/core"
	outboxfx "github.com/go-outbox/outbox/fxmodule"
	"github.com/rs/zerolog"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// newGormDB opens GORM on the data source's *sql.DB (the pool
// outboxfx.SQLDBFromURL opened for -dsn, which fx pings at start and closes
// after the outbox has stopped) and installs the outbox's GORM plugin right
// away, before any transaction can begin. The plugin's TxContext is what
// the data source's Client uses to find the transactions: see
// outboxfx.WithTxContext in appOptions.
func newGormDB(dsn string) func(db *sql.DB, log zerolog.Logger) (*gorm.DB, outbox.TxContext, error) {
	return func(db *sql.DB, log zerolog.Logger) (*gorm.DB, outbox.TxContext, error) {
		driver, _, err := outboxfx.ParseDatabaseURL(dsn)
		if err != nil {
			return nil, nil, err
		}
		var dialector gorm.Dialector
		switch driver {
		case "pgx":
			dialector = postgres.New(postgres.Config{Conn: db})
		case "mysql":
			// No SELECT VERSION() while the app is being built: the
			// database is first reached when the app starts.
			dialector = mysql.New(mysql.Config{Conn: db, SkipInitializeWithVersion: true})
		case "sqlite":
			dialector = sqlite.Dialector{Conn: db} // the pool's driver: modernc.org/sqlite, no cgo
		default:
			return nil, nil, fmt.Errorf("http-demo: no GORM dialector for driver %q", driver)
		}
		gdb, err := gorm.Open(dialector, &gorm.Config{
			DisableAutomaticPing: true, // the data source pings when the app starts
			Logger: logger.New(gormLog{log}, logger.Config{
				SlowThreshold:             200 * time.Millisecond,
				LogLevel:                  logger.Warn,
				IgnoreRecordNotFoundError: true, // Orders.Get answers 404
			}),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("http-demo: open GORM: %w", err)
		}
		tc, err := outboxgorm.New(gdb)
		if err != nil {
			return nil, nil, err
		}
		return gdb, tc, nil
	}
}

// gormLog sends GORM's warnings (slow and failed statements) to the app's
// log instead of standard output, which carries the traces.
type gormLog struct{ log zerolog.Logger }

func (g gormLog) Printf(format string, args ...any) {
	g.log.Warn().Str("component", "gorm").Msgf(format, args...)
}
