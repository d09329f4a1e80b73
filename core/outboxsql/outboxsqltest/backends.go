package outboxsqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-outbox/outbox/core/outboxsql"
)

// Environment variables of the server backends.
const (
	EnvPostgresDSN = "OUTBOX_TEST_POSTGRES_DSN"
	EnvMySQLDSN    = "OUTBOX_TEST_MYSQL_DSN"
	EnvRequireDBs  = "OUTBOX_TEST_REQUIRE_DBS"
)

// The local servers used when the environment names none.
const (
	DefaultPostgresDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	DefaultMySQLDSN    = "root@tcp(127.0.0.1:3306)/test?parseTime=true"
)

// Backend is one (dialect × driver) under test.
type Backend struct {
	// Name names the backend in subtest names, such as "sqlite".
	Name string
	// Dialect is the outboxsql dialect of the database.
	Dialect outboxsql.Dialect
	// DriverName is the database/sql driver the test binary must register.
	DriverName string
	// EnvDSN is the environment variable holding a server backend's DSN;
	// empty for an embedded database.
	EnvDSN string
	// defaultDSN is the server's DSN when EnvDSN is not set.
	defaultDSN string
	// fileDSN returns the DSN of an embedded database file at path.
	fileDSN func(path string) string
	// zoneDSN returns a server's DSN with the session time zone set to
	// SessionZone; nil for a database without session time zones.
	zoneDSN func(dsn string) string
	// Options are the store options of the backend's storage mode, which
	// NewStore passes (such as outboxsql.WithPartitions).
	Options []outboxsql.Option
	// Variant marks a backend that is another one in another storage mode
	// (Options): RunAll runs it, for the suites of the stores; Run does
	// not, for the tests of what lies above a store (adapters, tools),
	// which its storage does not change.
	Variant bool
}

// backends is every backend the suites run on.
var backends = []Backend{
	{Name: "sqlite", Dialect: outboxsql.SQLite, DriverName: "sqlite", fileDSN: outboxsql.SQLiteDSN},
	{Name: "postgres-pq", Dialect: outboxsql.PostgreSQL, DriverName: "postgres", EnvDSN: EnvPostgresDSN, defaultDSN: DefaultPostgresDSN, zoneDSN: postgresZoneDSN},
	{Name: "postgres-pgx", Dialect: outboxsql.PostgreSQL, DriverName: "pgx", EnvDSN: EnvPostgresDSN, defaultDSN: DefaultPostgresDSN, zoneDSN: postgresZoneDSN},
	{Name: "postgres-partitioned", Dialect: outboxsql.PostgreSQL, DriverName: "pgx", EnvDSN: EnvPostgresDSN, defaultDSN: DefaultPostgresDSN, zoneDSN: postgresZoneDSN,
		Options: []outboxsql.Option{outboxsql.WithPartitions(time.Hour)}, Variant: true},
	{Name: "mysql", Dialect: outboxsql.MySQL, DriverName: "mysql", EnvDSN: EnvMySQLDSN, defaultDSN: DefaultMySQLDSN, zoneDSN: mysqlZoneDSN},
}

// Backends returns every backend, for tests that run on each.
func Backends() []Backend { return slices.Clone(backends) }

// Run runs fn as one subtest per backend, storage variants aside (see
// Backend.Variant).
func Run(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	for _, b := range backends {
		if !b.Variant {
			t.Run(b.Name, func(t *testing.T) { fn(t, b) })
		}
	}
}

// RunAll runs fn as one subtest per backend, storage variants included.
func RunAll(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) { fn(t, b) })
	}
}

// IsServer reports whether the backend is a database server (shared by the
// tests, which isolate themselves by table) rather than an embedded file.
func (b Backend) IsServer() bool { return b.EnvDSN != "" }

// DSN returns the data source name of a database for one test: a new,
// empty SQLite file in the test's temp dir, or the server's DSN (from
// EnvDSN, else the local default). Open it with DriverName or through an
// adapter's own Open; call Open first to skip when the server is down.
func (b Backend) DSN(t *testing.T) string {
	t.Helper()
	if !b.IsServer() {
		return b.fileDSN(filepath.Join(t.TempDir(), "outbox.db"))
	}
	if dsn := os.Getenv(b.EnvDSN); dsn != "" {
		return dsn
	}
	return b.defaultDSN
}

// ServerDSN returns the DSN of d's test server (from the backend's EnvDSN,
// else the local default), for programs that run on it outside a test
// (torture, benchmarks); false for a dialect without a server backend.
func ServerDSN(d outboxsql.Dialect) (string, bool) {
	for _, b := range backends {
		if b.Dialect == d && b.IsServer() {
			if dsn := os.Getenv(b.EnvDSN); dsn != "" {
				return dsn, true
			}
			return b.defaultDSN, true
		}
	}
	return "", false
}

// Pool is a connection pool that the tests of a binary share: a *sql.DB,
// or an ORM's database over one.
type Pool interface {
	PingContext(ctx context.Context) error
	Close() error
}

var (
	serversMu sync.Mutex
	servers   = map[string]Pool{}
)

