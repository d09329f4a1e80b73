package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/go-outbox/outbox/core/sqlstore"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
)

// The sample's tables: the order service's orders and outbox, the
// consumer's ledger and inbox. They are dropped and created at every run.
const (
	ordersTable = "relay_demo_orders"
	outboxTable = "relay_demo_outbox"
	ledgerTable = "relay_demo_ledger"
	inboxTable  = "relay_demo_inbox"
)

// openDB opens the database dbURL names (see sqlstore.ParseURL):
// postgres://… (pgx), mysql://… (go-sql-driver), sqlite:path or a file path
// (a fresh SQLite file: an existing one is removed).
func openDB(dbURL string) (*sql.DB, string, error) {
	src, err := sqlstore.ParseURL(dbURL)
	if err != nil {
		return nil, "", err
	}
	if path := src.Path; path != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, "", err
		}
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(path + suffix); err != nil && !os.IsNotExist(err) {
				return nil, "", err
			}
		}
	}
	db, err := sql.Open(src.Driver, src.DSN)
	return db, src.Display, err
}

// redact drops the password of a URL, for printing.
func redact(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		return u.Redacted()
	}
	return "(URL)"
}

// createTables drops the sample's business tables and creates them again:
// the order service's orders and the consumer's ledger. The ledger has no
// unique key on purpose: only the inbox keeps an event from being applied
// twice.
func createTables(ctx context.Context, db *sql.DB) error {
	for _, stmt := range []string{
		"DROP TABLE IF EXISTS " + ordersTable,
		"DROP TABLE IF EXISTS " + outboxTable,
		"DROP TABLE IF EXISTS " + ledgerTable,
		"DROP TABLE IF EXISTS " + inboxTable,
		"CREATE TABLE " + ordersTable + " (id VARCHAR(64) NOT NULL PRIMARY KEY, amount_cents INTEGER NOT NULL)",
		"CREATE TABLE " + ledgerTable + " (event_id VARCHAR(64) NOT NULL, order_id VARCHAR(64) NOT NULL, amount_cents INTEGER NOT NULL)",
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}
