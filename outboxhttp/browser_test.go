package outboxhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxadmin/outboxadmintest"
	"github.com/go-outbox/outbox/core/outboxtest"
)

// Environment variables of the browser test.
const (
	// envRequireBrowser=1 makes a missing Chromium a failure, not a skip.
	envRequireBrowser = "OUTBOX_TEST_REQUIRE_BROWSER"
	// envChromium names the browser binary (default: chromium on PATH,
	// or /usr/bin/chromium).
	envChromium = "OUTBOX_TEST_CHROMIUM"
	// envScreenshot, when set, is the path the test writes a PNG
	// screenshot of the page to.
	envScreenshot = "OUTBOX_SCREENSHOT"
)

// chromium returns the path of the Chromium binary, or skips t (fails it
// under OUTBOX_TEST_REQUIRE_BROWSER=1) when there is none.
func chromium(t *testing.T) string {
	t.Helper()
	candidates := []string{"chromium", "chromium-browser", "/usr/bin/chromium"}
	if p := os.Getenv(envChromium); p != "" {
		candidates = []string{p}
	}
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("no Chromium (looked for %s; Debian: apt-get install chromium; or set %s)", strings.Join(candidates, ", "), envChromium)
	if os.Getenv(envRequireBrowser) == "1" {
		t.Fatalf("%s, and %s=1 requires one", msg, envRequireBrowser)
	}
	t.Skipf("SKIPPED — %s (set %s=1 to make this a failure)", msg, envRequireBrowser)
	return ""
}

// browser is a headless Chromium of one test, with a fresh profile, and
// the errors its pages wrote to the console (exceptions, failed loads,
// content security policy violations).
type browser struct {
	ctx context.Context

	mu     sync.Mutex
	errors []string
}

// newBrowser starts headless Chromium; it is closed at cleanup. Its
// context ends after two minutes, a guard against a hung browser (the
// test then fails), not a measure of speed.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 700),
	}
	guard, cancelGuard := context.WithTimeout(context.Background(), 2*time.Minute)
	actx, cancelAlloc := chromedp.NewExecAllocator(guard, opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &browser{ctx: ctx}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx) // closes the browser and waits for it
		cancel()
		cancelAlloc()
		cancelGuard()
		wg.Wait()
	})
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 700)); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	messages := chromedp.Console(ctx)
	wg.Go(func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == "error" {
				b.mu.Lock()
				b.errors = append(b.errors, m.String())
				b.mu.Unlock()
			}
		}
	})
	return b
}

// do runs steps in the browser and fails t on an error.
func (b *browser) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// text returns the visible text of the element sel selects.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// noErrors fails t if a page wrote an error to the console.
func (b *browser) noErrors(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errors) > 0 {
		t.Errorf("errors on the page's console:\n%s", strings.Join(b.errors, "\n"))
	}
}

// checkLayout fails t if the page is wider than the 1280 px window, if
// the table sel overflows its box, or if its last-error column is
// narrower than minErr pixels or than the aggregate column.
func (b *browser) checkLayout(t *testing.T, sel string, minErr float64) {
	t.Helper()
	js := fmt.Sprintf(`(() => {
		const t = document.querySelector(%q), col = (name) => [...t.querySelectorAll("thead th")].find((th) => th.textContent.trim() === name).getBoundingClientRect().width;
		return {page: document.documentElement.scrollWidth, window: document.documentElement.clientWidth,
			table: t.getBoundingClientRect().right, box: t.closest("section").getBoundingClientRect().right,
			err: col("Last error"), agg: col("Aggregate")};
	})()`, sel)
	got, err := chromedp.Run(b.ctx, chromedp.Evaluate[map[string]float64](js))
	if err != nil {
		t.Fatalf("layout of %s: %v", sel, err)
	}
	t.Logf("%s: page %.0f px in a %.0f px window; last error %.0f px, aggregate %.0f px", sel, got["page"], got["window"], got["err"], got["agg"])
	if got["page"] > got["window"] || got["table"] > got["box"] {
		t.Errorf("%s overflows at 1280 px: the page is %.0f px wide in a %.0f px window, the table ends at %.0f px in a box ending at %.0f px",
			sel, got["page"], got["window"], got["table"], got["box"])
	}
	if got["err"] < minErr || got["err"] < got["agg"] {
		t.Errorf("%s: the last-error column is %.0f px wide (the aggregate's %.0f px), want at least %.0f px and at least the aggregate's",
			sel, got["err"], got["agg"], minErr)
	}
}

