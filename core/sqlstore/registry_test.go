package sqlstore

import (
	"errors"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// TestRegistryComplete: every dialect says everything the registry and the
// shared SQL ask of it, and no name, driver type or scheme belongs to two.
func TestRegistryComplete(t *testing.T) {
	if got := Dialects(); len(got) != 3 || got[0] != PostgreSQL || got[1] != MySQL || got[2] != SQLite {
		t.Fatalf("Dialects() = %v", got)
	}
	owner := map[string]string{}
	claim := func(kind, key, name string) {
		t.Helper()
		if prev, ok := owner[kind+" "+key]; ok && prev != name {
			t.Errorf("%s %q belongs to %s and %s", kind, key, prev, name)
		}
		owner[kind+" "+key] = name
	}
	for _, d := range registry {
		if d.title == "" || len(d.driverNames) == 0 || len(d.driverTypes) == 0 || len(d.schemes) == 0 || d.schemeSep == "" ||
			d.fromURL == nil || d.fromDSN == nil || d.heads == nil || d.headArgs == nil || d.openKey == nil || d.openKeyCol == "" {
			t.Errorf("%s: incomplete dialect: %+v", d.name, d)
		}
		for _, n := range append(append([]string{d.name}, d.aliases...), d.driverNames...) {
			claim("name", n, d.name)
			if got, err := LookupDialect(strings.ToUpper(n)); err != nil || got != d {
				t.Errorf("LookupDialect(%q) = %v, %v; want %s", n, got, err, d.name)
			}
		}
		for _, typ := range d.driverTypes {
			claim("driver type", typ, d.name)
			if pkg, name, ok := cutLast(typ, "."); !ok || !strings.Contains(pkg, "/") || name == "" {
				t.Errorf("%s: driver type %q is not <package path>.<type name>", d.name, typ)
			}
		}
		for _, s := range d.schemes {
			claim("scheme", s, d.name)
		}
		// The walk of heads binds as many arguments as its statement has
		// placeholders.
		args := d.headArgs("k", 10, "now", "recent")
		for _, typed := range []bool{false, true} {
			if n := strings.Count(d.rebind(d.heads(d, "t", false, typed), 1), "?"); d.placeholder(1) == "?" && n != len(args) {
				t.Errorf("%s: the walk of heads (typed %v) has %d placeholders and %d arguments", d.name, typed, n, len(args))
			}
		}
		// A dialect without its own claim takes heads with lockHeads.
		if (d.claim == nil) != (d.lockHeads != nil) {
			t.Errorf("%s: lockHeads set %v, own claim set %v", d.name, d.lockHeads != nil, d.claim != nil)
		}
	}
	// The names the ORMs give their dialects resolve (GORM dialector names,
	// bun's dialect names, sqlx's driver names).
	for name, want := range map[string]Dialect{"postgres": PostgreSQL, "pg": PostgreSQL, "pgx": PostgreSQL, "mysql": MySQL,
		"mariadb": MySQL, "sqlite": SQLite, "sqlite3": SQLite, "nrpostgres": PostgreSQL} {
		if got, err := LookupDialect(name); err != nil || got != want {
			t.Errorf("LookupDialect(%q) = %v, %v; want %s", name, got, err, want.Name())
		}
	}
	if _, err := LookupDialect("oracle"); !errors.Is(err, outbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "known: postgres") {
		t.Errorf("LookupDialect(oracle): %v", err)
	}
}

func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

type unknownDriver struct{}

func TestDriverDialectUnknown(t *testing.T) {
	for _, drv := range []any{&unknownDriver{}, nil} {
		d, err := DriverDialect(drv)
		if d != nil || !errors.Is(err, outbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "github.com/lib/pq.Driver") {
			t.Errorf("DriverDialect(%T) = %v, %v; want ErrInvalidConfig listing the known drivers", drv, d, err)
		}
	}
	if _, err := DriverDialect(&unknownDriver{}); !strings.Contains(err.Error(), "core/sqlstore.unknownDriver") {
		t.Errorf("the error does not name the driver's type: %v", err)
	}
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url     string
		dialect Dialect
		driver  string
		dsn     string
		display string
		path    string
	}{
		{"postgres://app:s3cret@db:5432/x?sslmode=disable", PostgreSQL, "pgx", "postgres://app:s3cret@db:5432/x?sslmode=disable", "postgres://app:xxxxx@db:5432/x?sslmode=disable", ""},
		{"postgresql://u@db/x", PostgreSQL, "pgx", "postgresql://u@db/x", "postgresql://u@db/x", ""},
		{"mysql://root@127.0.0.1:3306/test", MySQL, "mysql", "root@tcp(127.0.0.1:3306)/test?parseTime=true", "mysql://root@127.0.0.1:3306/test", ""},
		{"mysql://u:p%40ss:w@db/app?parseTime=false&tls=true", MySQL, "mysql", "u:p@ss:w@tcp(db)/app?parseTime=false&tls=true", "mysql://u:xxxxx@db/app?parseTime=false&tls=true", ""},
		{"MySQL://u@db/app?loc=UTC", MySQL, "mysql", "u@tcp(db)/app?loc=UTC&parseTime=true", "MySQL://u@db/app?loc=UTC", ""},
		{"postgres://app@db/x?sslpassword=k3y&sslmode=require", PostgreSQL, "pgx", "postgres://app@db/x?sslpassword=k3y&sslmode=require", "postgres://app@db/x?sslpassword=xxxxx&sslmode=require", ""},
		{"sqlite:data/orders.db", SQLite, "sqlite", SQLiteDSN("data/orders.db"), "sqlite:data/orders.db", "data/orders.db"},
		{"sqlite3:///tmp/o.db", SQLite, "sqlite", SQLiteDSN("/tmp/o.db"), "sqlite3:///tmp/o.db", "/tmp/o.db"},
		{"sqlite://localhost/tmp/o.db", SQLite, "sqlite", SQLiteDSN("/tmp/o.db"), "sqlite://localhost/tmp/o.db", "/tmp/o.db"},
		{"sqlite:my%20data.db", SQLite, "sqlite", SQLiteDSN("my data.db"), "sqlite:my%20data.db", "my data.db"},
		{"/tmp/orders.db", SQLite, "sqlite", SQLiteDSN("/tmp/orders.db"), "/tmp/orders.db", "/tmp/orders.db"},
		{"C:\\data\\o.db", SQLite, "sqlite", SQLiteDSN("C:\\data\\o.db"), "C:\\data\\o.db", "C:\\data\\o.db"},
		{"file:x.db?_pragma=busy_timeout(1)", SQLite, "sqlite", "file:x.db?_pragma=busy_timeout(1)", "file:x.db?_pragma=busy_timeout(1)", "x.db"},
	} {
		got, err := ParseURL(tc.url)
		want := Source{Dialect: tc.dialect, Driver: tc.driver, DSN: tc.dsn, Display: tc.display, Path: tc.path}
		if err != nil || got != want {
			t.Errorf("ParseURL(%q) =\n\t%+v, %v\nwant\t%+v", tc.url, got, err, want)
		}
	}
	for _, tc := range []struct{ url, want string }{
		{"", "empty database URL"},
		{"oracle://scott:hunter2@db/orcl", `unknown scheme "oracle": use postgres://, postgresql://, mysql://, sqlite:, sqlite3: or file:`},
		{"postgres://u:hunter2@db/%zz", "bad PostgreSQL URL: invalid URL escape"},
		{"postgres:hunter2", "bad PostgreSQL URL: write postgres://"},
		{"mysql://u:hunter2@/db", "bad MySQL URL: write mysql://"},
		{"mysql://u:hunter2@db:3306", `MySQL URL "mysql://u:xxxxx@db:3306" names no database`},
		{"mysql://u:hunter2@db/x?loc=Local", "MySQL DSN sets loc=Local: the outbox stores DATETIME in UTC"},
		{"mysql://u:hunter2@db/x?loc=Asia%2FTokyo", "loc=Asia/Tokyo"},
		{"sqlite:", "names no file"},
		{"sqlite:///tmp/", "names no file"},
		{"sqlite://db.example/x.db", "has a host"},
		{"sqlite:x.db?mode=ro", "takes no parameters"},
	} {
		_, err := ParseURL(tc.url)
		var ue *URLError
		if !errors.As(err, &ue) || !errors.Is(err, outbox.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseURL(%q): %v; want a *URLError wrapping ErrInvalidConfig saying %q", tc.url, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseURL(%q): the error echoes the password: %v", tc.url, err)
		}
	}
}

