package outboxfx_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	outboxfx "github.com/go-outbox/outbox/fxmodule"
	"github.com/rs/zerolog"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	_ "modernc.org/sqlite"
)

type orderEvent string

func (e orderEvent) Name() string { return string(e) }

const (
	orderPlaced   orderEvent = "OrderPlaced"
	invoiceIssued orderEvent = "InvoiceIssued"
)

const orderAggregate = outbox.AggregateName("Order")

// fastConfig creates the schema and polls and retries quickly.
var fastConfig = outboxfx.Config{
	Migrate: true, PollInterval: 50 * time.Millisecond, RetryBase: 10 * time.Millisecond,
	RetryMax: 50 * time.Millisecond, DrainTimeout: 2 * time.Second,
}

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
func reopen(t *testing.T, dsn string) (*outboxsql.Store, *sql.DB) {
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
	return store, db
}

func testLogger(buf *syncBuffer) zerolog.Logger {
	return zerolog.New(buf).Level(zerolog.DebugLevel).With().Timestamp().Logger()
}

// write commits n events, one transaction each, through the data source's
// TxManager and Writer, and returns their ids.
func write(t *testing.T, txm *outboxsql.TxManager, w *outbox.Writer, et outbox.EventType, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		err := txm.InTx(context.Background(), func(ctx context.Context) error {
			e, err := outbox.NewEnvelope(et, outbox.WithAggregate(orderAggregate, fmt.Sprintf("o-%d", i)), outbox.WithJSON([]byte(`{}`)))
			if err != nil {
				return err
			}
			got, err := w.Write(ctx, e)
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

func countStatus(t *testing.T, st *outboxfx.Stack, s outbox.Status) int64 {
	t.Helper()
	stats, err := st.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return stats.ByStatus[s]
}

// outboxGoroutines returns the stacks of live goroutines running outbox code.
func outboxGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "go-outbox/outbox/core.") && !strings.Contains(g, "outboxGoroutines") {
			out = append(out, g)
		}
	}
	return out
}

func TestStartStopLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	var logs syncBuffer
	l := newLedger()
	var deps struct {
		fx.In
		Stack  *outboxfx.Stack
		Writer *outbox.Writer
		Tx     *outboxsql.TxManager
	}
	app := fxtest.New(t,
		fx.Supply(testLogger(&logs)),
		outboxfx.WithZerolog(),
		outboxfx.SQLDB(outboxfx.DefaultName, "sqlite", dsn(t, "default")),
		outboxfx.Module(outboxfx.WithConfig(fastConfig)),
		outboxfx.Listen(outboxfx.DefaultName, orderAggregate, orderPlaced, l.listener("default")),
		fx.Populate(&deps),
	)
	app.RequireStart()
	if deps.Stack.Dispatcher() == nil || deps.Stack.Poller() == nil || deps.Stack.Purger() == nil {
		t.Fatal("the default stack runs a dispatcher, a poller and a purger")
	}
	ids := write(t, deps.Tx, deps.Writer, orderPlaced, 20)
	eventually(t, "20 DONE", func() bool { return countStatus(t, deps.Stack, outbox.StatusDone) == 20 })
	app.RequireStop()

	if got := l.ids("default"); len(got) != len(ids) {
		t.Fatalf("delivered %d distinct events, want %d", len(got), len(ids))
	}
	if g := outboxGoroutines(); len(g) > 0 {
		t.Fatalf("%d outbox goroutine(s) outlived Stop:\n%s", len(g), strings.Join(g, "\n\n"))
	}
	eventually(t, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= before })

	// Both the core's logs and fx's events went to the zerolog logger.
	want := map[string]bool{"outbox: data source started": false, "outbox: data source stopped": false, "fx started": false}
	for _, line := range logs.lines(t) {
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
}

