package main

import (
	"context"
	"database/sql"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/relay/relaytest"
	"github.com/go-outbox/outbox/core/sqlstore"
	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"
)

// TestMain fails the run if a goroutine outlives the tests: run closes its
// clients, consumer, connections and database.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The brokers of the tests: the shared servers, as in the sinks' tests.
const (
	envNATSURL = "OUTBOX_TEST_NATS_URL"
	envAMQPURL = "OUTBOX_TEST_AMQP_URL"
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// brokerURL returns the broker's URL from the environment (or the local
// default) and skips the test when nothing listens there (fails it under
// OUTBOX_TEST_REQUIRE_BROKERS=1).
func brokerURL(t *testing.T, broker string) string {
	t.Helper()
	env, def, what := envNATSURL, "nats://127.0.0.1:4222", "NATS"
	if broker == "amqp" {
		env, def, what = envAMQPURL, "amqp://guest:guest@127.0.0.1:5672/", "RabbitMQ"
	}
	raw := envOr(env, def)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s=%q: %v", env, raw, err)
	}
	relaytest.RequireTCP(t, what, u.Host)
	return raw
}

// serverURL returns the database URL of a server backend, in the forms the
// sample takes, and skips the test when the server cannot be reached
// (fails it under OUTBOX_TEST_REQUIRE_DBS=1).
func serverURL(t *testing.T, name string) string {
	t.Helper()
	var b outboxsqltest.Backend
	for _, cand := range outboxsqltest.Backends() {
		if cand.Name == name {
			b = cand
		}
	}
	dsn := b.DSN(t)
	driver, dbURL := "pgx", dsn
	if name == "mysql" {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatalf("%s: %v", b.EnvDSN, err)
		}
		u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + cfg.DBName}
		if cfg.Passwd != "" {
			u.User = url.UserPassword(cfg.User, cfg.Passwd)
		} else {
			u.User = url.User(cfg.User)
		}
		driver, dbURL = "mysql", u.String()
	}
	db, err := sql.Open(driver, dsn)
	if err == nil {
		err = db.PingContext(context.Background())
		_ = db.Close()
	}
	if err != nil {
		outboxsqltest.Unavailable(t, name+" at "+b.EnvDSN+" (or the local default)", err)
	}
	return dbURL
}

var summaryLine = regexp.MustCompile(`^written=\d+ relayed=\d+ applied=\d+ duplicates_suppressed=\d+$`)

// runSample runs the sample with n orders and checks its outcome: every
// order applied once, the redeliveries it injects reported as duplicates
// (and, on RabbitMQ, which does not deduplicate, the re-published events
// too).
func runSample(t *testing.T, dbURL, broker string, n int) {
	t.Helper()
	var story strings.Builder
	o := options{db: dbURL, broker: broker, orders: n, timeout: time.Minute, story: io.MultiWriter(t.Output(), &story), logOut: io.Discard}
	if broker == "amqp" {
		o.amqpURL = brokerURL(t, broker)
	} else {
		o.natsURL = brokerURL(t, broker)
	}
	sum, err := run(context.Background(), o)
	if err != nil {
		t.Fatalf("run: %v (%s)", err, sum)
	}
	t.Log(sum)
	if !summaryLine.MatchString(sum.String()) {
		t.Errorf("summary line %q", sum)
	}
	if sum.written != int64(n) || sum.applied != sum.written {
		t.Errorf("%s: want written=%d and applied as many", sum, n)
	}
	if sum.republished != int64(n/republishEvery) || sum.withheld != int64(n/withholdEvery) {
		t.Errorf("injected %d re-published events and %d withheld acknowledgements, want %d and %d",
			sum.republished, sum.withheld, n/republishEvery, n/withholdEvery)
	}
	if sum.relayed < sum.written+sum.republished {
		t.Errorf("%s: want at least %d relayed (every event, %d of them twice)", sum, sum.written+sum.republished, sum.republished)
	}
	wantDup := sum.withheld
	if broker == "amqp" {
		wantDup += sum.republished
	}
	if sum.duplicates < wantDup {
		t.Errorf("%s: want at least %d duplicates suppressed", sum, wantDup)
	}
	// The redeploy happened mid-run: the first relay had published some
	// events, not all of them.
	m := redeployLine.FindStringSubmatch(story.String())
	if m == nil {
		t.Fatalf("the story does not tell the redeploy:\n%s", story.String())
	}
	if before, _ := strconv.ParseInt(m[1], 10, 64); before == 0 || before >= sum.relayed {
		t.Errorf("the relay was redeployed after %d of %d publishes, want in between", before, sum.relayed)
	}
}

var redeployLine = regexp.MustCompile(`relay stopped \(a deploy\) after (\d+) publishes`)

func TestNATSOnSQLite(t *testing.T) {
	runSample(t, filepath.Join(t.TempDir(), "relay.db"), "nats", 200)
}

func TestRabbitMQOnSQLite(t *testing.T) {
	runSample(t, "sqlite:"+filepath.Join(t.TempDir(), "relay.db"), "amqp", 200)
}

func TestNATSOnPostgreSQL(t *testing.T) {
	runSample(t, serverURL(t, "postgres-pgx"), "nats", 100)
}

func TestRabbitMQOnMariaDB(t *testing.T) {
	runSample(t, serverURL(t, "mysql"), "amqp", 100)
}

func TestUnknownBroker(t *testing.T) {
	_, err := run(context.Background(), options{db: filepath.Join(t.TempDir(), "relay.db"), broker: "kafka", orders: 1,
		story: io.Discard, logOut: io.Discard})
	if err == nil || !regexp.MustCompile(`-broker "kafka"`).MatchString(err.Error()) {
		t.Fatalf("run with -broker kafka = %v, want an error naming the flag", err)
	}
}

func TestMySQLURL(t *testing.T) {
	src, err := sqlstore.ParseURL("mysql://app:s3cret@127.0.0.1:3306/shop?time_zone=%27%2B00%3A00%27")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(src.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "app" || cfg.Passwd != "s3cret" || cfg.Addr != "127.0.0.1:3306" || cfg.DBName != "shop" ||
		!cfg.ParseTime || cfg.Params["time_zone"] != "'+00:00'" {
		t.Fatalf("mysql URL parsed into %+v", cfg)
	}
	if _, _, err := openDB("mysql://%zz"); err == nil {
		t.Fatal("a malformed URL parsed")
	}
	if got := redact("postgres://u:pw@h/db"); got != "postgres://u:xxxxx@h/db" {
		t.Errorf("redact = %q", got)
	}
}