// Steps of the tests, on CSS selectors.
func click(sel string) chromedp.Action[chromedp.Void] { return chromedp.Click(chromedp.CSS(sel)) }
func visible(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(sel))
}
func hidden(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitNotVisible(chromedp.CSS(sel))
}
func gone(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitNotPresent(chromedp.CSS(sel))
}

// mount serves h under /admin/outbox/ of a router that has routes of its
// own, and returns the page's URL.
func mount(t *testing.T, h http.Handler) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.Handle("/admin/outbox/", http.StripPrefix("/admin/outbox", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/admin/outbox/"
}

// showcase writes events an operator would see on a bad morning: orders
// placed and shipped, invoices and stock reservations failing.
type showcase struct {
	dead []string // DEAD, in id order
	// invoice is the first DEAD InvoiceSent, stock a DEAD StockReserved,
	// pending a NEW OrderShipped.
	invoice, stock, pending string
}

func (e *env) showcase() showcase {
	t := e.t
	t.Helper()
	now := time.Now().UTC()
	var events []outboxadmintest.Event
	add := func(n int, typ, agg, idPrefix, payload string, st outbox.Status, at time.Time, opts ...outbox.EnvelopeOption) {
		for i := range n {
			id := fmt.Sprintf("%s-%d", idPrefix, 1041+len(events)+i)
			events = append(events, outboxadmintest.Event{Envelope: outbox.MustEnvelope(outbox.EventName(typ),
				append([]outbox.EnvelopeOption{outbox.WithAggregate(outbox.AggregateName(agg), id),
					outbox.WithJSON(fmt.Appendf(nil, payload, id))}, opts...)...), Status: st, At: at})
		}
	}
	add(9, "OrderPlaced", "Order", "o", `{"order":%q,"total":42.5,"currency":"EUR"}`, outbox.StatusDone, now.Add(-time.Hour))
	add(3, "OrderShipped", "Order", "o", `{"order":%q,"carrier":"DHL"}`, outbox.StatusNew, time.Time{})
	add(1, "PaymentCaptured", "Payment", "p", `{"payment":%q}`, outbox.StatusRetry, now.Add(time.Hour))
	// Invoices have long ids, as ids made of a region and a UUID are.
	add(3, "InvoiceSent", "Invoice", "eu-west-1/inv-7f3e9c2a-4b1d-4e8f-9a6c-2d5b8e1f0c37", `{"invoice":%q,"to":"billing@example.com"}`, outbox.StatusDead, time.Time{}, outbox.WithTenant("acme"))
	add(2, "StockReserved", "Order", "o", `{"order":%q,"sku":"A-7","qty":2}`, outbox.StatusDead, time.Time{}, outbox.WithHeader("traceparent", trace))
	events[12].Error = "warehouse API: 503"
	errs := []string{"smtp 550: mailbox unavailable for billing@example.com", "smtp 550: mailbox unavailable for billing@example.com",
		"smtp 421: too many connections, try again later", "warehouse API: 503 Service Unavailable", "warehouse API: 409 Conflict: sku A-7 out of stock"}
	for i, msg := range errs { // DEAD ten minutes apart, the last ten minutes ago
		events[13+i].At, events[13+i].Error = now.Add(-time.Duration(50-10*i)*time.Minute), msg
	}
	// Written two hours ago, by a client whose clock says so.
	writer, err := outbox.New(outbox.Config{Store: e.store, TxContext: e.txm, Mode: outbox.ModeWriterOnly,
		Clock: outbox.ClockFunc(func() time.Time { return now.Add(-2 * time.Hour) })})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close(context.Background())
	ids := outboxadmintest.Seed(t, writer, e.store, e.txm, events...)
	return showcase{dead: ids[13:18], invoice: ids[13], stock: ids[16], pending: ids[9]}
}

const trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// row selects the row of event id in the dead-letter table.
func row(id string) string { return `#dead-table tbody tr[data-id="` + id + `"]` }

// TestBrowser runs the page in headless Chromium: it shows the DEAD
// events, replays one after confirmation (and leaves one whose deletion
// was cancelled), shows an event's payload, and in read-only mode has no
// buttons.
func TestBrowser(t *testing.T) {
	br := newBrowser(t)
	e := newEnv(t, sqlite(t), func(c *Config) { c.Title = "orders — outbox" })
	s := e.showcase()
	page := mount(t, e.h)

	br.do(t, "load the page", chromedp.Navigate(page), visible(`body[data-ready="true"]`), visible(row(s.invoice)))
	mode, dead, matching := br.text(t, "#mode"), br.text(t, "#stat-DEAD"), br.text(t, "#dead-matching")
	if mode != "operator actions enabled" || dead != "5" || matching != "5 DEAD events" {
		t.Errorf("mode %q, DEAD count %q, matching %q", mode, dead, matching)
	}
	if due := br.text(t, "#stat-due"); due != "3" { // the NEW events; the RETRY one is due in an hour
		t.Errorf("due now %q, want 3", due)
	}
	br.checkLayout(t, "#dead-table", 240)

	// Delete, then cancel: the event stays.
	br.do(t, "delete", click(row(s.stock)+` button[data-action="delete"]`), visible("#confirm"))
	if q := br.text(t, "#confirm-title"); q != "Delete DEAD event for good?" {
		t.Errorf("delete question %q", q)
	}
	br.do(t, "cancel", click("#confirm-cancel"), hidden("#confirm"))

	// Replay, confirmed: the row goes, the event is NEW.
	br.do(t, "replay", click(row(s.invoice)+` button[data-action="replay"]`), visible("#confirm"))
	if q, ids := br.text(t, "#confirm-title"), br.text(t, "#confirm-ids"); q != "Replay DEAD event?" || strings.TrimSpace(ids) != s.invoice {
		t.Errorf("replay question %q about %q", q, ids)
	}
	br.do(t, "confirm the replay", click("#confirm-ok"), gone(row(s.invoice)), visible("#notice"))
	if notice, matching := br.text(t, "#notice"), br.text(t, "#dead-matching"); !strings.HasPrefix(notice, "Replayed 1 event") || matching != "4 DEAD events" {
		t.Errorf("after the replay: notice %q, matching %q", notice, matching)
	}
	if got := e.statuses(s.dead...); !slices.Equal(got, []string{"NEW", "DEAD", "DEAD", "DEAD", "DEAD"}) {
		t.Errorf("statuses after the replay: %q", got)
	}

	// Two selected, replayed in one request.
	br.do(t, "replay selected",
		click(row(s.dead[1])+` input[type="checkbox"]`), click(row(s.dead[2])+` input[type="checkbox"]`),
		click("#replay-selected"), visible("#confirm"))
	if q := br.text(t, "#confirm-title"); q != "Replay 2 DEAD events?" {
		t.Errorf("replay question %q", q)
	}
	br.do(t, "confirm", click("#confirm-ok"), gone(row(s.dead[1])), gone(row(s.dead[2])))
	if got := e.statuses(s.dead...); !slices.Equal(got, []string{"NEW", "NEW", "NEW", "DEAD", "DEAD"}) {
		t.Errorf("statuses after replaying two: %q", got)
	}

	// The event's details, payload included.
	br.do(t, "show an event", click(row(s.stock)+` a.id`), visible("#detail"))
	if payload, headers := br.text(t, "#detail-payload"), br.text(t, "#detail-headers"); !strings.Contains(payload, `"sku": "A-7"`) || !strings.Contains(headers, trace) {
		t.Errorf("details: payload %q, headers %q", payload, headers)
	}
	if fields := br.text(t, "#detail-fields"); !strings.Contains(fields, "Died at") || strings.Contains(fields, "Done at") {
		t.Errorf("a DEAD event's details label its death time wrongly: %q", fields)
	}
	br.do(t, "close the event", click("#detail-close"), hidden("#detail"))

	// The events tab lists the replayed event as NEW.
	eventRow := `#events-table tbody tr[data-id="` + s.invoice + `"]`
	br.do(t, "events tab", click("#tab-events"), visible(eventRow))
	if status := br.text(t, eventRow+" .status"); status != "NEW" {
		t.Errorf("the replayed event's status on the events tab: %q", status)
	}
	br.checkLayout(t, "#events-table", 160)

	// Read-only: the same data, a banner, and no control that changes anything.
	ro, err := New(Config{Sources: []Source{{Name: "orders", Client: e.client, Events: e.store}}})
	if err != nil {
		t.Fatal(err)
	}
	br.do(t, "read-only page", chromedp.Navigate(mount(t, ro)), visible(`body[data-ready="true"]`), visible(row(s.stock)))
	controls, err := chromedp.Run(br.ctx, chromedp.Evaluate[int](`document.querySelectorAll('button[data-action], .mutate, #dead-table input').length`))
	if err != nil {
		t.Fatal(err)
	}
	if mode, banner := br.text(t, "#mode"), br.text(t, "#banner"); mode != "read-only" || !strings.HasPrefix(banner, "Read-only: this admin handler has no authorizer") || controls != 0 {
		t.Errorf("read-only page: mode %q, banner %q, %d controls that change things", mode, banner, controls)
	}
	if got := e.statuses(s.stock); got[0] != "DEAD" {
		t.Errorf("the event whose deletion was cancelled: %q", got)
	}

	// Back with the authorizer: filter, and replay all that match.
	typeFilter := chromedp.CSS(`#dead-filter input[name="type"]`)
	br.do(t, "filter by a type no DEAD event has",
		chromedp.Navigate(page), visible(`body[data-ready="true"]`), visible(row(s.stock)),
		chromedp.SetValue(typeFilter, "InvoiceSent"), click(`#dead-filter button[type="submit"]`), visible("#dead-empty"))
	br.do(t, "filter by StockReserved",
		chromedp.SetValue(typeFilter, "StockReserved"), click(`#dead-filter button[type="submit"]`), visible(row(s.stock)), hidden("#dead-empty"),
		click("#replay-all"), visible("#confirm"))
	if q, matching := br.text(t, "#confirm-title"), br.text(t, "#dead-matching"); q != "Replay all 2 matching DEAD events?" || matching != "2 DEAD events match the filter" {
		t.Errorf("replay all: question %q, matching %q", q, matching)
	}
	br.do(t, "confirm replay all", click("#confirm-ok"), gone(row(s.stock)), gone(row(s.dead[4])), visible("#dead-empty"))
	if got := e.statuses(s.dead...); !slices.Equal(got, []string{"NEW", "NEW", "NEW", "NEW", "NEW"}) {
		t.Errorf("statuses after replaying all: %q", got)
	}
	br.noErrors(t)
}

// TestBrowserControl runs the page's operator controls in headless
// Chromium: a pause made on the page is listed with its author and
// resumed; a pending event is forced DEAD with a reason from its details;
// a replay of all shows its dry run per type and tenant first; the audit
// tab lists the actions. The page serves a started Client whose route
// PaymentCaptured fails until its circuit breaker opens. With
// OUTBOX_SCREENSHOT=path it saves a screenshot of the page with its
// health, the paused route, the open breaker and the dead letters.
func TestBrowserControl(t *testing.T) {
	br := newBrowser(t)
	e := newEnv(t, sqlite(t), nil)
	s := e.showcase()
	logger, _ := outboxtest.NewLogBuffer()
	ops, err := outbox.New(outbox.Config{Store: bloatedStore{e.store}, TxContext: e.txm, Mode: outbox.ModeFull, Logger: logger,
		HorizonDeadTuples: bloatedConfig.HorizonDeadTuples, HorizonTableMegabytes: bloatedConfig.HorizonTableMegabytes,
		PollInterval: 50 * time.Millisecond, ControlInterval: 50 * time.Millisecond, MetricsInterval: 50 * time.Millisecond,
		BreakerFailures: 2, BreakerInterval: time.Hour, Routes: map[string]outbox.RoutePolicy{"PaymentCaptured": {Rate: 50, Concurrency: 4}},
		RetryPolicy: outbox.RetryPolicyFunc(func(int) time.Duration { return 10 * time.Millisecond })})
	if err != nil {
		t.Fatal(err)
	}
	for typ, err := range map[string]error{"PaymentCaptured": errors.New("payments API: 503 Service Unavailable"), "InvoiceSent": nil} {
		if err := ops.Handle(outbox.EventName(typ), func(context.Context, outbox.Envelope) error { return err }); err != nil {
			t.Fatal(err)
		}
	}
	if err := ops.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ops.Close(context.Background()) })
	h, err := New(Config{Sources: []Source{{Name: "orders", Client: ops, Events: e.store}}, Authorize: allowAll, Logger: logger,
		Title: "orders — outbox", Principal: func(*http.Request) string { return "alice@example.com" }})
	if err != nil {
		t.Fatal(err)
	}
	writeEvents(t, ops, e.txm, outbox.MustEnvelope(outbox.EventName("PaymentCaptured"), outbox.WithAggregate(outbox.AggregateName("Payment"), "p-2001"), outbox.WithJSON([]byte(`{"amount":12}`))),
		outbox.MustEnvelope(outbox.EventName("PaymentCaptured"), outbox.WithAggregate(outbox.AggregateName("Payment"), "p-2002"), outbox.WithJSON([]byte(`{"amount":30}`))))
	waitFor(t, "the breaker of PaymentCaptured to open", func() bool {
		hl, err := ops.Health(context.Background())
		return err == nil && slices.ContainsFunc(hl.Routes, func(r outbox.RouteState) bool { return r.Type == "PaymentCaptured" && r.Breaker == outbox.BreakerOpen })
	})
	page := mount(t, h)
	br.do(t, "load the page", chromedp.Navigate(page), visible(`body[data-ready="true"]`), visible(row(s.invoice)), visible("#pauses-empty"),
		visible(`#routes-table tbody tr[data-type="PaymentCaptured"] .breaker.open`))

	// Pause InvoiceSent from the form: listed with its author and reason.
	pauseRow := `#pauses-table tbody tr[data-scope="InvoiceSent"]`
	br.do(t, "pause",
		chromedp.SetValue(chromedp.CSS(`#pause-form input[name="scope"]`), "InvoiceSent"),
		chromedp.SetValue(chromedp.CSS(`#pause-form input[name="reason"]`), "SMTP relay down <b>since 09:12</b>"),
		click(`#pause-form button[type="submit"]`), visible(pauseRow))
	if got := br.text(t, pauseRow); !strings.Contains(got, "alice@example.com") || !strings.Contains(got, "SMTP relay down <b>since 09:12</b>") {
		t.Errorf("pause row %q: want the author and the reason as text", got)
	}
	ps, err := e.client.Pauses(context.Background())
	if err != nil || len(ps) != 1 || ps[0].Scope != "InvoiceSent" || ps[0].By != "alice@example.com" {
		t.Fatalf("stored pauses %+v (%v)", ps, err)
	}
	// The started Client obeys it within its ControlInterval: the route
	// shows paused once the page refreshes.
	waitFor(t, "the route InvoiceSent paused", func() bool {
		hl, err := ops.Health(context.Background())
		return err == nil && slices.ContainsFunc(hl.Routes, func(r outbox.RouteState) bool { return r.Type == "InvoiceSent" && r.Paused })
	})
	br.do(t, "refresh", click("#refresh"), visible(`#routes-table tbody tr[data-type="InvoiceSent"] .paused-tag`))
	if started, nodes := br.text(t, "#health-started"), br.text(t, "#health-breakers"); !strings.HasPrefix(started, "started") || nodes != "1" {
		t.Errorf("health: client %q, open breakers %q; want started and 1", started, nodes)
	}
	// The horizon guard's warnings, shown in the Storage panel, the
	// database's text as text.
	br.do(t, "the storage panel", visible(`#horizon-warnings li[data-check="holder_age"]`), visible(`#horizon-holders tbody tr[data-kind="transaction"]`))
	if got := br.text(t, `#horizon-warnings li[data-check="holder_age"]`); !strings.Contains(got, hostileApp) || !strings.Contains(got, "pid 48213") {
		t.Errorf("holder warning %q: want the pid and the application name as text", got)
	}
	if got := br.text(t, `#horizon-holders tbody tr[data-kind="transaction"]`); !strings.Contains(got, hostileApp) || !strings.Contains(got, "47m") {
		t.Errorf("holder row %q: want the application name as text and the age", got)
	}
	if imgs, err := chromedp.Run(br.ctx, chromedp.Evaluate[int](`document.querySelectorAll("#horizon-panel img").length`)); err != nil || imgs != 0 {
		t.Errorf("the holder's name became %d img elements (%v)", imgs, err)
	}
	t.Logf("storage panel:\n%s", br.text(t, "#horizon-panel"))
	if path := os.Getenv(envScreenshot); path != "" {
		png, err := chromedp.Run(br.ctx, chromedp.FullScreenshot(100))
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Fatalf("screenshot: not a PNG (%v)", err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot of the page: %s", path)
	}

	// Force a pending event DEAD from its details: a reason is required.
	pending := `#events-table tbody tr[data-id="` + s.pending + `"]`
	br.do(t, "events tab", click("#tab-events"), visible(pending), click(pending+" a.id"), visible("#detail"),
		click(`#detail-actions button[data-action="force-dead"]`), visible("#confirm"), visible("#confirm-reason"),
		click("#confirm-ok"))
	if e.statuses(s.pending)[0] != "NEW" || !br.isOpen(t, "#confirm") {
		t.Fatalf("force DEAD without a reason: status %s; the dialog must stay open", e.statuses(s.pending)[0])
	}
	br.do(t, "give a reason", chromedp.SetValue(chromedp.CSS("#confirm-reason"), "poison pill"), click("#confirm-ok"), hidden("#confirm"))
	waitFor(t, "the event forced DEAD", func() bool { return e.statuses(s.pending)[0] == "DEAD" })
	rec, err := e.store.Get(context.Background(), s.pending)
	if err != nil || rec.Status != outbox.StatusDead || !strings.HasSuffix(rec.LastError, ": poison pill") {
		t.Fatalf("after force DEAD: %v %q (%v)", rec.Status, rec.LastError, err)
	}

	// Replay all: the dialog shows the dry run, per type and tenant.
	br.do(t, "dead tab", click("#tab-dead"), visible(row(s.invoice)), click("#replay-all"), visible("#confirm"), visible("#confirm-plan"))
	if q, plan := br.text(t, "#confirm-title"), br.text(t, "#confirm-plan tbody"); q != "Replay all 6 matching DEAD events?" ||
		!strings.Contains(plan, "InvoiceSent") || !strings.Contains(plan, "acme") || !strings.Contains(plan, "StockReserved") {
		t.Errorf("replay all: question %q, plan %q", q, plan)
	}
	br.do(t, "cancel", click("#confirm-cancel"), hidden("#confirm"))

	// Resume, then the audit trail lists the three actions, newest first.
	br.do(t, "resume", click(pauseRow+` button[data-action="resume"]`), visible("#confirm"), click("#confirm-ok"), gone(pauseRow))
	br.do(t, "audit tab", click("#tab-audit"), visible("#audit-table tbody tr"))
	actions, err := chromedp.Run(br.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#audit-table tbody td.action")].map((td) => td.textContent)`))
	if err != nil || !slices.Equal(actions, []string{"resume", "force-dead", "pause"}) {
		t.Errorf("audit actions %q (%v), want resume, force-dead, pause", actions, err)
	}
	if got := br.text(t, "#audit-table tbody"); strings.Count(got, "alice@example.com") != 3 {
		t.Errorf("audit rows %q: want alice@example.com three times", got)
	}
	br.noErrors(t)
}

// waitFor waits, up to a minute, until cond holds; a minute is a guard
// against a hang, not a measure of speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// isOpen reports whether the dialog sel is open.
func (b *browser) isOpen(t *testing.T, sel string) bool {
	t.Helper()
	open, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelector(%q).open`, sel)))
	if err != nil {
		t.Fatal(err)
	}
	return open
}
