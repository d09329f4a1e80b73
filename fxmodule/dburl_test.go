package outboxfx_test

import (
	"errors"
	"strings"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	outboxfx "github.com/go-outbox/outbox/fxmodule"
)

func TestParseDatabaseURL(t *testing.T) {
	for _, tc := range []struct{ url, driver, dsn string }{
		{"postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "pgx", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"},
		{"postgresql://u:p@db/x", "pgx", "postgresql://u:p@db/x"},
		{"mysql://root@127.0.0.1:3306/test", "mysql", "root@tcp(127.0.0.1:3306)/test?parseTime=true"},
		{"mysql://u:s3cret@db:3307/app?parseTime=false&tls=true", "mysql", "u:s3cret@tcp(db:3307)/app?parseTime=false&tls=true"},
		{"mysql://u@db/app?tls=true", "mysql", "u@tcp(db)/app?tls=true&parseTime=true"},
		{"sqlite:data/orders.db", "sqlite", outboxsql.SQLiteDSN("data/orders.db")},
		{"sqlite:///tmp/orders.db", "sqlite", outboxsql.SQLiteDSN("/tmp/orders.db")},
		{"/tmp/orders.db", "sqlite", outboxsql.SQLiteDSN("/tmp/orders.db")},
		{"orders.db", "sqlite", outboxsql.SQLiteDSN("orders.db")},
		{"file:x.db?_pragma=busy_timeout(1)", "sqlite", "file:x.db?_pragma=busy_timeout(1)"},
	} {
		driver, dsn, err := outboxfx.ParseDatabaseURL(tc.url)
		if err != nil || driver != tc.driver || dsn != tc.dsn {
			t.Errorf("ParseDatabaseURL(%q) = %q, %q, %v; want %q, %q", tc.url, driver, dsn, err, tc.driver, tc.dsn)
		}
	}
	for _, bad := range []string{"", "oracle://x", "mysql://u:hunter2@/db", "sqlite:"} {
		_, _, err := outboxfx.ParseDatabaseURL(bad)
		if !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("ParseDatabaseURL(%q): %v, want ErrInvalidConfig", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error echoes the password: %v", err)
		}
	}
	if err := appErr(outboxfx.SQLDBFromURL("orders", "oracle://db")); err == nil || !strings.Contains(err.Error(), `data source "orders"`) {
		t.Errorf("SQLDBFromURL with a bad URL: %v", err)
	}
}
