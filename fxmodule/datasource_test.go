package outboxfx_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxtest"
	"github.com/go-outbox/outbox/core/sqlstore"
	outboxfx "github.com/go-outbox/outbox/fxmodule"
	"github.com/rs/zerolog"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"
	_ "modernc.org/sqlite"
)

type orderEvent string

func (e orderEvent) Name() string { return string(e) }

const (
	orderPlaced   orderEvent = "OrderPlaced"
	invoiceIssued orderEvent = "InvoiceIssued"
)

const (
	orderAggregate = outbox.AggregateName("Order")
	cartAggregate  = outbox.AggregateName("Cart")
)

// fastConfig creates the schema and polls and retries quickly.
var fastConfig = outboxfx.Config{Migrate: true, Config: outbox.Config{
	PollInterval: 50 * time.Millisecond, RetryBase: 10 * time.Millisecond,
	RetryMax: 50 * time.Millisecond, DrainTimeout: 2 * time.Second,
}}

// ledger records which data source delivered which event, and how often.
type ledger struct {
	mu   sync.Mutex
	seen map[string]map[string]int // data source → event id → deliveries
}

func newLedger() *ledger { return &ledger{seen: map[string]map[string]int{}} }

// listener is the shared listener code: every data source routes to it,
// each with its own tag.
func (l *ledger) listener(ds string) outbox.Listener {
	return outbox.ListenerFunc(func(_ context.Context, e outbox.Envelope) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.seen[ds] == nil {
			l.seen[ds] = map[string]int{}
		}
		l.seen[ds][e.ID()]++
		return nil
	})
}

func (l *ledger) ids(ds string) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for id, n := range l.seen[ds] {
		out[id] = n
	}
	return out
}

func dsn(t *testing.T, name string) string {
	return outboxsql.SQLiteDSN(filepath.Join(t.TempDir(), name+".db"))
}

