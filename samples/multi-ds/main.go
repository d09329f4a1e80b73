// Command multi-ds runs one fx application with two outbox data sources,
// "orders" and "billing". Each has its own database (two SQLite files by
// default), its own outbox table and its own outbox.Client (hot path,
// poller and purger), and the listener code is shared between them. It writes business rows and their
// events to both, waits until every event is settled by its own data
// source's Client, prints a summary per data source and exits 0 — or 1 if an
// event was lost, delivered by the wrong data source, or left pending.
//
//	go run .                                  # two SQLite files under $TMPDIR/outbox-multi-ds
//	go run . -orders-dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	         -billing-dsn 'mysql://root@127.0.0.1:3306/test'
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	outboxfx "github.com/go-outbox/outbox/fxmodule"
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/rs/zerolog"
	"go.uber.org/fx"
	_ "modernc.org/sqlite"
)

// The application's event and aggregate types.
type event string

func (e event) Name() string { return string(e) }

const (
	orderPlaced     event = "OrderPlaced"     // orders → shipping
	orderArchived   event = "OrderArchived"   // orders, nobody listens → DEAD in orders only
	invoiceIssued   event = "InvoiceIssued"   // billing → mailer
	paymentCaptured event = "PaymentCaptured" // billing, fails its first attempt → retried by billing's poller

	orderAggregate   = outbox.AggregateName("Order")
	invoiceAggregate = outbox.AggregateName("Invoice")
)

var dataSources = []string{"orders", "billing"}

type options struct {
	urls    map[string]string // data source → database URL
	n       int               // business transactions per data source
	timeout time.Duration
	verbose bool
	out     io.Writer // the story and the summary
	logOut  io.Writer // zerolog output
	color   bool      // colour the logs
}

func main() {
	dir := flag.String("dir", filepath.Join(os.TempDir(), "outbox-multi-ds"), "folder of the default SQLite files (recreated)")
	ordersURL := flag.String("orders-dsn", "", "orders database: postgres://…, mysql://…, sqlite:path or a file path (default <dir>/orders.db)")
	billingURL := flag.String("billing-dsn", "", "billing database, same forms (default <dir>/billing.db)")
	n := flag.Int("n", 5, "business transactions per data source")
	timeout := flag.Duration("timeout", 30*time.Second, "give up if events are not settled by then")
	verbose := flag.Bool("v", false, "debug logs, fx's wiring included")
	flag.Parse()

	opts := options{urls: map[string]string{"orders": *ordersURL, "billing": *billingURL}, n: *n,
		timeout: *timeout, verbose: *verbose, out: os.Stdout, logOut: os.Stderr, color: isTerminal(os.Stderr)}
	for _, ds := range dataSources {
		if opts.urls[ds] != "" {
			continue
		}
		if err := os.MkdirAll(*dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "multi-ds:", err)
			os.Exit(1)
		}
		path := filepath.Join(*dir, ds+".db")
		for _, suffix := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(path + suffix)
		}
		opts.urls[ds] = path
	}
	if err := run(context.Background(), opts); err != nil {
		fmt.Fprintln(os.Stderr, "multi-ds:", err)
		os.Exit(1)
	}
}

// Notifier is the listener code both data sources share: one instance,
// routed by each data source to its own events. It records which data
// source delivered which event.
type Notifier struct {
	out       io.Writer
	mu        sync.Mutex
	delivered map[string]map[string]int // data source → event id → deliveries
	failures  map[string]int            // data source → failed attempts
}

func newNotifier(out io.Writer) *Notifier {
	return &Notifier{out: out, delivered: map[string]map[string]int{}, failures: map[string]int{}}
}

