// Package integration runs the outbox conformance suites against real
// databases through their drivers. Every backend is one entry of backends.
package integration

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxtest"

	_ "modernc.org/sqlite"
)

// Environment variables of the server backends.
const (
	envPostgresDSN = "OUTBOX_TEST_POSTGRES_DSN"
	envMySQLDSN    = "OUTBOX_TEST_MYSQL_DSN"
	envRequireDBs  = "OUTBOX_TEST_REQUIRE_DBS"
)

// backend is one (dialect × driver) under test.
type backend struct {
	name    string
	dialect outboxsql.Dialect
	// open returns the database one fixture uses: a fresh SQLite file, or
	// a pool shared by every fixture of a server backend (fixtures are then
	// isolated by their table).
	open func(t *testing.T) *sql.DB
}

// backends is every backend the suites run on. A new database or driver is
// one entry here (and its dialect in outboxsql).
var backends = []backend{
	{name: "sqlite", dialect: outboxsql.SQLite, open: openSQLite},
}

// openSQLite opens a new SQLite database file in the test's temp dir.
func openSQLite(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", outboxsql.SQLiteDSN(filepath.Join(t.TempDir(), "outbox.db")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

var (
	serversMu sync.Mutex
	servers   = map[string]*sql.DB{}
)

// openServer returns an open function for a database server: the DSN comes
// from envVar, else defaultDSN. The pool is opened once and shared. A server
// that cannot be reached skips the test loudly, or fails it when
// OUTBOX_TEST_REQUIRE_DBS=1 (as CI sets it).
func openServer(driver, envVar, defaultDSN string) func(t *testing.T) *sql.DB {
	return func(t *testing.T) *sql.DB {
		t.Helper()
		dsn := os.Getenv(envVar)
		if dsn == "" {
			dsn = defaultDSN
		}
		key := driver + " " + dsn
		serversMu.Lock()
		defer serversMu.Unlock()
		if db, ok := servers[key]; ok {
			return db
		}
		db, err := sql.Open(driver, dsn)
		if err == nil {
			err = db.PingContext(context.Background())
		}
		if err != nil {
			if db != nil {
				_ = db.Close()
			}
			unavailable(t, driver+" at "+envVar+" (or the local default)", err)
		}
		servers[key] = db
		return db
	}
}

// unavailable skips with a loud reason, or fails when OUTBOX_TEST_REQUIRE_DBS=1.
func unavailable(t *testing.T, what string, err error) {
	t.Helper()
	if os.Getenv(envRequireDBs) == "1" {
		t.Fatalf("%s is required (%s=1) but unavailable: %v", what, envRequireDBs, err)
	}
	t.Skipf("SKIPPED — %s unavailable: %v (set %s=1 to make this a failure)", what, err, envRequireDBs)
}

// quietLogger drops the logs of callbacks that panic on purpose.
var quietLogger = slog.New(slog.DiscardHandler)

// randomSuffix returns 8 random hex digits.
func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newFixture returns a store on a fresh table of b, migrated, dropped at cleanup.
func newFixture(t *testing.T, b backend) outboxtest.Fixture {
	t.Helper()
	db := b.open(t)
	table := "outbox_test_" + randomSuffix()
	store, err := outboxsql.New(b.dialect, outboxsql.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table) })
	txm := outboxsql.NewTxManager(db, outboxsql.WithTxLogger(quietLogger))
	return outboxtest.Fixture{Store: store, Purger: store, DB: db, TxContext: txm, InTx: txm.InTx, Table: table}
}

func forEachBackend(t *testing.T, run func(t *testing.T, newFixture func(t *testing.T) outboxtest.Fixture)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			run(t, func(t *testing.T) outboxtest.Fixture { return newFixture(t, b) })
		})
	}
}

func TestStoreSuite(t *testing.T) {
	forEachBackend(t, outboxtest.RunStoreSuite)
}

func TestTxContextSuite(t *testing.T) {
	forEachBackend(t, outboxtest.RunTxContextSuite)
}

func TestEndToEndSuite(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newFixture func(t *testing.T) outboxtest.Fixture) {
		outboxtest.RunEndToEndSuite(t, func(t *testing.T) outboxtest.Backend { return newFixture(t).Backend() })
	})
}