// reopen opens the database at dsn again, for looking at the table after the
// app (which closes its pool on stop) has stopped.
func reopen(t *testing.T, dsn string) *outboxsql.Store {
	t.Helper()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	store, err := outboxsql.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

func testLogger(buf *outboxtest.LogBuffer) zerolog.Logger {
	return zerolog.New(buf).Level(zerolog.DebugLevel).With().Timestamp().Logger()
}

// write commits n events on aggregate type at, one transaction each,
// through the data source's TxManager and Client, and returns their ids.
func write(t *testing.T, txm *outboxsql.TxManager, c *outbox.Client, at outbox.AggregateType, et outbox.EventType, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		err := txm.InTx(context.Background(), func(ctx context.Context) error {
			e, err := outbox.NewEnvelope(et, outbox.WithAggregate(at, fmt.Sprintf("o-%d", i)), outbox.WithJSON([]byte(`{}`)))
			if err != nil {
				return err
			}
			got, err := c.Write(ctx, e)
			ids = append(ids, got...)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func countStatus(t *testing.T, c *outbox.Client, s outbox.Status) int64 {
	t.Helper()
	stats, err := c.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return stats.ByStatus[s]
}

// logLine returns the first JSON log line with message msg, or nil.
func logLine(t *testing.T, logs *outboxtest.LogBuffer, msg string) map[string]any {
	t.Helper()
	for _, line := range logs.JSONLines(t) {
		if line["message"] == msg {
			return line
		}
	}
	return nil
}

func TestStartStopLeavesNoGoroutine(t *testing.T) {
	before := goleak.IgnoreCurrent()
	var logs outboxtest.LogBuffer
	l := newLedger()
	var deps struct {
		fx.In
		Client *outbox.Client
		Tx     *outboxsql.TxManager
	}
	app := fxtest.New(t,
		fx.Supply(testLogger(&logs)),
		outboxfx.WithZerologVerbose(),
		outboxfx.ZerologLogger(),
		outboxfx.SQLDB(outboxfx.DefaultName, "sqlite", dsn(t, "default")),
		outboxfx.Module(outboxfx.WithConfig(fastConfig)),
		outboxfx.Listen(outboxfx.DefaultName, orderAggregate, orderPlaced, l.listener("default")),
		fx.Populate(&deps),
	)
	app.RequireStart()
	ids := write(t, deps.Tx, deps.Client, orderAggregate, orderPlaced, 20)
	eventually(t, "20 DONE", func() bool { return countStatus(t, deps.Client, outbox.StatusDone) == 20 })
	if n, err := deps.Client.PollOnce(context.Background()); err != nil || n != 0 {
		t.Fatalf("PollOnce on the default (full) client: %d, %v; want a poller with nothing to do", n, err)
	}
	app.RequireStop()

	if got := l.ids("default"); len(got) != len(ids) {
		t.Fatalf("delivered %d distinct events, want %d", len(got), len(ids))
	}
	goleak.VerifyNone(t, before) // the Client, the pool and fx left nothing behind

	// Both the core's logs and fx's events went to the zerolog logger.
	want := map[string]bool{"outbox: data source started": false, "outbox: data source stopped": false, "fx started": false}
	for _, line := range logs.JSONLines(t) {
		msg, _ := line["message"].(string)
		switch {
		case line["outbox_ds"] == "default" && strings.HasPrefix(msg, "outbox: data source"):
			want[msg] = true
		case line["component"] == "fx" && msg == "started":
			want["fx started"] = true
		}
	}
	for msg, seen := range want {
		if !seen {
			t.Errorf("logs lack %q:\n%s", msg, logs.String())
		}
	}
	if started := logLine(t, &logs, "outbox: data source started"); started["mode"] != "full" || started["purge"] != true ||
		started["owner"] != deps.Client.Owner() || started["routes"] != float64(1) {
		t.Errorf("started line: %v", started)
	}
}

type twoClients struct {
	fx.In
	Orders    *outbox.Client       `name:"orders"`
	OrdersTx  *outboxsql.TxManager `name:"orders"`
	Billing   *outbox.Client       `name:"billing"`
	BillingTx *outboxsql.TxManager `name:"billing"`
}

func TestTwoDataSourcesAreIsolated(t *testing.T) {
	for _, tc := range []struct {
		name string
		dbs  func(t *testing.T) fx.Option
		cfg  func(table string) outboxfx.Config
	}{
		{"separate databases", func(t *testing.T) fx.Option {
			return fx.Options(outboxfx.SQLDB("orders", "sqlite", dsn(t, "orders")), outboxfx.SQLDB("billing", "sqlite", dsn(t, "billing")))
		}, func(string) outboxfx.Config { return fastConfig }},
		{"one database, two tables", func(t *testing.T) fx.Option {
			shared := dsn(t, "shared")
			return fx.Options(outboxfx.SQLDB("orders", "sqlite", shared), outboxfx.SQLDB("billing", "sqlite", shared))
		}, func(table string) outboxfx.Config { c := fastConfig; c.Table = table; return c }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			var deps twoClients
			app := fxtest.New(t,
				fx.Supply(testLogger(&outboxtest.LogBuffer{})),
				outboxfx.WithZerolog(),
				outboxfx.ZerologLogger(),
				tc.dbs(t),
				outboxfx.DataSource("orders", outboxfx.WithConfig(tc.cfg("orders_outbox"))),
				outboxfx.DataSource("billing", outboxfx.WithConfig(tc.cfg("billing_outbox"))),
				// The same listener code serves both data sources.
				outboxfx.Routes("orders", func() outboxfx.Route {
					return outboxfx.Route{Aggregate: orderAggregate, Event: orderPlaced, Listener: l.listener("orders")}
				}),
				outboxfx.Routes("billing", func() []outboxfx.Route {
					return []outboxfx.Route{
						{Event: orderPlaced, Listener: l.listener("billing")}, // any aggregate
						{Aggregate: orderAggregate, Event: invoiceIssued, Listener: l.listener("billing")},
					}
				}),
				fx.Populate(&deps),
			)
			app.RequireStart()
			defer app.RequireStop()

			orderIDs := write(t, deps.OrdersTx, deps.Orders, orderAggregate, orderPlaced, 30)
			billingIDs := append(write(t, deps.BillingTx, deps.Billing, cartAggregate, orderPlaced, 12),
				write(t, deps.BillingTx, deps.Billing, orderAggregate, invoiceIssued, 8)...)
			eventually(t, "every event DONE", func() bool {
				return countStatus(t, deps.Orders, outbox.StatusDone) == 30 && countStatus(t, deps.Billing, outbox.StatusDone) == 20
			})

			for _, c := range []struct {
				ds     string
				client *outbox.Client
				want   []string
			}{{"orders", deps.Orders, orderIDs}, {"billing", deps.Billing, billingIDs}} {
				got := l.ids(c.ds)
				if len(got) != len(c.want) {
					t.Errorf("%s delivered %d events, want %d", c.ds, len(got), len(c.want))
				}
				for _, id := range c.want {
					if got[id] == 0 {
						t.Errorf("%s never delivered its event %s", c.ds, id)
					}
					if _, err := c.client.Get(context.Background(), id); err != nil {
						t.Errorf("%s cannot find its event %s: %v", c.ds, id, err)
					}
				}
				stats, err := c.client.Stats(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				var rows int64
				for _, n := range stats.ByStatus {
					rows += n
				}
				if rows != int64(len(c.want)) {
					t.Errorf("%s table holds %d rows, want %d", c.ds, rows, len(c.want))
				}
			}
			for id := range l.ids("orders") {
				if l.ids("billing")[id] > 0 {
					t.Errorf("event %s delivered by both data sources", id)
				}
				if _, err := deps.Billing.Get(context.Background(), id); !errors.Is(err, outbox.ErrNotFound) {
					t.Errorf("billing finds orders' event %s: %v", id, err)
				}
			}
			if deps.Orders.Owner() == deps.Billing.Owner() {
				t.Error("the two clients share an owner id")
			}
		})
	}
}

func TestRouteWithoutAggregateMatchesAnyAndLosesToAnExactOne(t *testing.T) {
	l := newLedger()
	var deps struct {
		fx.In
		Client *outbox.Client
		Tx     *outboxsql.TxManager
	}
	app := fxtest.New(t, fx.NopLogger,
		outboxfx.SQLDB("", "sqlite", dsn(t, "db")),
		outboxfx.Module(outboxfx.WithConfig(fastConfig)),
		outboxfx.Listen("", nil, orderPlaced, l.listener("any")),
		outboxfx.Listen("", orderAggregate, orderPlaced, l.listener("order")),
		fx.Populate(&deps))
	app.RequireStart()
	defer app.RequireStop()
	orders := write(t, deps.Tx, deps.Client, orderAggregate, orderPlaced, 3)
	carts := write(t, deps.Tx, deps.Client, cartAggregate, orderPlaced, 2)
	global := write(t, deps.Tx, deps.Client, outbox.GlobalAggregate, orderPlaced, 1)
	eventually(t, "6 DONE", func() bool { return countStatus(t, deps.Client, outbox.StatusDone) == 6 })
	for _, c := range []struct {
		listener string
		want     []string
	}{{"order", orders}, {"any", append(carts, global...)}} {
		got := l.ids(c.listener)
		if len(got) != len(c.want) {
			t.Errorf("listener %q got %d events, want %d", c.listener, len(got), len(c.want))
		}
		for _, id := range c.want {
			if got[id] == 0 {
				t.Errorf("listener %q never got %s", c.listener, id)
			}
		}
	}
}

func TestSubscribersEachGetEveryEvent(t *testing.T) {
	l := newLedger()
	var deps struct {
		fx.In
		Client *outbox.Client
		Tx     *outboxsql.TxManager
	}
	app := fxtest.New(t, fx.NopLogger,
		outboxfx.SQLDB("", "sqlite", dsn(t, "db")),
		outboxfx.Module(outboxfx.WithConfig(fastConfig)),
		outboxfx.Subscribe("", "mail", orderPlaced, l.listener("mail")),
		outboxfx.Subscribe("", "stock", orderPlaced, l.listener("stock")),
		fx.Populate(&deps))
	app.RequireStart()
	defer app.RequireStop()
	ids := write(t, deps.Tx, deps.Client, orderAggregate, orderPlaced, 3)
	eventually(t, "3 DONE", func() bool { return countStatus(t, deps.Client, outbox.StatusDone) == 3 })
	for _, sub := range []string{"mail", "stock"} {
		got := l.ids(sub)
		for _, id := range ids {
			if got[id] != 1 {
				t.Errorf("subscriber %s got %s %d times, want once", sub, id, got[id])
			}
		}
	}
}

func TestClientOfOneDataSourceIgnoresTheOthersTransaction(t *testing.T) {
	var deps twoClients
	app := fxtest.New(t,
		fx.NopLogger,
		outboxfx.SQLDB("orders", "sqlite", dsn(t, "orders")),
		outboxfx.SQLDB("billing", "sqlite", dsn(t, "billing")),
		outboxfx.DataSource("orders", outboxfx.WithConfig(fastConfig)),
		outboxfx.DataSource("billing", outboxfx.WithConfig(fastConfig)),
		fx.Populate(&deps),
	)
	app.RequireStart()
	defer app.RequireStop()
	err := deps.BillingTx.InTx(context.Background(), func(ctx context.Context) error {
		_, err := deps.Orders.Write(ctx, outbox.MustEnvelope(orderPlaced, outbox.WithJSON([]byte(`{}`))))
		return err
	})
	if !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("orders client in a billing transaction: got %v, want ErrNoTransaction", err)
	}
}

func TestDataSourceWithoutListenersStartsAndLeavesEventsPending(t *testing.T) {
	var logs outboxtest.LogBuffer
	var deps struct {
		fx.In
		Client *outbox.Client       `name:"audit"`
		Tx     outbox.TxContext     `name:"audit"`
		TxM    *outboxsql.TxManager `name:"audit"`
	}
	app := fxtest.New(t,
		fx.Supply(slog.New(slog.NewJSONHandler(&logs, nil))), // the application's *slog.Logger
		outboxfx.SQLDB("audit", "sqlite", dsn(t, "audit")),
		outboxfx.DataSource("audit", outboxfx.WithConfig(fastConfig)), // no Routes("audit", ...)
		fx.Populate(&deps),
	)
	app.RequireStart()
	defer app.RequireStop()
	if deps.Tx != outbox.TxContext(deps.TxM) {
		t.Error("the provided TxContext is not the provided TxManager")
	}
	if !strings.Contains(logs.String(), "no listener routed to this data source") {
		t.Errorf("no warning about the missing routes:\n%s", logs.String())
	}
	ids := write(t, deps.TxM, deps.Client, orderAggregate, orderPlaced, 3)
	// A Client claims only the types it routes: none here.
	eventually(t, "3 reported unrouted", func() bool {
		st, err := deps.Client.Stats(context.Background())
		return err == nil && len(st.Unrouted) == 1 && st.Unrouted[0].Pending == 3
	})
	time.Sleep(200 * time.Millisecond) // several polls
	for _, id := range ids {
		r, err := deps.Client.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != outbox.StatusNew || r.Attempts != 0 || r.LockedBy != "" || r.LastError != "" {
			t.Errorf("unrouted event %s: %s, attempts %d, locked by %q, error %q; want NEW, never claimed", r.ID, r.Status, r.Attempts, r.LockedBy, r.LastError)
		}
	}
}

// TestStoreOptionsReachTheStore: WithStoreOptions are the Store's, after
// its table (here one that overrides it).
func TestStoreOptionsReachTheStore(t *testing.T) {
	var deps struct {
		fx.In
		Client *outbox.Client       `name:"audit"`
		TxM    *outboxsql.TxManager `name:"audit"`
	}
	path := dsn(t, "audit")
	app := fxtest.New(t, fx.NopLogger,
		outboxfx.SQLDB("audit", "sqlite", path),
		outboxfx.DataSource("audit", outboxfx.WithConfig(fastConfig), outboxfx.WithStoreOptions(sqlstore.WithTable("audit_events"))),
		fx.Populate(&deps),
	)
	app.RequireStart()
	ids := write(t, deps.TxM, deps.Client, orderAggregate, orderPlaced, 1)
	app.RequireStop()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store, err := outboxsql.Open(db, sqlstore.WithTable("audit_events"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get(context.Background(), ids[0]); err != nil {
		t.Errorf("the event is not in the table the store option named: %v", err)
	}
}

// appErr builds and starts an app, returning the first error.
func appErr(opts ...fx.Option) error {
	app := fx.New(append([]fx.Option{fx.NopLogger}, opts...)...)
	if err := app.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		return err
	}
	return app.Stop(ctx)
}

func TestBadConfigurationFailsTheApp(t *testing.T) {
	nop := outbox.ListenerFunc(func(context.Context, outbox.Envelope) error { return nil })
	route := outboxfx.Listen("orders", orderAggregate, orderPlaced, nop)
	anyRoute := outboxfx.Listen("orders", nil, orderPlaced, nop)
	db := func(t *testing.T) fx.Option { return outboxfx.SQLDB("orders", "sqlite", dsn(t, "o")) }
	env := func(m map[string]string) outboxfx.Option { return outboxfx.FromEnviron(environ(m)) }
	for _, tc := range []struct {
		name string
		opts func(t *testing.T) []fx.Option
		want string
	}{
		{"bad duration in the environment", func(t *testing.T) []fx.Option {
			t.Setenv("OUTBOX_ORDERS_POLL_INTERVAL", "often")
			return []fx.Option{db(t), outboxfx.DataSource("orders", outboxfx.FromEnv())}
		}, `outboxfx: data source "orders": outboxfx: OUTBOX_ORDERS_POLL_INTERVAL: outbox: invalid configuration: PollInterval: "often": want a duration`},
		{"negative workers", func(t *testing.T) []fx.Option {
			return []fx.Option{db(t), outboxfx.DataSource("orders", env(map[string]string{"OUTBOX_ORDERS_WORKERS": "-1"}))}
		}, `OUTBOX_ORDERS_WORKERS: outbox: invalid configuration: Workers is -1; want 1 to 10000`},
		{"unknown mode", func(t *testing.T) []fx.Option {
			return []fx.Option{db(t), outboxfx.DataSource("orders", env(map[string]string{"OUTBOX_ORDERS_MODE": "relay"}))}
		}, `OUTBOX_ORDERS_MODE: outbox: invalid configuration: Mode: "relay": want one of full, writer-only, poller-only, hot-path-only`},
		{"removed variable", func(t *testing.T) []fx.Option {
			return []fx.Option{db(t), outboxfx.DataSource("orders", env(map[string]string{"OUTBOX_ORDERS_HOT_PATH_ENABLED": "false"}))}
		}, `OUTBOX_ORDERS_HOT_PATH_ENABLED is no longer supported: set MODE=poller-only`},
		{"mode out of range in code", func(t *testing.T) []fx.Option {
			return []fx.Option{db(t), outboxfx.DataSource("orders", outboxfx.WithConfig(outboxfx.Config{Config: outbox.Config{Mode: 9}}))}
		}, `Mode is 9; want one of full, writer-only, poller-only, hot-path-only`},
		{"bad table name", func(t *testing.T) []fx.Option {
			return []fx.Option{db(t), outboxfx.DataSource("orders", outboxfx.WithConfig(outboxfx.Config{Table: "1table"}))}
		}, `table name "1table" is not allowed`},
		{"unknown preset", func(t *testing.T) []fx.Option {
			return []fx.Option{outboxfx.DataSource("orders", outboxfx.WithPreset("cluster"))}
		}, `unknown preset "cluster"`},
		{"bad data source name", func(t *testing.T) []fx.Option {
			return []fx.Option{outboxfx.DataSource(`or"ders`)}
		}, `data source name "or\"ders"`},
		{"route without a listener", func(t *testing.T) []fx.Option {
			return []fx.Option{db(t), outboxfx.DataSource("orders"), outboxfx.Listen("orders", nil, orderPlaced, nil)}
		}, `route 0: outbox: invalid configuration: the route has no event type or no listener`},
		{"two listeners for one pair", func(t *testing.T) []fx.Option {
			return []fx.Option{db(t), outboxfx.DataSource("orders"), route, route}
		}, `outbox: listener already registered: (Order, OrderPlaced)`},
		{"two listeners for one event type on any aggregate", func(t *testing.T) []fx.Option {
			return []fx.Option{db(t), outboxfx.DataSource("orders"), anyRoute, anyRoute}
		}, `outbox: listener already registered: event type OrderPlaced (any aggregate)`},
		{"a subscriber of one aggregate type", func(t *testing.T) []fx.Option {
			return []fx.Option{db(t), outboxfx.DataSource("orders"), fx.Supply(fx.Annotated{Group: outboxfx.RouteGroup("orders"),
				Target: outboxfx.Route{Aggregate: orderAggregate, Event: orderPlaced, Listener: nop, Subscriber: "mail"}})}
		}, `subscriber "mail": a subscriber's route names no aggregate type`},
		{"a subscriber and a listener of one event type", func(t *testing.T) []fx.Option {
			return []fx.Option{db(t), outboxfx.DataSource("orders"), anyRoute, outboxfx.Subscribe("orders", "mail", orderPlaced, nop)}
		}, `outbox: listener already registered: event type OrderPlaced has `}, // a listener, or subscribers: whichever came first
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := appErr(tc.opts(t)...)
			if err == nil {
				t.Fatal("the app started")
			}
			if !errors.Is(err, outbox.ErrInvalidConfig) && !errors.Is(err, outbox.ErrDuplicateListener) {
				t.Errorf("error wraps neither ErrInvalidConfig nor ErrDuplicateListener: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error:\n %v\nwant it to contain\n %s", err, tc.want)
			}
		})
	}
}

func TestMissingDatabaseFailsTheApp(t *testing.T) {
	// No *sql.DB named "orders" in the container.
	err := appErr(outboxfx.DataSource("orders"))
	if err == nil || !strings.Contains(err.Error(), `missing type: *sql.DB[name="orders"]`) {
		t.Fatalf("got %v", err)
	}
	// WithTxContext, but no TxContext named "orders".
	err = appErr(outboxfx.SQLDB("orders", "sqlite", dsn(t, "o")), outboxfx.DataSource("orders", outboxfx.WithTxContext()))
	if err == nil || !strings.Contains(err.Error(), `missing type: outbox.TxContext[name="orders"]`) {
		t.Fatalf("got %v", err)
	}
	// A database that cannot be opened: the app fails at start.
	err = appErr(outboxfx.SQLDB("orders", "sqlite", outboxsql.SQLiteDSN(filepath.Join(t.TempDir(), "no", "such", "dir", "x.db"))),
		outboxfx.DataSource("orders", outboxfx.WithConfig(outboxfx.Config{Migrate: true})))
	if err == nil || !strings.Contains(err.Error(), `outboxfx: data source "orders"`) {
		t.Fatalf("got %v", err)
	}
}

// countingMetrics counts hot-path and poller enqueues.
type countingMetrics struct {
	outbox.NopMetrics
	hot, cold atomic.Int64
}

func (m *countingMetrics) EventEnqueued(_ outbox.EventLabels, p outbox.Path) {
	if p == outbox.PathHot {
		m.hot.Add(1)
	} else {
		m.cold.Add(1)
	}
}

func TestModesShapeTheClient(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      []outboxfx.Option
		mode      string
		purge     bool
		hot, cold int64 // enqueues of the 5 events
		poller    bool
		warning   string
	}{
		{"default", nil, "full", true, 5, 0, true, ""},
		{"writer-only preset", []outboxfx.Option{outboxfx.WithPreset(outboxfx.PresetWriterOnly),
			outboxfx.FromEnviron([]string{"OUTBOX_MIGRATE=true"})}, "writer-only", false, 0, 0, false, "its routes are never called"},
		{"poller-only from the environment, purge off", []outboxfx.Option{outboxfx.FromEnviron([]string{
			"OUTBOX_MODE=Poller-Only", "OUTBOX_DISABLE_PURGE=true"})}, "poller-only", false, 0, 5, true, ""},
		{"hot-path-only", []outboxfx.Option{outboxfx.Configure(func(c *outboxfx.Config) { c.Mode = outbox.ModeHotPathOnly })},
			"hot-path-only", false, 5, 0, false, "no poller (hot-path-only)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var deps struct {
				fx.In
				Client *outbox.Client
				Tx     *outboxsql.TxManager
			}
			var logs outboxtest.LogBuffer
			l := newLedger()
			m := &countingMetrics{}
			path := dsn(t, "db")
			opts := append([]outboxfx.Option{outboxfx.WithConfig(fastConfig), outboxfx.WithMetrics(m)}, tc.opts...)
			app := fxtest.New(t,
				fx.Supply(testLogger(&logs)),
				outboxfx.ZerologLogger(),
				outboxfx.SQLDB("", "sqlite", path),
				outboxfx.Module(opts...),
				outboxfx.Listen("", orderAggregate, orderPlaced, l.listener("default")),
				fx.Populate(&deps))
			app.RequireStart()
			started := logLine(t, &logs, "outbox: data source started")
			if started["mode"] != tc.mode || started["purge"] != tc.purge {
				t.Errorf("started line: %v; want mode %s, purge %v", started, tc.mode, tc.purge)
			}
			if tc.warning != "" && !strings.Contains(logs.String(), tc.warning) {
				t.Errorf("no warning %q:\n%s", tc.warning, logs.String())
			}
			if _, err := deps.Client.PollOnce(context.Background()); (err == nil) != tc.poller {
				t.Errorf("PollOnce: %v; want a poller: %v", err, tc.poller)
			}
			write(t, deps.Tx, deps.Client, orderAggregate, orderPlaced, 5)
			if tc.mode != "writer-only" {
				eventually(t, "5 DONE", func() bool { return countStatus(t, deps.Client, outbox.StatusDone) == 5 })
			} else {
				time.Sleep(3 * fastConfig.PollInterval) // long enough for a poller, were there one
			}
			app.RequireStop()
			if tc.mode == "writer-only" {
				n, err := reopen(t, path).Count(context.Background(), outbox.Query{Statuses: []outbox.Status{outbox.StatusNew}})
				if err != nil || n != 5 {
					t.Fatalf("writer-only: %d NEW rows (%v), want 5 left for CDC", n, err)
				}
				if len(l.ids("default")) != 0 {
					t.Fatal("a writer-only data source delivered")
				}
			}
			if m.hot.Load() != tc.hot || m.cold.Load() != tc.cold {
				t.Fatalf("hot path enqueued %d, poller %d; want %d and %d", m.hot.Load(), m.cold.Load(), tc.hot, tc.cold)
			}
		})
	}
}