type twoStacks struct {
	fx.In
	Orders        *outboxfx.Stack      `name:"orders"`
	OrdersWriter  *outbox.Writer       `name:"orders"`
	OrdersTx      *outboxsql.TxManager `name:"orders"`
	Billing       *outboxfx.Stack      `name:"billing"`
	BillingWriter *outbox.Writer       `name:"billing"`
	BillingTx     *outboxsql.TxManager `name:"billing"`
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
			var deps twoStacks
			app := fxtest.New(t,
				fx.Supply(testLogger(&syncBuffer{})),
				outboxfx.WithZerolog(),
				tc.dbs(t),
				outboxfx.DataSource("orders", outboxfx.WithConfig(tc.cfg("orders_outbox"))),
				outboxfx.DataSource("billing", outboxfx.WithConfig(tc.cfg("billing_outbox"))),
				// The same listener code serves both data sources.
				outboxfx.Routes("orders", func() outboxfx.Route {
					return outboxfx.Route{Aggregate: orderAggregate, Event: orderPlaced, Listener: l.listener("orders")}
				}),
				outboxfx.Routes("billing", func() []outboxfx.Route {
					return []outboxfx.Route{
						{Aggregate: orderAggregate, Event: orderPlaced, Listener: l.listener("billing")},
						{Aggregate: orderAggregate, Event: invoiceIssued, Listener: l.listener("billing")},
					}
				}),
				fx.Populate(&deps),
			)
			app.RequireStart()
			defer app.RequireStop()

			orderIDs := write(t, deps.OrdersTx, deps.OrdersWriter, orderPlaced, 30)
			billingIDs := append(write(t, deps.BillingTx, deps.BillingWriter, orderPlaced, 12),
				write(t, deps.BillingTx, deps.BillingWriter, invoiceIssued, 8)...)
			eventually(t, "every event DONE", func() bool {
				return countStatus(t, deps.Orders, outbox.StatusDone) == 30 && countStatus(t, deps.Billing, outbox.StatusDone) == 20
			})

			for _, c := range []struct {
				ds   string
				st   *outboxfx.Stack
				want []string
			}{{"orders", deps.Orders, orderIDs}, {"billing", deps.Billing, billingIDs}} {
				got := l.ids(c.ds)
				if len(got) != len(c.want) {
					t.Errorf("%s delivered %d events, want %d", c.ds, len(got), len(c.want))
				}
				for _, id := range c.want {
					if got[id] == 0 {
						t.Errorf("%s never delivered its event %s", c.ds, id)
					}
				}
				stats, err := c.st.Stats(context.Background())
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
			}
			if deps.Orders.Dispatcher().Owner() == deps.Billing.Dispatcher().Owner() {
				t.Error("the two dispatchers share an owner id")
			}
		})
	}
}

func TestWriterOfOneDataSourceIgnoresTheOthersTransaction(t *testing.T) {
	var deps twoStacks
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
		_, err := deps.OrdersWriter.Write(ctx, outbox.MustEnvelope(orderPlaced, outbox.WithJSON([]byte(`{}`))))
		return err
	})
	if !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("orders writer in a billing transaction: got %v, want ErrNoTransaction", err)
	}
}