func TestParseDSN(t *testing.T) {
	for _, tc := range []struct {
		d            Dialect
		dsn          string
		driver, want string
		display      string
	}{
		{PostgreSQL, "host=db user=app password=s3cret", "pgx", "host=db user=app password=s3cret", "host=db user=app password=xxxxx"},
		{PostgreSQL, "postgres://app@db/x", "pgx", "postgres://app@db/x", "postgres://app@db/x"},
		// parseTime does not matter: the DSN is taken as it is.
		{MySQL, "root:s3cret@tcp(127.0.0.1:3306)/test", "mysql", "root:s3cret@tcp(127.0.0.1:3306)/test", "root:xxxxx@tcp(127.0.0.1:3306)/test"},
		{MySQL, "root@tcp(127.0.0.1:3306)/test?parseTime=true&loc=UTC", "mysql", "root@tcp(127.0.0.1:3306)/test?parseTime=true&loc=UTC", "root@tcp(127.0.0.1:3306)/test?parseTime=true&loc=UTC"},
		{MySQL, "mysql://root@db/test", "mysql", "root@tcp(db)/test?parseTime=true", "mysql://root@db/test"},
		{SQLite, "/tmp/t.db", "sqlite", SQLiteDSN("/tmp/t.db"), "/tmp/t.db"},
		{SQLite, "file:t.db?_txlock=immediate", "sqlite", "file:t.db?_txlock=immediate", "file:t.db?_txlock=immediate"},
	} {
		got, err := ParseDSN(tc.d, tc.dsn)
		if err != nil || got.Dialect != tc.d || got.Driver != tc.driver || got.DSN != tc.want || got.Display != tc.display {
			t.Errorf("ParseDSN(%s, %q) = %+v, %v; want %s %q shown as %q", tc.d, tc.dsn, got, err, tc.driver, tc.want, tc.display)
		}
	}
	for _, tc := range []struct {
		d        Dialect
		dsn, msg string
	}{
		{MySQL, "root:hunter2@tcp(db)/test?parseTime=true&loc=Local", "loc=Local"},
		{MySQL, "root:hunter2@tcp(db)", "names no database"},
		{SQLite, " ", "empty SQLite DSN"},
		{nil, "x", "no dialect"},
	} {
		_, err := ParseDSN(tc.d, tc.dsn)
		if !errors.Is(err, outbox.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseDSN(%v, %q): %v; want ErrInvalidConfig saying %q, no password", tc.d, tc.dsn, err, tc.msg)
		}
	}
}

// TestMySQLTimeText: DATETIME read as text (a pool without parseTime) is
// the UTC instant stored; a time in another location is refused.
func TestMySQLTimeText(t *testing.T) {
	want := time.Date(2026, 11, 28, 6, 30, 1, 123456000, time.UTC)
	for _, src := range []any{"2026-11-28 06:30:01.123456", []byte("2026-11-28 06:30:01.123456"), want} {
		got, err := scanMySQLTime(src)
		if err != nil || !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("scanMySQLTime(%T %v) = %v, %v; want %v", src, src, got, err, want)
		}
	}
	if got, err := scanMySQLTime("2026-11-28 06:30:01"); err != nil || !got.Equal(want.Truncate(time.Second)) {
		t.Errorf("DATETIME without fraction: %v, %v", got, err)
	}
	if _, err := scanMySQLTime("yesterday"); err == nil {
		t.Error("scanMySQLTime accepted text that is no DATETIME")
	}
	tokyo := time.FixedZone("JST", 9*3600)
	if _, err := scanMySQLTime(want.In(tokyo)); !errors.Is(err, outbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "loc") {
		t.Errorf("a time in another location: %v, want ErrInvalidConfig naming loc", err)
	}
}
