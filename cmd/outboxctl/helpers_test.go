package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxadmin/outboxadmintest"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-sql-driver/mysql"
	_ "github.com/lib/pq" // the postgres-pq backend seeds through lib/pq
	"go.uber.org/goleak"
)

// TestMain fails the test binary if a goroutine outlives the tests, once
// the server pools the tests share are closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(outboxsqltest.ClosingServers(m))
}

// result is what one run of outboxctl printed and returned.
type result struct {
	code           int
	stdout, stderr string
}

// runPaged runs outboxctl on e's database and table, reading pages of
// size events while it pages through the table.
func (e *env) runPaged(size int, args ...string) result {
	e.t.Helper()
	var out, errOut bytes.Buffer
	c := newCLI(context.Background(), strings.NewReader(""), &out, &errOut)
	c.pageSize = size
	code := c.execute(append([]string{"--db", e.url, "--table", e.store.Table()}, args...))
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// runCLI runs outboxctl in-process with args, stdin (nil: empty, not a
// terminal), and returns its output.
func runCLI(t *testing.T, stdin io.Reader, args ...string) result {
	t.Helper()
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, stdin, &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// wantOK fails t unless r succeeded silently on stderr.
func (r result) wantOK(t *testing.T) result {
	t.Helper()
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("exit code %d, stderr %q; want 0 and nothing (stdout %q)", r.code, r.stderr, r.stdout)
	}
	return r
}

// wantErr fails t unless r exited with code, printing nothing on stdout and
// one line containing each of msgs on stderr.
func (r result) wantErr(t *testing.T, code int, msgs ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d (stderr %q, stdout %q)", r.code, code, r.stderr, r.stdout)
	}
	if r.stdout != "" {
		t.Errorf("stdout %q, want nothing", r.stdout)
	}
	if !strings.HasPrefix(r.stderr, "outboxctl: ") || !strings.HasSuffix(r.stderr, "\n") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr %q: want one line starting with \"outboxctl: \"", r.stderr)
	}
	for _, m := range msgs {
		if !strings.Contains(r.stderr, m) {
			t.Errorf("stderr %q does not contain %q", r.stderr, m)
		}
	}
}

// decode parses the JSON document of r's stdout into v.
func (r result) decode(t *testing.T, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("stdout is not the expected JSON: %v\n%s", err, r.stdout)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON document:\n%s", r.stdout)
	}
}

// env is one test's outbox table on one backend, and the --db URL of its
// database.
type env struct {
	t     *testing.T
	b     outboxsqltest.Backend
	db    *sql.DB
	store *outboxsql.Store
	url   string
	// display is how outboxctl names the database in messages.
	display string
}

// newEnv opens a database of b and creates a fresh outbox table in it
// (dropped at cleanup). On SQLite the database is a new file of the test.
func newEnv(t *testing.T, b outboxsqltest.Backend) *env {
	t.Helper()
	e := &env{t: t, b: b}
	if b.IsServer() {
		e.db = b.Open(t) // skips, or fails, when the server is down
		e.url = backendURL(t, b, b.DSN(t))
	} else {
		path := filepath.Join(t.TempDir(), "outbox.db")
		db, err := sql.Open(b.DriverName, outboxsql.SQLiteDSN(path))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		e.db, e.url = db, "sqlite://"+path
	}
	tgt, err := parseDBURL(e.url)
	if err != nil {
		t.Fatal(err)
	}
	e.display = tgt.display
	e.store = b.NewStore(t, e.db)
	return e
}

// backendURL turns the DSN of a server backend into the --db URL of the
// same database.
func backendURL(t *testing.T, b outboxsqltest.Backend, dsn string) string {
	t.Helper()
	switch b.Dialect.Name() {
	case "postgres":
		if u, err := url.Parse(dsn); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			t.Fatalf("%s=%q: outboxctl's tests need a postgres:// URL", b.EnvDSN, dsn)
		}
		return dsn
	case "mysql":
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil || cfg.Net != "tcp" {
			t.Fatalf("%s=%q: outboxctl's tests need a TCP DSN (%v)", b.EnvDSN, dsn, err)
		}
		u := url.URL{Scheme: "mysql", User: url.User(cfg.User), Host: cfg.Addr, Path: "/" + cfg.DBName}
		if cfg.Passwd != "" {
			u.User = url.UserPassword(cfg.User, cfg.Passwd)
		}
		if _, q, ok := strings.Cut(dsn, "?"); ok {
			u.RawQuery = q
		}
		return u.String()
	}
	t.Fatalf("no URL for backend %s", b.Name)
	return ""
}

// run runs outboxctl on e's database and table, with no terminal.
func (e *env) run(args ...string) result {
	e.t.Helper()
	return runCLI(e.t, nil, append([]string{"--db", e.url, "--table", e.store.Table()}, args...)...)
}

