package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	outboxfx "github.com/go-outbox/outbox/fxmodule"
	"go.uber.org/goleak"
)

// TestMain fails the run if any goroutine outlives the tests: stopping the
// app must stop both data sources' Clients and close both pools.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func runSample(t *testing.T, urls map[string]string) string {
	t.Helper()
	var out, logs bytes.Buffer
	err := run(context.Background(), options{urls: urls, n: 5, timeout: 20 * time.Second, out: &out, logOut: &logs})
	if err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, out.String(), logs.String())
	}
	for _, want := range []string{
		"  orders  ", "  billing ", "ok: each data source delivered exactly its own events",
		"written 6, delivered 5, dead 1 (no listener), failed attempts 0",
		"written 6, delivered 6, dead 0 (no listener), failed attempts 1",
		"from the other data source 0, missing 0",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for _, want := range []string{"outbox_ds=orders", "outbox_ds=billing", "outbox: data source started"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
	return out.String()
}

func TestTwoSQLiteFiles(t *testing.T) {
	dir := t.TempDir()
	runSample(t, map[string]string{"orders": filepath.Join(dir, "orders.db"), "billing": "sqlite:" + filepath.Join(dir, "billing.db")})
}

func TestOneSQLiteFileTwoTables(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "shared.db")
	runSample(t, map[string]string{"orders": shared, "billing": shared})
}

// TestPostgresAndMySQL runs orders on PostgreSQL (pgx) and billing on
// MySQL/MariaDB, as `make demo-multi` can with -orders-dsn / -billing-dsn.
func TestPostgresAndMySQL(t *testing.T) {
	urls := map[string]string{
		"orders":  envOr("OUTBOX_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"billing": envOr("OUTBOX_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test"),
	}
	for ds, url := range urls {
		driver, dsn, err := outboxfx.ParseDatabaseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open(driver, dsn)
		if err == nil {
			err = db.PingContext(context.Background())
		}
		if err == nil {
			_, err = outboxsql.Open(db)
			if errors.Is(err, outbox.ErrInvalidConfig) {
				err = errors.New("outboxsql has no dialect for " + driver + " yet: " + err.Error())
			}
		}
		if db != nil {
			_ = db.Close()
		}
		if err != nil {
			if os.Getenv("OUTBOX_TEST_REQUIRE_DBS") == "1" {
				t.Fatalf("%s database %s: %v", ds, driver, err)
			}
			t.Skipf("SKIP: %s database (%s) unavailable: %v", ds, driver, err)
		}
	}
	runSample(t, urls)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
