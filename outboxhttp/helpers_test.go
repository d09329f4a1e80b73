package outboxhttp

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxadmin/outboxadmintest"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
	_ "github.com/go-sql-driver/mysql" // the mysql backend
	_ "github.com/jackc/pgx/v5/stdlib" // the postgres-pgx backend
	_ "github.com/lib/pq"              // the postgres-pq backend
	"go.uber.org/goleak"
	_ "modernc.org/sqlite" // the sqlite backend
)

// TestMain fails the test binary if a goroutine outlives the tests, once
// the server pools the tests share are closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(outboxsqltest.ClosingServers(m))
}

// sqlite is the embedded backend, for tests whose subject does not depend
// on the database.
func sqlite(t *testing.T) outboxsqltest.Backend {
	t.Helper()
	for _, b := range outboxsqltest.Backends() {
		if !b.IsServer() {
			return b
		}
	}
	t.Fatal("no embedded backend")
	return outboxsqltest.Backend{}
}

// env is one test's outbox table on one backend, a Client on it and the
// admin handler serving it on a test server.
type env struct {
	t      *testing.T
	b      outboxsqltest.Backend
	db     *sql.DB
	store  *outboxsql.Store
	txm    *outboxsql.TxManager
	client *outbox.Client
	h      *Handler
	srv    *httptest.Server
	log    *outboxtest.LogBuffer
}

// allowAll is an authorizer that allows every mutation.
func allowAll(*http.Request) error { return nil }