// Open returns the database one fixture uses: a fresh SQLite file (closed at
// cleanup), or a pool to the server shared by every fixture of the test
// binary (fixtures are then isolated by their tables) until CloseServers. A
// server that cannot be reached skips the test, or fails it under
// OUTBOX_TEST_REQUIRE_DBS=1.
func (b Backend) Open(t *testing.T) *sql.DB {
	t.Helper()
	return Shared(t, b, "database/sql", func(dsn string) (*sql.DB, error) { return sql.Open(b.DriverName, dsn) })
}

// Shared is Open for a database that an adapter opens its own way: open
// opens b's database at dsn, through b.DriverName. On SQLite, Shared calls
// it for every test, on a fresh file, and closes the database at cleanup. On
// a server, it calls it once for the whole test binary, pings the pool (see
// Open for a server that cannot be reached) and returns that pool to every
// test until CloseServers. name names the way open opens the database
// ("database/sql" is Open's), so that only pools opened the same way are
// shared.
func Shared[P Pool](t *testing.T, b Backend, name string, open func(dsn string) (P, error)) P {
	t.Helper()
	dsn := b.DSN(t)
	if !b.IsServer() {
		db, err := open(dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	key := name + " " + b.DriverName + " " + dsn
	serversMu.Lock()
	defer serversMu.Unlock()
	if pool, ok := servers[key]; ok {
		db, ok := pool.(P)
		if !ok {
			t.Fatalf("outboxsqltest: the pool shared as %q is a %T, not a %T", name, pool, db)
		}
		return db
	}
	db, err := open(dsn)
	if err == nil {
		if err = db.PingContext(context.Background()); err != nil {
			_ = db.Close()
		}
	}
	if err != nil {
		Unavailable(t, b.Name+" ("+b.DriverName+") at "+b.EnvDSN+" (or the local default)", err)
	}
	servers[key] = db
	return db
}

// CloseServers closes the server pools that Open and Shared keep for the
// tests of a binary; an Open or Shared after it opens new ones. A TestMain
// calls it once the tests ran, before it looks for goroutines that outlive
// them (see ClosingServers): the pools' own goroutines (database/sql's
// connection opener, a driver's watcher per connection) are then gone.
func CloseServers() {
	serversMu.Lock()
	defer serversMu.Unlock()
	for key, db := range servers {
		_ = db.Close()
		delete(servers, key)
	}
}

// M runs the tests of a binary, like *testing.M.
type M interface{ Run() int }

// ClosingServers returns m whose Run runs the tests, then CloseServers. A
// TestMain that fails the binary when a goroutine outlives the tests hands
// it to the leak check, which then finds none of the shared pools':
//
//	func TestMain(m *testing.M) {
//		goleak.VerifyTestMain(outboxsqltest.ClosingServers(m))
//	}
func ClosingServers(m M) M { return closingServers{m} }

type closingServers struct{ m M }

func (c closingServers) Run() int {
	defer CloseServers()
	return c.m.Run()
}

// NewStore returns a Store of b's dialect on a new table with a random name
// in db, migrated, and dropped at cleanup with its control tables.
func (b Backend) NewStore(t *testing.T, db *sql.DB, opts ...outboxsql.Option) *outboxsql.Store {
	t.Helper()
	table := TableName("outbox_test")
	opts = append(append([]outboxsql.Option{outboxsql.WithDialect(b.Dialect)}, b.Options...), opts...)
	store, err := outboxsql.Open(db, append(opts, outboxsql.WithTable(table))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { DropTables(db, store) })
	if err := store.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return store
}

// DropTables drops the table of store and its control tables from db,
// those that exist: a test's cleanup.
func DropTables(db *sql.DB, store *outboxsql.Store) {
	for _, table := range append([]string{store.Table()}, store.ControlTables()...) {
		_, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table)
	}
}

// Unavailable skips t with a loud reason, or fails it when
// OUTBOX_TEST_REQUIRE_DBS=1.
func Unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv(EnvRequireDBs) == "1" {
		t.Fatalf("%s is required (%s=1) but unavailable: %v", what, EnvRequireDBs, err)
	}
	t.Skipf("SKIPPED — %s unavailable: %v (set %s=1 to make this a failure)", what, err, EnvRequireDBs)
}

// TableName returns prefix followed by an underscore and 8 random hex
// digits: a table name no other test uses.
func TableName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// SessionZone is the session time zone of ZonedDSN: Asia/Tokyo, nine hours
// east of UTC without daylight saving time. A store that compared wall
// clocks in it would deliver events nine hours late.
const SessionZone = "Asia/Tokyo"

// ZonedDSN returns the server's DSN (see DSN) with the database session's
// time zone set to SessionZone, and false for an embedded database, which
// has no session time zone.
func (b Backend) ZonedDSN(t *testing.T) (string, bool) {
	t.Helper()
	if b.zoneDSN == nil {
		return "", false
	}
	return b.zoneDSN(b.DSN(t)), true
}

// postgresZoneDSN sets the TimeZone run-time parameter, which lib/pq and
// pgx both pass to the server at connection start.
func postgresZoneDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("timezone", SessionZone)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " timezone=" + SessionZone // key=value form
}

// mysqlZoneDSN sets the session variable time_zone (as an offset: named
// zones need the server's time zone tables). The driver's loc stays UTC.
func mysqlZoneDSN(dsn string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "time_zone=" + url.QueryEscape("'+09:00'")
}