// Route returns the route of et on at for data source ds. With flaky set,
// the first attempt of every event fails, so the data source's poller
// delivers the retry.
func (n *Notifier) Route(ds string, at outbox.AggregateType, et outbox.EventType, flaky bool) outboxfx.Route {
	return outboxfx.Route{Aggregate: at, Event: et, Listener: outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		attempt := outbox.DeliveryAttempt(ctx)
		n.mu.Lock()
		defer n.mu.Unlock()
		if flaky && attempt == 1 {
			n.failures[ds]++
			fmt.Fprintf(n.out, "  [%-7s] %-15s %-14s attempt %d failed (gateway timeout), will retry\n", ds, e.Type(), e.AggregateID(), attempt)
			return errors.New("payment gateway timeout")
		}
		if n.delivered[ds] == nil {
			n.delivered[ds] = map[string]int{}
		}
		n.delivered[ds][e.ID()]++
		fmt.Fprintf(n.out, "  [%-7s] %-15s %-14s delivered (attempt %d)\n", ds, e.Type(), e.AggregateID(), attempt)
		return nil
	})}
}

func (n *Notifier) snapshot(ds string) (ids map[string]int, failures int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ids = make(map[string]int, len(n.delivered[ds]))
	for id, c := range n.delivered[ds] {
		ids[id] = c
	}
	return ids, n.failures[ds]
}

// paths counts how each data source's events reached the dispatcher.
type paths struct {
	outbox.NopMetrics
	hot, cold, dead atomic.Int64
}

// EventEnqueued counts an event by the path that queued it.
func (p *paths) EventEnqueued(_ outbox.EventLabels, path outbox.Path) {
	if path == outbox.PathHot {
		p.hot.Add(1)
	} else {
		p.cold.Add(1)
	}
}

// Dead counts an event moved to DEAD.
func (p *paths) Dead(outbox.EventLabels) { p.dead.Add(1) }

// parts are what one data source provides, injected by its name.
type parts struct {
	client *outbox.Client
	store  *outboxsql.Store
	txm    *outboxsql.TxManager
	db     *sql.DB
}

// inject returns an fx.Invoke that fills p with data source ds's parts.
func inject(ds string, p *parts) fx.Option {
	tag := outboxfx.NameTag(ds)
	return fx.Invoke(fx.Annotate(func(c *outbox.Client, s *outboxsql.Store, t *outboxsql.TxManager, db *sql.DB) {
		*p = parts{client: c, store: s, txm: t, db: db}
	}, fx.ParamTags(tag, tag, tag, tag)))
}