// newEnv opens a database of b with a fresh outbox table and serves it as
// source "orders" at the root of a test server. configure, if not nil,
// changes the handler's Config first; Authorize is allowAll unless it
// changes that.
func newEnv(t *testing.T, b outboxsqltest.Backend, configure func(*Config)) *env {
	t.Helper()
	logger, log := outboxtest.NewLogBuffer()
	e := &env{t: t, b: b, db: b.Open(t), log: log}
	e.store = b.NewStore(t, e.db)
	e.txm = outboxsql.NewTxManager(e.db)
	e.client = newClient(t, e.store, e.txm)
	cfg := Config{
		Sources:   []Source{{Name: "orders", Client: e.client, Events: e.store}},
		Authorize: allowAll,
		Logger:    logger,
	}
	if configure != nil {
		configure(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

// newClient returns a Client that writes to store and delivers nothing
// (the tests drive the events' states with the Store), closed at cleanup.
func newClient(t *testing.T, store outbox.Store, txm outbox.TxContext) *outbox.Client {
	t.Helper()
	c, err := outbox.New(outbox.Config{Store: store, TxContext: txm, Mode: outbox.ModeWriterOnly})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// seeded names the events seed wrote, by their state.
type seeded struct {
	pending []string // NEW, OrderPlaced on Order
	retry   string   // RETRY, OrderShipped on Order
	done    []string // DONE, OrderPlaced on Order
	// DEAD: placed (OrderPlaced on Order, JSON payload, a header, a
	// tenant), placed2 (OrderPlaced on Order), invoice (InvoiceSent on
	// Invoice, bytes payload), cancelled (OrderCancelled on Order).
	placed, placed2, invoice, cancelled string
	all                                 []string // every id, in id order
}

// dead returns the DEAD events, in id order.
func (s seeded) dead() []string { return []string{s.placed, s.placed2, s.invoice, s.cancelled} }

const placedJSON = `{"order":"o-1","total":42}`

var invoiceBytes = []byte{0x00, 0x01, 0xfe, 0xff, 'p', 'd', 'f'}

// seed writes nine events in one transaction, then drives them with the
// Store as a dispatcher would: two stay NEW, one is RETRY, two end DONE
// and four DEAD.
func (e *env) seed() seeded {
	t := e.t
	t.Helper()
	now := time.Now().UTC()
	ev := func(typ string, opts ...outbox.EnvelopeOption) outboxadmintest.Event {
		return outboxadmintest.Event{Envelope: outbox.MustEnvelope(outbox.EventName(typ), opts...)}
	}
	with := func(e outboxadmintest.Event, st outbox.Status, at time.Time, msg string) outboxadmintest.Event {
		e.Status, e.At, e.Error = st, at, msg
		return e
	}
	done := func(e outboxadmintest.Event) outboxadmintest.Event {
		return with(e, outbox.StatusDone, now.Add(-time.Hour), "")
	}
	dead := func(e outboxadmintest.Event, hoursAgo int) outboxadmintest.Event {
		return with(e, outbox.StatusDead, now.Add(-time.Duration(hoursAgo)*time.Hour), "boom: listener failed\nsecond line")
	}
	ids := outboxadmintest.Seed(t, e.client, e.store, e.txm,
		ev("OrderPlaced", order("o-1"), outbox.WithJSON([]byte(`{"n":1}`))),
		ev("OrderPlaced", order("o-2"), outbox.WithJSON([]byte(`{"n":2}`))),
		with(ev("OrderShipped", order("o-3"), outbox.WithJSON([]byte(`{"n":3}`))), outbox.StatusRetry, now.Add(time.Hour), "warehouse API: 503"),
		done(ev("OrderPlaced", order("o-4"), outbox.WithJSON([]byte(`{"n":4}`)))),
		done(ev("OrderPlaced", order("o-5"), outbox.WithJSON([]byte(`{"n":5}`)))),
		dead(ev("OrderPlaced", order("o-6"), outbox.WithJSON([]byte(placedJSON)),
			outbox.WithHeader("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), outbox.WithTenant("acme")), 4),
		dead(ev("OrderPlaced", order("o-7"), outbox.WithJSON([]byte(`{"n":7}`))), 3),
		dead(ev("InvoiceSent", outbox.WithAggregate(outbox.AggregateName("Invoice"), "i-9"), outbox.WithBytes(invoiceBytes)), 2),
		dead(ev("OrderCancelled", order("o-9"), outbox.WithJSON([]byte(`{"n":9}`))), 1),
	)
	return seeded{pending: ids[0:2], retry: ids[2], done: ids[3:5], placed: ids[5], placed2: ids[6], invoice: ids[7], cancelled: ids[8], all: ids}
}

func order(id string) outbox.EnvelopeOption {
	return outbox.WithAggregate(outbox.AggregateName("Order"), id)
}

// writeEvents writes events in one transaction and returns their ids.
func writeEvents(t *testing.T, c *outbox.Client, txm *outboxsql.TxManager, events ...outbox.Envelope) []string {
	t.Helper()
	return outboxadmintest.Write(t, c, txm, events...)
}

// snapshot describes every row of e's table with its state, to check that
// a refused or failed request changed nothing.
func (e *env) snapshot() []string { return outboxadmintest.Snapshot(e.t, e.store) }

// wantUnchanged fails t unless e's table is as before.
func (e *env) wantUnchanged(before []string) { outboxadmintest.WantUnchanged(e.t, e.store, before) }

// statuses returns the status of each id, "gone" for a deleted one.
func (e *env) statuses(ids ...string) []string { return outboxadmintest.Statuses(e.t, e.store, ids...) }

// response is one answer of the handler.
type response struct {
	status int
	header http.Header
	body   []byte
}

// req sends a request to the test server; a body is sent as JSON. hdr are
// header name/value pairs; a Content-Type among them replaces the JSON
// one, and an empty one sends none.
func (e *env) req(method, path, body string, hdr ...string) response {
	e.t.Helper()
	return do(e.t, e.srv.URL, method, path, body, hdr...)
}

func do(t *testing.T, base, method, path, body string, hdr ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequestWithContext(context.Background(), method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if method != http.MethodGet && method != http.MethodHead {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			r.Header.Del(hdr[i])
			continue
		}
		r.Header.Set(hdr[i], hdr[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// want fails t unless r has the status, and decodes its JSON body into v
// (when not nil), refusing unknown fields: the documented shape.
func (r response) want(t *testing.T, status int, v any) response {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if v == nil {
		return r
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Fatalf("Content-Type %q, want JSON; body %s", ct, r.body)
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("body is not the expected JSON: %v\n%s", err, r.body)
	}
	return r
}

// wantError fails t unless r is a JSON error with status and code whose
// message contains each of msgs.
func (r response) wantError(t *testing.T, status int, code string, msgs ...string) errorJSON {
	t.Helper()
	var e errorJSON
	r.want(t, status, &e)
	if e.Code != code || e.Error == "" {
		t.Fatalf("error %+v, want code %q and a message", e, code)
	}
	for _, m := range msgs {
		if !strings.Contains(e.Error, m) {
			t.Errorf("error %q does not contain %q", e.Error, m)
		}
	}
	return e
}

// ids returns the ids of events.
func ids(events []eventJSON) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}