func TestDataSourceWithoutListenersStartsAndSendsEventsToDead(t *testing.T) {
	var logs syncBuffer
	var deps struct {
		fx.In
		Stack  *outboxfx.Stack      `name:"audit"`
		Writer *outbox.Writer       `name:"audit"`
		Tx     outbox.TxContext     `name:"audit"`
		TxM    *outboxsql.TxManager `name:"audit"`
		Dead   *outbox.DeadEvents   `name:"audit"`
	}
	app := fxtest.New(t,
		fx.Supply(testLogger(&logs)),
		outboxfx.SQLDB("audit", "sqlite", dsn(t, "audit")),
		outboxfx.DataSource("audit", outboxfx.WithConfig(fastConfig)), // no Routes("audit", ...)
		fx.Populate(&deps),
	)
	app.RequireStart()
	defer app.RequireStop()
	if !strings.Contains(logs.String(), "no listener routed to this data source") {
		t.Errorf("no warning about the missing routes:\n%s", logs.String())
	}
	write(t, deps.TxM, deps.Writer, orderPlaced, 3)
	eventually(t, "3 DEAD", func() bool { return countStatus(t, deps.Stack, outbox.StatusDead) == 3 })
	recs, err := deps.Dead.List(context.Background(), outbox.Query{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Attempts != 0 || !strings.Contains(r.LastError, "no listener") {
			t.Errorf("dead event %s: attempts %d, error %q; want 0 attempts and a no-listener error", r.ID, r.Attempts, r.LastError)
		}
	}
}

// failingApp builds (but does not start) an app, returning its error.
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
	route := outboxfx.Listen("orders", orderAggregate, orderPlaced, outbox.ListenerFunc(func(context.Context, outbox.Envelope) error { return nil }))
	for _, tc := range []struct {
		name string
		opts func(t *testing.T) []fx.Option
		want string
	}{
		{"bad duration in the environment", func(t *testing.T) []fx.Option {
			t.Setenv("OUTBOX_ORDERS_POLL_INTERVAL", "often")
			return []fx.Option{outboxfx.SQLDB("orders", "sqlite", dsn(t, "o")), outboxfx.DataSource("orders", outboxfx.FromEnv())}
		}, `outboxfx: data source "orders": outboxfx: OUTBOX_ORDERS_POLL_INTERVAL="often": outbox: invalid configuration: want a duration`},
		{"negative workers", func(t *testing.T) []fx.Option {
			return []fx.Option{outboxfx.SQLDB("orders", "sqlite", dsn(t, "o")), outboxfx.DataSource("orders",
				outboxfx.FromEnvLookup(lookupMap(map[string]string{"OUTBOX_ORDERS_WORKERS": "-1"})))}
		}, `OUTBOX_ORDERS_WORKERS="-1": outbox: invalid configuration: Workers must not be negative`},
		{"bad table name", func(t *testing.T) []fx.Option {
			return []fx.Option{outboxfx.SQLDB("orders", "sqlite", dsn(t, "o")), outboxfx.DataSource("orders", outboxfx.WithConfig(outboxfx.Config{Table: "1table"}))}
		}, `table name "1table" is not allowed`},
		{"unknown preset", func(t *testing.T) []fx.Option {
			return []fx.Option{outboxfx.DataSource("orders", outboxfx.WithPreset("cluster"))}
		}, `unknown preset "cluster"`},
		{"bad data source name", func(t *testing.T) []fx.Option {
			return []fx.Option{outboxfx.DataSource(`or"ders`)}
		}, `data source name "or\"ders"`},
		{"two listeners for one event", func(t *testing.T) []fx.Option {
			return []fx.Option{outboxfx.SQLDB("orders", "sqlite", dsn(t, "o")), outboxfx.DataSource("orders"), route, route}
		}, `outbox: listener already registered: (Order, OrderPlaced)`},
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

func (m *countingMetrics) HotEnqueued()  { m.hot.Add(1) }
func (m *countingMetrics) ColdEnqueued() { m.cold.Add(1) }

func TestPresetsAndSwitchesShapeTheStack(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		opts                      []outboxfx.Option
		relay, hot, poller, purge bool
	}{
		{"default", nil, true, true, true, true},
		{"writer-only", []outboxfx.Option{outboxfx.WithPreset(outboxfx.PresetWriterOnly),
			outboxfx.FromEnvLookup(lookupMap(map[string]string{"OUTBOX_MIGRATE": "true"}))}, false, false, false, false},
		{"poller and purge off from the environment", []outboxfx.Option{outboxfx.FromEnvLookup(lookupMap(map[string]string{
			"OUTBOX_POLLER_ENABLED": "false", "OUTBOX_PURGE_ENABLED": "false"}))}, true, true, false, false},
		{"hot path off", []outboxfx.Option{outboxfx.WithConfig(outboxfx.Config{Migrate: true, PollInterval: 20 * time.Millisecond, DisableHotPath: true})},
			true, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var deps struct {
				fx.In
				Stack  *outboxfx.Stack
				Writer *outbox.Writer
				Tx     *outboxsql.TxManager
			}
			l := newLedger()
			m := &countingMetrics{}
			path := dsn(t, "db")
			opts := append([]outboxfx.Option{outboxfx.WithConfig(fastConfig), outboxfx.WithMetrics(m)}, tc.opts...)
			app := fxtest.New(t, fx.NopLogger,
				outboxfx.SQLDB("", "sqlite", path),
				outboxfx.Module(opts...),
				outboxfx.Listen("", orderAggregate, orderPlaced, l.listener("default")),
				fx.Populate(&deps))
			app.RequireStart()
			st := deps.Stack
			if (st.Dispatcher() != nil) != tc.relay || (st.Poller() != nil) != tc.poller || (st.Purger() != nil) != tc.purge {
				t.Fatalf("dispatcher %v poller %v purger %v", st.Dispatcher() != nil, st.Poller() != nil, st.Purger() != nil)
			}
			write(t, deps.Tx, deps.Writer, orderPlaced, 5)
			if tc.relay {
				eventually(t, "5 DONE", func() bool { return countStatus(t, st, outbox.StatusDone) == 5 })
			}
			app.RequireStop()
			if !tc.relay {
				store, db := reopen(t, path)
				if n, err := store.Count(context.Background(), db, outbox.Query{Statuses: []outbox.Status{outbox.StatusNew}}); err != nil || n != 5 {
					t.Fatalf("writer-only: %d NEW rows (%v), want 5 left for CDC", n, err)
				}
				return
			}
			if hot := m.hot.Load(); (hot == 5) != tc.hot || (!tc.hot && m.cold.Load() != 5) {
				t.Fatalf("hot path enqueued %d, poller %d (hot path on: %v)", hot, m.cold.Load(), tc.hot)
			}
		})
	}
}