func run(ctx context.Context, o options) error {
	level := zerolog.InfoLevel
	if o.verbose {
		level = zerolog.DebugLevel
	}
	logger := zerolog.New(zerolog.ConsoleWriter{Out: zerolog.SyncWriter(o.logOut), NoColor: !o.color, TimeFormat: "15:04:05"}).
		Level(level).With().Timestamp().Logger()
	notifier := newNotifier(o.out)
	metrics := map[string]*paths{"orders": {}, "billing": {}}

	appOpts := []fx.Option{
		fx.Supply(logger),
		outboxfx.WithZerolog(),
		outboxfx.ZerologLogger(), // the outbox logs to the zerolog.Logger too
		fx.Supply(notifier),
		outboxfx.Routes("orders", func(n *Notifier) outboxfx.Route {
			return n.Route("orders", orderAggregate, orderPlaced, false)
		}),
		outboxfx.Routes("billing", func(n *Notifier) []outboxfx.Route {
			return []outboxfx.Route{
				n.Route("billing", invoiceAggregate, invoiceIssued, false),
				n.Route("billing", invoiceAggregate, paymentCaptured, true),
			}
		}),
	}
	dsOpts := map[string][]outboxfx.Option{}
	st := map[string]*parts{}
	for _, ds := range dataSources {
		dsOpts[ds] = []outboxfx.Option{
			outboxfx.WithPreset(outboxfx.PresetSingleNode),
			outboxfx.Configure(func(c *outboxfx.Config) {
				c.Migrate = true
				c.Table = "multi_ds_" + ds + "_outbox" // distinct tables: both may point at one database
				c.PollInterval = 200 * time.Millisecond
				c.RetryBase, c.RetryMax = 100*time.Millisecond, time.Second
				// Each table is this program's alone: an event without a
				// listener is a bug, shown in DEAD at once (by default it
				// is left pending for another program).
				c.UnroutedRetry = -1
			}),
			outboxfx.WithMetrics(metrics[ds]),
			outboxfx.FromEnv(), // OUTBOX_ORDERS_… / OUTBOX_BILLING_… have the last word
		}
		st[ds] = &parts{}
		appOpts = append(appOpts,
			outboxfx.SQLDBFromURL(ds, o.urls[ds]),
			outboxfx.DataSource(ds, dsOpts[ds]...),
			inject(ds, st[ds]),
		)
	}
	app := fx.New(appOpts...)
	if err := app.Err(); err != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := app.Start(startCtx); err != nil {
		return err
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		return app.Stop(stopCtx)
	}
	defer func() { _ = stop() }()

	// The business tables, next to each data source's outbox table.
	schema := map[string]string{
		"orders":  `CREATE TABLE IF NOT EXISTS multi_ds_orders (id VARCHAR(64) PRIMARY KEY, amount BIGINT NOT NULL)`,
		"billing": `CREATE TABLE IF NOT EXISTS multi_ds_invoices (id VARCHAR(64) PRIMARY KEY, order_id VARCHAR(64) NOT NULL, amount BIGINT NOT NULL)`,
	}
	before := map[string]outbox.Stats{}
	for _, ds := range dataSources {
		if _, err := st[ds].db.ExecContext(ctx, schema[ds]); err != nil {
			return fmt.Errorf("%s: create table: %w", ds, err)
		}
		s, err := st[ds].client.Stats(ctx)
		if err != nil {
			return err
		}
		before[ds] = s
	}

	run := newRunID()
	written := map[string][]string{}
	fmt.Fprintf(o.out, "writing %d business transactions to each data source (run %s)\n", o.n, run)
	for i := 1; i <= o.n; i++ {
		orderID := fmt.Sprintf("o-%s-%d", run, i)
		ids, err := placeOrder(ctx, st["orders"], orderID, int64(100*i), i == 1)
		if err != nil {
			return fmt.Errorf("orders: %w", err)
		}
		written["orders"] = append(written["orders"], ids...)
		ids, err = issueInvoice(ctx, st["billing"], "i-"+run+"-"+fmt.Sprint(i), orderID, int64(100*i), i == 1)
		if err != nil {
			return fmt.Errorf("billing: %w", err)
		}
		written["billing"] = append(written["billing"], ids...)
	}

	// Expected: every routed event delivered once by its own data source;
	// one OrderArchived in orders goes DEAD (no listener).
	wantDelivered := map[string]int{"orders": o.n, "billing": o.n + 1}
	wantDead := map[string]int64{"orders": 1, "billing": 0}
	deadline := time.Now().Add(o.timeout)
	after := map[string]outbox.Stats{}
	var lastErr error
	for {
		settled := true
		for _, ds := range dataSources {
			s, err := st[ds].client.Stats(ctx)
			if err != nil {
				// A dropped connection is not the end: the outbox recovers
				// from it, and so does this wait, until the timeout.
				lastErr, settled = err, false
				logger.Warn().Err(err).Str("outbox_ds", ds).Msg("stats failed, retrying")
				continue
			}
			after[ds] = s
			got, _ := notifier.snapshot(ds)
			pending := s.ByStatus[outbox.StatusNew] + s.ByStatus[outbox.StatusRetry]
			dead := s.ByStatus[outbox.StatusDead] - before[ds].ByStatus[outbox.StatusDead]
			if len(got) < wantDelivered[ds] || pending > 0 || dead < wantDead[ds] {
				settled = false
			}
		}
		if settled {
			break
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("events not settled after %s", o.timeout), lastErr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := stop(); err != nil {
		return err
	}

	fmt.Fprintln(o.out, "\nsummary")
	ok := true
	for _, ds := range dataSources {
		p := st[ds]
		c, err := outboxfx.ResolveConfig(ds, dsOpts[ds]...) // as the data source resolved it at start
		if err != nil {
			return err
		}
		c = c.WithDefaults()
		got, failures := notifier.snapshot(ds)
		theirs := map[string]bool{} // the other data source's events
		for _, other := range dataSources {
			for _, id := range written[other] {
				theirs[id] = other != ds
			}
		}
		foreign, duplicates, missing := 0, 0, 0
		for id, n := range got {
			if theirs[id] {
				foreign++ // delivered by the wrong data source: must never happen
			}
			duplicates += n - 1
		}
		dead := after[ds].ByStatus[outbox.StatusDead] - before[ds].ByStatus[outbox.StatusDead]
		done := after[ds].ByStatus[outbox.StatusDone] - before[ds].ByStatus[outbox.StatusDone]
		missing = len(written[ds]) - len(got) - int(dead)
		m := metrics[ds]
		fmt.Fprintf(o.out, "  %-7s %s, table %s, owner %s\n", ds, p.store.Dialect().Name(), p.store.Table(), p.client.Owner())
		fmt.Fprintf(o.out, "          own dispatcher (%d workers), poller (every %s), purger (every %s, keeps %s)\n",
			c.Workers, c.PollInterval, c.PurgeInterval, c.Retention)
		fmt.Fprintf(o.out, "          written %d, delivered %d, dead %d (no listener), failed attempts %d\n",
			len(written[ds]), len(got), dead, failures)
		fmt.Fprintf(o.out, "          queued by the hot path %d, by the poller %d; rows DONE %d; duplicates %d, from the other data source %d, missing %d\n",
			m.hot.Load(), m.cold.Load(), done, duplicates, foreign, missing)
		if c.Mode != outbox.ModeFull || c.DisablePurge {
			ok = false // the summary above describes a data source running everything
		}
		if foreign > 0 || missing != 0 || len(got) != wantDelivered[ds] || dead != wantDead[ds] || done != int64(len(got)) {
			ok = false
		}
	}
	if !ok {
		return errors.New("inconsistent outcome: every event must be delivered by its own data source, once, or be DEAD")
	}
	fmt.Fprintln(o.out, "ok: each data source delivered exactly its own events")
	return nil
}

// placeOrder inserts an order and its events in one orders transaction.
func placeOrder(ctx context.Context, p *parts, id string, amount int64, archived bool) ([]string, error) {
	events := []outbox.Envelope{outbox.MustEnvelope(orderPlaced, outbox.WithAggregate(orderAggregate, id),
		outbox.WithJSONValue(map[string]any{"order": id, "amount": amount}))}
	if archived {
		events = append(events, outbox.MustEnvelope(orderArchived, outbox.WithAggregate(orderAggregate, id), outbox.WithJSON([]byte(`{}`))))
	}
	return writeWith(ctx, p, `INSERT INTO multi_ds_orders (id, amount) VALUES (?, ?)`, []any{id, amount}, events)
}

// issueInvoice inserts an invoice and its events in one billing transaction.
func issueInvoice(ctx context.Context, p *parts, id, orderID string, amount int64, captured bool) ([]string, error) {
	events := []outbox.Envelope{outbox.MustEnvelope(invoiceIssued, outbox.WithAggregate(invoiceAggregate, id),
		outbox.WithJSONValue(map[string]any{"invoice": id, "order": orderID, "amount": amount}))}
	if captured {
		events = append(events, outbox.MustEnvelope(paymentCaptured, outbox.WithAggregate(invoiceAggregate, id),
			outbox.WithJSONValue(map[string]any{"invoice": id, "captured": amount})))
	}
	return writeWith(ctx, p, `INSERT INTO multi_ds_invoices (id, order_id, amount) VALUES (?, ?, ?)`, []any{id, orderID, amount}, events)
}

// writeWith runs the business insert and the outbox write in one
// transaction of the data source.
func writeWith(ctx context.Context, p *parts, insert string, args []any, events []outbox.Envelope) ([]string, error) {
	var ids []string
	err := p.txm.InTx(ctx, func(ctx context.Context) error {
		tx, _ := p.txm.Tx(ctx)
		if _, err := tx.ExecContext(ctx, outboxsql.Rebind(p.store.Dialect(), insert), args...); err != nil {
			return err
		}
		var err error
		ids, err = p.client.Write(ctx, events...)
		return err
	})
	return ids, err
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func newRunID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
