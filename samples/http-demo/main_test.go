package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	outboxgorm "github.com/go-outbox/outbox/adapters/gorm"
	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxtest"
	"github.com/rs/zerolog"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"
	"gorm.io/gorm"
)

// TestMain fails the run if any goroutine outlives the tests: stopping the
// app must stop the outbox Client and the HTTP server and close the pool.
// With envRunMain=1 the test binary is the demo itself (see
// TestTheDemoIsQuietByDefault).
func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		main()
		return
	}
	goleak.VerifyTestMain(m)
}

// demo is the service running on a SQLite file in the test's temp dir,
// served over real HTTP on loopback.
type demo struct {
	t     *testing.T
	url   string
	db    *sql.DB
	logs  *outboxtest.LogBuffer
	httpc *http.Client
}

// startDemo starts the app with s (its database a new SQLite file) and
// extra options (fx.Populate, for example).
func startDemo(t *testing.T, s settings, extra ...fx.Option) *demo {
	t.Helper()
	logs := &outboxtest.LogBuffer{}
	logger := zerolog.New(logs).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	var deps struct {
		fx.In
		API *API
		DB  *sql.DB
	}
	s.dsn = filepath.Join(t.TempDir(), "demo.db")
	app := fxtest.New(t, appOptions(s, logger), fx.Populate(&deps), fx.Options(extra...))
	app.RequireStart()
	srv := httptest.NewServer(deps.API.Handler())
	httpc := srv.Client()
	httpc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	t.Cleanup(func() {
		srv.Close()
		app.RequireStop()
	})
	return &demo{t: t, url: srv.URL, db: deps.DB, logs: logs, httpc: httpc}
}