func TestStopReleasesWhatItCouldNotDeliver(t *testing.T) {
	before := goleak.IgnoreCurrent()
	var deps struct {
		fx.In
		Client *outbox.Client
		Tx     *outboxsql.TxManager
	}
	release := make(chan struct{})
	slow := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	cfg := fastConfig
	cfg.Workers, cfg.DrainTimeout = 1, 100*time.Millisecond
	path := dsn(t, "db")
	app := fxtest.New(t, fx.NopLogger,
		outboxfx.SQLDB("", "sqlite", path),
		outboxfx.Module(outboxfx.WithConfig(cfg)),
		outboxfx.Listen("", orderAggregate, orderPlaced, slow),
		fx.Populate(&deps))
	app.RequireStart()
	write(t, deps.Tx, deps.Client, orderAggregate, orderPlaced, 10)
	app.RequireStop() // the single worker is stuck: the drain times out
	close(release)
	goleak.VerifyNone(t, before)

	recs, err := reopen(t, path).List(context.Background(), outbox.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 10 {
		t.Fatalf("%d rows, want 10", len(recs))
	}
	for _, r := range recs {
		if r.Status != outbox.StatusDone && r.LockedBy != "" {
			t.Errorf("event %s (%s) still claimed by %q after Stop", r.ID, r.Status, r.LockedBy)
		}
	}
}

func TestExternalTxContext(t *testing.T) {
	// The application runs its transactions with its own TxContext (here a
	// TxManager it built itself; an ORM adapter's in real life).
	var deps struct {
		fx.In
		Client *outbox.Client       `name:"orders"`
		Store  *outboxsql.Store     `name:"orders"`
		Own    *outboxsql.TxManager `name:"orders" optional:"true"`
		TxM    *outboxsql.TxManager `name:"app"`
	}
	l := newLedger()
	app := fxtest.New(t, fx.NopLogger,
		outboxfx.SQLDB("orders", "sqlite", dsn(t, "orders")),
		fx.Provide(
			fx.Annotate(func(db *sql.DB) *outboxsql.TxManager { return outboxsql.NewTxManager(db) }, fx.ParamTags(`name:"orders"`), fx.ResultTags(`name:"app"`)),
			fx.Annotate(func(m *outboxsql.TxManager) outbox.TxContext { return m }, fx.ParamTags(`name:"app"`), fx.ResultTags(`name:"orders"`)),
		),
		outboxfx.DataSource("orders", outboxfx.WithConfig(fastConfig), outboxfx.WithTxContext()),
		outboxfx.Listen("orders", orderAggregate, orderPlaced, l.listener("orders")),
		fx.Populate(&deps))
	app.RequireStart()
	defer app.RequireStop()
	if deps.Own != nil {
		t.Fatal("with WithTxContext the data source must build no TxManager")
	}
	// The Client writes in the application's transactions: it uses the
	// container's TxContext.
	write(t, deps.TxM, deps.Client, orderAggregate, orderPlaced, 3)
	eventually(t, "3 DONE", func() bool { return countStatus(t, deps.Client, outbox.StatusDone) == 3 })
	if deps.Store.Dialect() != outboxsql.SQLite || deps.Store.Table() != "outbox_event" {
		t.Fatalf("store: %v, table %s", deps.Store.Dialect(), deps.Store.Table())
	}
	if got := outboxsql.Rebind(deps.Store.Dialect(), "SELECT ? , ?"); got != "SELECT ? , ?" {
		t.Fatalf("Rebind on SQLite changed the query: %q", got)
	}
}
