package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/sqlstore"
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
)

const (
	outboxTable = "torture_outbox"
	ordersTable = "torture_orders"
	ledgerTable = "torture_ledger"
	// hangTable records the hung event's one hanging delivery.
	hangTable = "torture_hang"
	// keysTable holds the aggregates of -ordered, startsTable every
	// delivery's start.
	keysTable   = "torture_keys"
	startsTable = "torture_starts"
)

// dialect returns the dialect -db names (any name sqlstore.LookupDialect
// knows), and its name as the rest of the harness spells it.
func dialect(name string) (outboxsql.Dialect, string, error) {
	d, err := sqlstore.LookupDialect(name)
	if err != nil {
		return nil, "", fmt.Errorf("-db: %w", err)
	}
	return d, d.Name(), nil
}

// defaultDSN is the DSN of the test server of d, else a temp SQLite file.
func defaultDSN(d outboxsql.Dialect) string {
	if dsn, ok := outboxsqltest.ServerDSN(d); ok {
		return dsn
	}
	return filepath.Join(os.TempDir(), "outbox-torture.db")
}

// open connects to the backend; dsn is a DSN of the dialect's driver or a
// URL (see sqlstore.ParseDSN), for SQLite a file path.
func open(c config) (*sql.DB, error) {
	d, _, err := dialect(c.db)
	if err != nil {
		return nil, err
	}
	src, err := sqlstore.ParseDSN(d, c.dsn)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open(src.Driver, src.DSN)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(16)
	for attempt := 0; ; attempt++ { // the coordinator may be cutting connections right now
		err := db.PingContext(context.Background())
		if err == nil {
			return db, nil
		}
		if attempt == 50 {
			db.Close()
			return nil, fmt.Errorf("connect to %s: %w", c.db, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// isolate creates the database named by c.ownDB on the server of c.dsn and
// points c.dsn at it, so that cutting "every connection to the database"
// never touches other users of the server's databases.
func isolate(c config) (config, error) {
	if c.ownDB == "" || c.db == "sqlite" {
		return c, nil
	}
	db, err := open(c)
	if err != nil {
		return c, err
	}
	defer db.Close()
	switch c.db {
	case "postgres":
		var exists bool
		if err := db.QueryRow("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", c.ownDB).Scan(&exists); err != nil {
			return c, err
		}
		if !exists {
			if _, err := db.Exec("CREATE DATABASE " + c.ownDB); err != nil {
				return c, err
			}
		}
		u, err := url.Parse(c.dsn)
		if err != nil || u.Scheme == "" {
			return c, fmt.Errorf("-own-db needs a postgres:// URL DSN, got %q", c.dsn)
		}
		u.Path = "/" + c.ownDB
		c.dsn = u.String()
	case "mysql":
		if _, err := db.Exec("CREATE DATABASE IF NOT EXISTS " + c.ownDB); err != nil {
			return c, err
		}
		slash := strings.LastIndex(c.dsn, "/")
		if slash < 0 {
			return c, fmt.Errorf("-own-db: cannot find the database name in %q", c.dsn)
		}
		rest := c.dsn[slash+1:]
		if q := strings.IndexByte(rest, '?'); q >= 0 {
			rest = rest[q:]
		} else {
			rest = ""
		}
		c.dsn = c.dsn[:slash+1] + c.ownDB + rest
	}
	return c, nil
}

// aggregateKey names the i-th aggregate of -ordered.
func aggregateKey(i int) string { return fmt.Sprintf("agg-%04d", i) }

// bind rewrites ? placeholders for the backend's dialect.
func bind(db, q string) string {
	d, _, err := dialect(db)
	if err != nil {
		return q
	}
	return outboxsql.Rebind(d, q)
}

// createTables drops and recreates the business, ledger, hang and outbox tables.
func createTables(ctx context.Context, c config, db *sql.DB) error {
	autoID := map[string]string{
		"sqlite":   "INTEGER PRIMARY KEY AUTOINCREMENT",
		"postgres": "BIGSERIAL PRIMARY KEY",
		"mysql":    "BIGINT AUTO_INCREMENT PRIMARY KEY",
	}[c.db]
	stmts := []string{
		"DROP TABLE IF EXISTS " + ordersTable,
		"DROP TABLE IF EXISTS " + ledgerTable,
		"DROP TABLE IF EXISTS " + outboxTable,
		"DROP TABLE IF EXISTS " + hangTable,
		"DROP TABLE IF EXISTS " + keysTable,
		"DROP TABLE IF EXISTS " + startsTable,
		"CREATE TABLE " + ordersTable + " (id VARCHAR(36) PRIMARY KEY, worker INT NOT NULL)",
		"CREATE TABLE " + ledgerTable + " (seq " + autoID + ", event_id VARCHAR(36) NOT NULL, worker INT NOT NULL, pid INT NOT NULL, attempt INT NOT NULL)",
		"CREATE INDEX " + ledgerTable + "_event ON " + ledgerTable + " (event_id)",
		"CREATE TABLE " + hangTable + " (event_id VARCHAR(36) PRIMARY KEY, worker INT NOT NULL, pid INT NOT NULL)",
		"CREATE TABLE " + keysTable + " (k VARCHAR(64) PRIMARY KEY, version INT NOT NULL)",
		"CREATE TABLE " + startsTable + " (seq " + autoID + ", event_id VARCHAR(36) NOT NULL, worker INT NOT NULL, start_us BIGINT NOT NULL)",
	}
	stmts = append(stmts, skewTables(c)...)
	stmts = append(stmts, relayTables(c)...)
	if c.ordered {
		rows := make([]string, c.keys)
		for i := range rows {
			rows[i] = fmt.Sprintf("('%s', 0)", aggregateKey(i))
		}
		stmts = append(stmts, "INSERT INTO "+keysTable+" (k, version) VALUES "+strings.Join(rows, ", "))
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	store, err := outboxsql.Open(db, outboxsql.WithTable(outboxTable))
	if err != nil {
		return err
	}
	if err := store.Migrate(ctx); err != nil {
		return err
	}
	return migrateInbox(ctx, c, db, store)
}