func TestStopReleasesWhatItCouldNotDeliver(t *testing.T) {
	var deps struct {
		fx.In
		Stack  *outboxfx.Stack
		Writer *outbox.Writer
		Tx     *outboxsql.TxManager
	}
	release := make(chan struct{})
	var once sync.Once
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
	write(t, deps.Tx, deps.Writer, orderPlaced, 10)
	app.RequireStop() // the single worker is stuck: the drain times out
	once.Do(func() { close(release) })

	store, db := reopen(t, path)
	recs, err := store.List(context.Background(), db, outbox.Query{})
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
	if g := outboxGoroutines(); len(g) > 0 {
		t.Fatalf("%d outbox goroutine(s) outlived Stop:\n%s", len(g), strings.Join(g, "\n\n"))
	}
}

func TestExternalTxContext(t *testing.T) {
	// The application runs its transactions with its own TxContext (here a
	// TxManager it built itself; an ORM adapter's in real life).
	var deps struct {
		fx.In
		Stack  *outboxfx.Stack      `name:"orders"`
		Writer *outbox.Writer       `name:"orders"`
		TxM    *outboxsql.TxManager `name:"app"`
	}
	l := newLedger()
	app := fxtest.New(t, fx.NopLogger,
		outboxfx.SQLDB("orders", "sqlite", dsn(t, "orders")),
		fx.Provide(
			fx.Annotate(outboxsql.NewTxManager, fx.ParamTags(`name:"orders"`), fx.ResultTags(`name:"app"`)),
			fx.Annotate(func(m *outboxsql.TxManager) outbox.TxContext { return m }, fx.ParamTags(`name:"app"`), fx.ResultTags(`name:"orders"`)),
		),
		outboxfx.DataSource("orders", outboxfx.WithConfig(fastConfig), outboxfx.WithTxContext()),
		outboxfx.Listen("orders", orderAggregate, orderPlaced, l.listener("orders")),
		fx.Populate(&deps))
	app.RequireStart()
	defer app.RequireStop()
	if deps.Stack.TxManager() != nil || deps.Stack.TxContext() != outbox.TxContext(deps.TxM) {
		t.Fatal("the stack must use the container's TxContext and build no TxManager")
	}
	write(t, deps.TxM, deps.Writer, orderPlaced, 3)
	eventually(t, "3 DONE", func() bool { return countStatus(t, deps.Stack, outbox.StatusDone) == 3 })
	if got := deps.Stack.Rebind("SELECT ? , ?"); got != "SELECT ? , ?" {
		t.Fatalf("Rebind on SQLite changed the query: %q", got)
	}
	if got := outboxsql.Rebind(nil, "a = ?"); got != "a = ?" {
		t.Fatalf("Rebind without a dialect: %q", got)
	}
}