// seeded names the events seed wrote, by their state.
type seeded struct {
	pending []string // NEW
	doneOld []string // DONE 10 days ago
	doneNew string   // DONE 1 hour ago
	// DEAD: placedOld (OrderPlaced on Order, 48h ago, JSON payload and a
	// header), placedNew (OrderPlaced on Order, 1h ago), invoiceOld
	// (InvoiceSent on Invoice, 72h ago, bytes payload), cancelled
	// (OrderCancelled on Order, 30m ago).
	placedOld, placedNew, invoiceOld, cancelled string
}

// dead returns the DEAD events, in id (write) order.
func (s seeded) dead() []string {
	return []string{s.placedOld, s.placedNew, s.invoiceOld, s.cancelled}
}

// Payloads of the seeded events.
const placedJSON = `{"order":"o-1","total":42}`

var invoiceBytes = []byte{0x00, 0x01, 0xfe, 0xff, 'p', 'd', 'f'}

// seed writes nine events through an outbox Client in one transaction of
// outboxsql's TxManager, then drives them, as a dispatcher would, with the
// Store: two stay NEW, three end DONE and four DEAD, at chosen times. Two
// are of tenant acme: the first old DONE event and the old DEAD OrderPlaced.
func (e *env) seed() seeded {
	t := e.t
	t.Helper()
	txm := outboxsql.NewTxManager(e.db)
	client, err := outbox.New(outbox.Config{Store: e.store, TxContext: txm, Mode: outbox.ModeWriterOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := client.Close(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	now := time.Now().UTC()
	order := outbox.WithAggregate(outbox.AggregateName("Order"), "o-1")
	placed := func(payload string, opts ...outbox.EnvelopeOption) outbox.Envelope {
		return outbox.MustEnvelope(outbox.EventName("OrderPlaced"), append([]outbox.EnvelopeOption{order, outbox.WithJSON([]byte(payload))}, opts...)...)
	}
	dead := func(env outbox.Envelope, ago time.Duration) outboxadmintest.Event {
		return outboxadmintest.Event{Envelope: env, Status: outbox.StatusDead, At: now.Add(-ago), Error: "boom: listener failed\nsecond line"}
	}
	ids := outboxadmintest.Seed(t, client, e.store, txm,
		outboxadmintest.Event{Envelope: placed(`{"n":1}`)},
		outboxadmintest.Event{Envelope: placed(`{"n":2}`)},
		outboxadmintest.Event{Envelope: placed(`{"n":3}`, outbox.WithTenant("acme")), Status: outbox.StatusDone, At: now.Add(-240 * time.Hour)},
		outboxadmintest.Event{Envelope: placed(`{"n":4}`), Status: outbox.StatusDone, At: now.Add(-240 * time.Hour)},
		outboxadmintest.Event{Envelope: placed(`{"n":5}`), Status: outbox.StatusDone, At: now.Add(-time.Hour)},
		dead(placed(placedJSON, outbox.WithHeader("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), outbox.WithTenant("acme")), 48*time.Hour),
		dead(placed(`{"n":7}`), time.Hour),
		dead(outbox.MustEnvelope(outbox.EventName("InvoiceSent"), outbox.WithAggregate(outbox.AggregateName("Invoice"), "i-9"), outbox.WithBytes(invoiceBytes)), 72*time.Hour),
		dead(outbox.MustEnvelope(outbox.EventName("OrderCancelled"), order, outbox.WithJSON([]byte(`{"n":9}`))), 30*time.Minute),
	)
	return seeded{pending: ids[0:2], doneOld: ids[2:4], doneNew: ids[4],
		placedOld: ids[5], placedNew: ids[6], invoiceOld: ids[7], cancelled: ids[8]}
}

// snapshot describes every row of e's table with its state, to check that
// a refused or failed command changed nothing.
func (e *env) snapshot() []string { return outboxadmintest.Snapshot(e.t, e.store) }

// wantUnchanged fails t unless e's table is as before.
func (e *env) wantUnchanged(before []string) { outboxadmintest.WantUnchanged(e.t, e.store, before) }

// status returns the status of event id, or "gone".
func (e *env) status(id string) string { return e.statuses(id)[0] }

// statuses returns the status of each id, "gone" for one that is not in
// the table.
func (e *env) statuses(ids ...string) []string { return outboxadmintest.Statuses(e.t, e.store, ids...) }

// noTable is what outboxctl says of table, missing in e's database: check
// --table first (it lists e's own table among those found), and migrate
// only to create a new table.
func (e *env) noTable(table string) []string {
	want := []string{
		"table " + table + " does not exist in " + e.display + ". If the service uses another table, pass --table NAME or set OUTBOX_TABLE (outbox tables there: ",
		"); only to create a new, empty outbox table here, run `outboxctl --table " + table + " migrate --apply`",
	}
	// The message lists the first maxListedTables by name: the test's
	// own table only if the shared server has few others.
	rows, err := e.db.QueryContext(context.Background(), tablesQuery(e.b.Dialect))
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	if n <= maxListedTables {
		want = append(want, e.store.Table())
	}
	return want
}
