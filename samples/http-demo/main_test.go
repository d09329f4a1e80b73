package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"
)

// TestMain fails the run if any goroutine outlives the tests: stopping the
// app must stop the outbox Client and the HTTP server and close the pool.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// demo is the service running on a SQLite file in the test's temp dir,
// served over real HTTP on loopback.
type demo struct {
	t     *testing.T
	url   string
	db    *sql.DB
	logs  *syncBuffer
	httpc *http.Client
}

func startDemo(t *testing.T, failListener bool) *demo {
	t.Helper()
	logs := &syncBuffer{}
	logger := zerolog.New(logs).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	var deps struct {
		fx.In
		API *API
		DB  *sql.DB
	}
	app := fxtest.New(t,
		appOptions(settings{dsn: filepath.Join(t.TempDir(), "demo.db"), failListener: failListener}, logger),
		fx.Populate(&deps))
	app.RequireStart()
	srv := httptest.NewServer(deps.API.Handler())
	t.Cleanup(func() {
		srv.Close()
		app.RequireStop()
	})
	return &demo{t: t, url: srv.URL, db: deps.DB, logs: logs, httpc: srv.Client()}
}

// do sends a request and decodes the JSON answer into out (if not nil).
func (d *demo) do(method, path, body string, out any) int {
	d.t.Helper()
	req, err := http.NewRequest(method, d.url+path, strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.httpc.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			d.t.Fatalf("%s %s: %d %q: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

type statsResp struct {
	ByStatus map[string]int64 `json:"by_status"`
	Pending  int64            `json:"pending"`
}

func (d *demo) stats() statsResp {
	d.t.Helper()
	var s statsResp
	if code := d.do("GET", "/outbox/stats", "", &s); code != http.StatusOK {
		d.t.Fatalf("stats: %d", code)
	}
	return s
}

func (d *demo) eventually(what string, cond func() bool) {
	d.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			d.t.Fatalf("timed out waiting for %s; stats %+v", what, d.stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *demo) placeOrder() Order {
	d.t.Helper()
	var o Order
	if code := d.do("POST", "/orders", `{"customer":"alice","amount_cents":1200}`, &o); code != http.StatusCreated {
		d.t.Fatalf("POST /orders: %d", code)
	}
	if o.ID == "" || o.EventID == "" || o.Status != "placed" {
		d.t.Fatalf("created order: %+v", o)
	}
	return o
}

func (d *demo) order(id string) Order {
	d.t.Helper()
	var o Order
	if code := d.do("GET", "/orders/"+id, "", &o); code != http.StatusOK {
		d.t.Fatalf("GET /orders/%s: %d", id, code)
	}
	return o
}

func TestCreateOrderIsDeliveredAndDone(t *testing.T) {
	d := startDemo(t, false)
	for _, path := range []string{"/livez", "/readyz"} {
		if code := d.do("GET", path, "", nil); code != http.StatusOK {
			t.Fatalf("%s: %d", path, code)
		}
	}
	o := d.placeOrder()
	d.eventually("the order shipped", func() bool { return d.order(o.ID).Status == "shipped" })
	d.eventually("its event DONE", func() bool { s := d.stats(); return s.ByStatus["DONE"] == 1 && s.Pending == 0 })
	if got := d.order(o.ID); got.ShippedAt == nil || got.EventID != o.EventID || got.AmountCents != 1200 {
		t.Fatalf("order after delivery: %+v", got)
	}
	if code := d.do("GET", "/orders/nope", "", nil); code != http.StatusNotFound {
		t.Fatalf("unknown order: %d", code)
	}
	// One structured log line per request.
	var seen bool
	for _, line := range strings.Split(strings.TrimSpace(d.logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["message"] == "http request" &&
			m["method"] == "POST" && m["path"] == "/orders" && m["status"] == float64(201) && m["request_id"] != "" {
			seen = true
		}
	}
	if !seen {
		t.Fatalf("no request log line for POST /orders:\n%s", d.logs.String())
	}
}

func TestFailingListenerGoesDeadThenReplayIsDone(t *testing.T) {
	d := startDemo(t, true) // as with -fail-listener
	o := d.placeOrder()
	d.eventually("the event DEAD", func() bool { return d.stats().ByStatus["DEAD"] == 1 })

	var dead struct {
		Total  int64       `json:"total"`
		Events []deadEvent `json:"events"`
	}
	if code := d.do("GET", "/outbox/dead", "", &dead); code != http.StatusOK || dead.Total != 1 || len(dead.Events) != 1 {
		t.Fatalf("GET /outbox/dead: %d %+v", code, dead)
	}
	ev := dead.Events[0]
	if ev.ID != o.EventID || ev.EventType != "OrderPlaced" || ev.AggregateID != o.ID || ev.Attempts != 3 ||
		!strings.Contains(ev.LastError, "shipping service unavailable") {
		t.Fatalf("dead event: %+v", ev)
	}
	if got := d.order(o.ID); got.Status != "placed" {
		t.Fatalf("order of a dead event: %+v", got)
	}

	// The downstream is fixed: replay the dead letter.
	if code := d.do("PUT", "/debug/shipping", `{"fail":false}`, nil); code != http.StatusOK {
		t.Fatalf("PUT /debug/shipping: %d", code)
	}
	var replayed map[string]string
	if code := d.do("POST", "/outbox/dead/"+ev.ID+"/replay", "", &replayed); code != http.StatusAccepted || replayed["status"] != "NEW" {
		t.Fatalf("replay: %d %v", code, replayed)
	}
	d.eventually("the replayed event DONE", func() bool {
		s := d.stats()
		return s.ByStatus["DONE"] == 1 && s.ByStatus["DEAD"] == 0 && s.Pending == 0
	})
	if got := d.order(o.ID); got.Status != "shipped" {
		t.Fatalf("order after replay: %+v", got)
	}
	if code := d.do("POST", "/outbox/dead/"+ev.ID+"/replay", "", nil); code != http.StatusNotFound {
		t.Fatalf("replaying a DONE event: %d, want 404", code)
	}
	if code := d.do("GET", "/outbox/dead?limit=0", "", nil); code != http.StatusBadRequest {
		t.Fatalf("bad limit: %d, want 400", code)
	}
}

func TestBadBodiesAreRejectedAndWriteNothing(t *testing.T) {
	d := startDemo(t, false)
	for _, tc := range []struct {
		body   string
		status int
		msg    string
	}{
		{``, 400, "invalid JSON body: the body is empty"},
		{`{"customer":"alice",`, 400, "invalid JSON body: it ends too early"},
		{`{"customer":"alice","amount_cents":12.5}`, 400, `invalid JSON body: field "amount_cents" must be an integer, not number 12.5`},
		{`customer=alice`, 400, "invalid JSON body: syntax error at byte 1: invalid character 'c' looking for beginning of value"},
		{`{"customer":"alice","amount_cents":"12"}`, 400, `invalid JSON body: field "amount_cents" must be an integer, not string`},
		{`{"customer":"alice","amount_cents":12,"coupon":"X"}`, 400, `invalid JSON body: unknown field "coupon"`},
		{`{"customer":"alice","amount_cents":12} {}`, 400, "invalid JSON body: unexpected data after the object"},
		{`{"customer":"  ","amount_cents":0}`, 422, "customer is required (1-200 characters); amount_cents must be a positive integer"},
	} {
		var e map[string]string
		if code := d.do("POST", "/orders", tc.body, &e); code != tc.status || e["error"] != tc.msg {
			t.Errorf("POST /orders %q: %d %q, want %d %q", tc.body, code, e["error"], tc.status, tc.msg)
		}
	}
	var orders int
	if err := d.db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM http_demo_orders`).Scan(&orders); err != nil {
		t.Fatal(err)
	}
	s := d.stats()
	if orders != 0 || s.ByStatus["NEW"]+s.ByStatus["DONE"]+s.ByStatus["RETRY"]+s.ByStatus["DEAD"] != 0 {
		t.Fatalf("bad requests wrote %d orders and outbox rows %v", orders, s.ByStatus)
	}
}