// do sends a request and decodes the JSON answer into out (if not nil).
// header are name/value pairs added to the request.
func (d *demo) do(method, path, body string, out any, header ...string) int {
	d.t.Helper()
	resp := d.send(method, path, body, header...)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			d.t.Fatalf("%s %s: %d %q: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

// send sends a JSON request with header (name/value pairs) and returns the
// response (redirects are not followed).
func (d *demo) send(method, path, body string, header ...string) *http.Response {
	d.t.Helper()
	req, err := http.NewRequest(method, d.url+path, strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := d.httpc.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	return resp
}

// statsResp is the part of the admin API's stats the tests read.
type statsResp struct {
	Counts  map[string]int64 `json:"counts"`
	Pending int64            `json:"pending"`
}

func (d *demo) stats() statsResp {
	d.t.Helper()
	var s statsResp
	if code := d.do("GET", "/admin/api/default/stats", "", &s); code != http.StatusOK {
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
	d := startDemo(t, settings{})
	for _, path := range []string{"/livez", "/readyz"} {
		if code := d.do("GET", path, "", nil); code != http.StatusOK {
			t.Fatalf("%s: %d", path, code)
		}
	}
	o := d.placeOrder()
	d.eventually("the order shipped", func() bool { return d.order(o.ID).Status == "shipped" })
	d.eventually("its event DONE", func() bool { s := d.stats(); return s.Counts["DONE"] == 1 && s.Pending == 0 })
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

// deadResp is the part of the admin API's dead-letter list the tests read.
type deadResp struct {
	Matching int64 `json:"matching"`
	Events   []struct {
		ID          string `json:"id"`
		Type        string `json:"type"`
		AggregateID string `json:"aggregate_id"`
		Attempts    int    `json:"attempts"`
		LastError   string `json:"last_error"`
	} `json:"events"`
}

// apiError is an error answer of the admin API.
type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

const adminToken = "s3cret"

func TestFailingListenerGoesDeadThenReplayIsDone(t *testing.T) {
	d := startDemo(t, settings{failListener: true, adminToken: adminToken}) // as with -fail-listener
	o := d.placeOrder()
	d.eventually("the event DEAD", func() bool { return d.stats().Counts["DEAD"] == 1 })

	var dead deadResp
	if code := d.do("GET", "/admin/api/default/dead", "", &dead); code != http.StatusOK || dead.Matching != 1 || len(dead.Events) != 1 {
		t.Fatalf("GET /admin/api/default/dead: %d %+v", code, dead)
	}
	ev := dead.Events[0]
	if ev.ID != o.EventID || ev.Type != "OrderPlaced" || ev.AggregateID != o.ID || ev.Attempts != 3 ||
		!strings.Contains(ev.LastError, "shipping service unavailable") {
		t.Fatalf("dead event: %+v", ev)
	}
	if got := d.order(o.ID); got.Status != "placed" {
		t.Fatalf("order of a dead event: %+v", got)
	}

	// The downstream is fixed: replay the dead letter, with the admin token.
	if code := d.do("PUT", "/debug/shipping", `{"fail":false}`, nil); code != http.StatusOK {
		t.Fatalf("PUT /debug/shipping: %d", code)
	}
	replay := "/admin/api/default/dead/" + ev.ID + "/replay"
	for _, auth := range []string{"", "Bearer wrong", "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:wrong"))} {
		var e apiError
		if code := d.do("POST", replay, "", &e, "Authorization", auth); code != http.StatusForbidden || e.Code != "forbidden" {
			t.Fatalf("replay with Authorization %q: %d %+v, want 403 forbidden", auth, code, e)
		}
	}
	if s := d.stats(); s.Counts["DEAD"] != 1 {
		t.Fatalf("a refused replay changed the outbox: %+v", s)
	}
	var replayed struct {
		Replayed int64    `json:"replayed"`
		IDs      []string `json:"ids"`
	}
	if code := d.do("POST", replay, "", &replayed, "Authorization", "Bearer "+adminToken); code != http.StatusOK ||
		replayed.Replayed != 1 || len(replayed.IDs) != 1 || replayed.IDs[0] != ev.ID {
		t.Fatalf("replay: %d %+v", code, replayed)
	}
	d.eventually("the replayed event DONE", func() bool {
		s := d.stats()
		return s.Counts["DONE"] == 1 && s.Counts["DEAD"] == 0 && s.Pending == 0
	})
	if got := d.order(o.ID); got.Status != "shipped" {
		t.Fatalf("order after replay: %+v", got)
	}
	var e apiError
	if code := d.do("POST", replay, "", &e, "Authorization", "Bearer "+adminToken); code != http.StatusNotFound ||
		e.Error != "event "+ev.ID+" is DONE, not DEAD; nothing changed" {
		t.Fatalf("replaying a DONE event: %d %+v, want 404", code, e)
	}
	if code := d.do("GET", "/admin/api/default/dead?limit=0", "", nil); code != http.StatusBadRequest {
		t.Fatalf("bad limit: %d, want 400", code)
	}
}

// TestAdminLogin: /admin/login asks a browser for the token with HTTP basic
// authentication and opens the page once it has it; with it, the page may
// replay and delete.
func TestAdminLogin(t *testing.T) {
	d := startDemo(t, settings{adminToken: adminToken})
	basic := func(user, password string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	}
	for _, auth := range []string{"", basic("ops", "wrong"), "Bearer wrong"} {
		resp := d.send("GET", "/admin/login", "", "Authorization", auth)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), `Basic realm="http-demo admin"`) {
			t.Errorf("login with Authorization %q: %d, WWW-Authenticate %q; want 401 and a basic challenge",
				auth, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	resp := d.send("GET", "/admin/login", "", "Authorization", basic("ops", adminToken))
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "./" {
		t.Fatalf("login with the token: %d, Location %q; want 303 to ./ (/admin/)", resp.StatusCode, resp.Header.Get("Location"))
	}
	var info struct {
		ReadOnly           bool   `json:"read_only"`
		Authorized         bool   `json:"authorized"`
		AuthorizationError string `json:"authorization_error"`
	}
	if code := d.do("GET", "/admin/api", "", &info, "Authorization", basic("ops", adminToken)); code != http.StatusOK || info.ReadOnly || !info.Authorized {
		t.Fatalf("GET /admin/api with the token: %d %+v", code, info)
	}
	info.AuthorizationError = ""
	if code := d.do("GET", "/admin/api", "", &info); code != http.StatusOK || info.Authorized || !strings.Contains(info.AuthorizationError, "/admin/login") {
		t.Fatalf("GET /admin/api without the token: %d %+v; want not authorized, pointing to /admin/login", code, info)
	}
}

// TestAdminIsReadOnlyWithoutAToken: without -admin-token the page and the
// API read, and refuse every change.
func TestAdminIsReadOnlyWithoutAToken(t *testing.T) {
	d := startDemo(t, settings{failListener: true})
	o := d.placeOrder()
	d.eventually("the event DEAD", func() bool { return d.stats().Counts["DEAD"] == 1 })

	resp := d.send("GET", "/admin", "")
	resp.Body.Close()
	if loc, err := resp.Location(); err != nil || resp.StatusCode/100 != 3 || loc.Path != "/admin/" {
		t.Errorf("GET /admin: %d, Location %v (%v); want a redirect to /admin/", resp.StatusCode, loc, err)
	}
	resp = d.send("GET", "/admin/", "")
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !bytes.Contains(page, []byte(`id="dead-table"`)) {
		t.Errorf("GET /admin/: %d %s, want the admin page", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var info struct {
		Title    string `json:"title"`
		ReadOnly bool   `json:"read_only"`
		Sources  []struct {
			Name string `json:"name"`
		} `json:"sources"`
	}
	if code := d.do("GET", "/admin/api", "", &info); code != http.StatusOK || info.Title != "http-demo — outbox" || !info.ReadOnly ||
		len(info.Sources) != 1 || info.Sources[0].Name != "default" {
		t.Fatalf("GET /admin/api: %d %+v; want the title, read-only, source default", code, info)
	}
	var e apiError
	if code := d.do("POST", "/admin/api/default/dead/"+o.EventID+"/replay", "", &e, "Authorization", "Bearer anything"); code != http.StatusForbidden || e.Code != "read_only" {
		t.Fatalf("replay on a read-only admin: %d %+v, want 403 read_only", code, e)
	}
	if code := d.do("GET", "/admin/login", "", &e); code != http.StatusNotFound || !strings.Contains(e.Error, "read-only") {
		t.Fatalf("GET /admin/login without a token: %d %+v, want 404 read-only", code, e)
	}
	if s := d.stats(); s.Counts["DEAD"] != 1 {
		t.Fatalf("a refused replay changed the outbox: %+v", s)
	}
}

func TestBadBodiesAreRejectedAndWriteNothing(t *testing.T) {
	d := startDemo(t, settings{})
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
	if orders != 0 || s.Counts["NEW"]+s.Counts["DONE"]+s.Counts["RETRY"]+s.Counts["DEAD"] != 0 {
		t.Fatalf("bad requests wrote %d orders and outbox rows %v", orders, s.Counts)
	}
}

// TestTheEventJoinsTheGORMTransaction: the data source's TxContext is the
// outboxgorm plugin's, so an event written in a GORM transaction that rolls
// back is gone with the order, and a write outside a transaction fails.
func TestTheEventJoinsTheGORMTransaction(t *testing.T) {
	var deps struct {
		fx.In
		GORM      *gorm.DB
		TxContext outbox.TxContext
		Client    *outbox.Client
	}
	d := startDemo(t, settings{}, fx.Populate(&deps))
	if _, ok := deps.TxContext.(*outboxgorm.TxContext); !ok {
		t.Fatalf("the data source's TxContext is %T, want *outboxgorm.TxContext", deps.TxContext)
	}
	ctx := context.Background()
	newEvent := func() outbox.Envelope {
		return outbox.MustEnvelope(orderPlaced, outbox.WithAggregate(orderAggregate, "o-1"), outbox.WithJSON([]byte(`{}`)))
	}
	errAbort := errors.New("abort")
	err := deps.GORM.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&orderRecord{ID: "o-1", Customer: "alice", AmountCents: 1, Status: "placed", CreatedAt: "now", EventID: "e"}).Error; err != nil {
			return err
		}
		if _, err := deps.Client.Write(outboxgorm.WithTx(ctx, tx), newEvent()); err != nil {
			return err
		}
		return errAbort
	})
	if !errors.Is(err, errAbort) {
		t.Fatalf("transaction: %v, want the abort", err)
	}
	if _, err := deps.Client.Write(ctx, newEvent()); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("write outside a transaction: %v, want ErrNoTransaction", err)
	}
	var orders int64
	if err := deps.GORM.WithContext(ctx).Model(&orderRecord{}).Count(&orders).Error; err != nil {
		t.Fatal(err)
	}
	if s := d.stats(); orders != 0 || s.Counts["NEW"]+s.Counts["DONE"]+s.Counts["RETRY"]+s.Counts["DEAD"] != 0 {
		t.Fatalf("a rolled-back transaction left %d orders and outbox rows %v", orders, s.Counts)
	}
}
