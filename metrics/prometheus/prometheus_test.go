package outboxprom_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxtest"
	outboxprom "github.com/go-outbox/outbox/metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	_ "modernc.org/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sqliteClient opens a fresh SQLite outbox and a Client on it with m; both
// are closed at cleanup.
func sqliteClient(t *testing.T, m outbox.Metrics, cfg outbox.Config) (*outbox.Client, *outboxsql.TxManager) {
	t.Helper()
	db, err := sql.Open("sqlite", outboxsql.SQLiteDSN(filepath.Join(t.TempDir(), "outbox.db")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	store, err := outboxsql.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	txm := outboxsql.NewTxManager(db)
	cfg.Store, cfg.TxContext, cfg.Metrics = store, txm, m
	cfg.Logger = slog.New(slog.DiscardHandler)
	c, err := outbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return c, txm
}

func write(t *testing.T, c *outbox.Client, txm *outboxsql.TxManager, events ...outbox.Envelope) {
	t.Helper()
	if err := txm.InTx(context.Background(), func(ctx context.Context) error {
		_, err := c.Write(ctx, events...)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func event(et string) outbox.Envelope {
	return outbox.MustEnvelope(outbox.EventName(et), outbox.WithJSON([]byte(`{}`)))
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sampleCount returns the sample count of the histogram name with labels
// (a subset of its labels), summed over the series that match.
func sampleCount(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// value returns the value of counter or gauge name with labels, summed
// over the series that match.
func value(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) {
				v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return v
}

func matches(m *dto.Metric, labels map[string]string) bool {
	found := 0
	for _, lp := range m.GetLabel() {
		if v, ok := labels[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			found++
		}
	}
	return found == len(labels)
}

func TestMetricsOfARealClient(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := outboxprom.New(outboxprom.Options{Registerer: reg, DataSource: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	c, txm := sqliteClient(t, m, outbox.Config{MaxAttempts: 2, PollInterval: 20 * time.Millisecond,
		RetryPolicy:     outbox.RetryPolicyFunc(func(int) time.Duration { return time.Millisecond }),
		MetricsInterval: 20 * time.Millisecond})
	if err := c.Handle(outbox.EventName("OrderPlaced"), func(context.Context, outbox.Envelope) error {
		time.Sleep(2 * time.Millisecond)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Handle(outbox.EventName("PaymentFailed"), func(context.Context, outbox.Envelope) error {
		return errors.New("gateway down")
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	write(t, c, txm, event("OrderPlaced"), event("OrderPlaced"), event("PaymentFailed"))
	write(t, c, txm, event("OrderPlaced"))

	eventually(t, "3 delivered and 1 dead", func() bool {
		return value(t, reg, "outbox_delivered_total", map[string]string{"event_type": "OrderPlaced"}) == 3 &&
			value(t, reg, "outbox_dead_total", map[string]string{"event_type": "PaymentFailed"}) == 1
	})
	eventually(t, "the backlog sample with the DEAD event", func() bool {
		return value(t, reg, "outbox_dead", nil) == 1 && value(t, reg, "outbox_pending", nil) == 0
	})

	// The text exposition, as a scrape sees it: every series of an event
	// type exists from its first event on, at 0 until counted, so ratios
	// and rates need no absent() guards.
	want := `
# HELP outbox_events_written_total Events inserted by transactions that committed.
# TYPE outbox_events_written_total counter
outbox_events_written_total{datasource="orders",event_type="OrderPlaced"} 3
outbox_events_written_total{datasource="orders",event_type="PaymentFailed"} 1
# HELP outbox_delivered_total Deliveries whose listener succeeded.
# TYPE outbox_delivered_total counter
outbox_delivered_total{datasource="orders",event_type="OrderPlaced"} 3
outbox_delivered_total{datasource="orders",event_type="PaymentFailed"} 0
# HELP outbox_failed_total Deliveries that failed and will be retried.
# TYPE outbox_failed_total counter
outbox_failed_total{datasource="orders",event_type="OrderPlaced"} 0
outbox_failed_total{datasource="orders",event_type="PaymentFailed"} 1
# HELP outbox_dead_total Events moved to DEAD.
# TYPE outbox_dead_total counter
outbox_dead_total{datasource="orders",event_type="OrderPlaced"} 0
outbox_dead_total{datasource="orders",event_type="PaymentFailed"} 1
# HELP outbox_dead DEAD events in the table, at the last sample.
# TYPE outbox_dead gauge
outbox_dead{datasource="orders"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "outbox_events_written_total", "outbox_delivered_total",
		"outbox_failed_total", "outbox_dead_total", "outbox_dead"); err != nil {
		t.Error(err)
	}
	if n := value(t, reg, "outbox_enqueued_total", map[string]string{"event_type": "OrderPlaced", "path": "hot"}); n != 3 {
		t.Errorf("hot enqueues of OrderPlaced = %v, want 3", n)
	}
	// Histograms: one listener run per delivery, one latency per delivery start.
	// They are read with the Client stopped: its poller claims every 20 ms,
	// and a claim between two reads would count in one and not the other.
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   uint64
	}{
		{"outbox_delivery_seconds", map[string]string{"event_type": "OrderPlaced", "datasource": "orders"}, 3},
		{"outbox_delivery_seconds", map[string]string{"event_type": "PaymentFailed"}, 2},
		{"outbox_commit_to_delivery_seconds", map[string]string{"event_type": "OrderPlaced"}, 3},
		{"outbox_commit_to_delivery_seconds", map[string]string{"event_type": "PaymentFailed"}, 2},
	} {
		if got := sampleCount(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v: %d samples, want %d", c.name, c.labels, got, c.want)
		}
	}
	if n := sampleCount(t, reg, "outbox_claim_seconds", nil); n == 0 {
		t.Error("no claim observed")
	}
	if n := sampleCount(t, reg, "outbox_claim_size", nil); n != sampleCount(t, reg, "outbox_claim_seconds", nil) {
		t.Errorf("claim sizes %d, claim durations %d: want one of each per claim", n, sampleCount(t, reg, "outbox_claim_seconds", nil))
	}
	if n := sampleCount(t, reg, "outbox_ack_batch_size", nil); n == 0 || n > 3 {
		t.Errorf("%d ack batches for 3 deliveries", n)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestSeveralClientsShareARegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	orders, err := outboxprom.New(outboxprom.Options{Registerer: reg, DataSource: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	billing, err := outboxprom.New(outboxprom.Options{Registerer: reg, DataSource: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outboxprom.New(outboxprom.Options{Registerer: reg, DataSource: "orders"}); err == nil || !strings.Contains(err.Error(), "registered already") {
		t.Errorf("a second Metrics for orders: %v", err)
	}
	if _, err := outboxprom.New(outboxprom.Options{Registerer: reg, ConstLabels: prometheus.Labels{"datasource": "x"}}); err == nil {
		t.Error("ConstLabels with datasource accepted")
	}
	co, txo := sqliteClient(t, orders, outbox.Config{})
	cb, txb := sqliteClient(t, billing, outbox.Config{})
	for _, c := range []*outbox.Client{co, cb} {
		if err := c.Handle(outbox.EventName("E"), func(context.Context, outbox.Envelope) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	write(t, co, txo, event("E"), event("E"))
	write(t, cb, txb, event("E"))
	eventually(t, "2 + 1 delivered", func() bool {
		return sampleCount(t, reg, "outbox_delivery_seconds", map[string]string{"datasource": "orders"}) == 2 &&
			sampleCount(t, reg, "outbox_delivery_seconds", map[string]string{"datasource": "billing"}) == 1
	})
	if n := testutil.CollectAndCount(orders, "outbox_delivered_total"); n != 1 {
		t.Errorf("orders has %d delivered series, want 1", n)
	}
	if !billing.Unregister() {
		t.Error("Unregister")
	}
}

// TestTenantLabel: the tenant label appears on the per-event series only
// with Options.TenantLabel, and then on every one of them.
func TestTenantLabel(t *testing.T) {
	for _, on := range []bool{false, true} {
		reg := prometheus.NewPedanticRegistry()
		m, err := outboxprom.New(outboxprom.Options{Registerer: reg, TenantLabel: on})
		if err != nil {
			t.Fatal(err)
		}
		acme, none := outbox.EventLabels{Type: "Ping", Tenant: "acme"}, outbox.EventLabels{Type: "Ping"}
		for _, l := range []outbox.EventLabels{acme, none, acme} {
			everyPerEventMethod(m, l, false)
		}
		m.SubscriberRun(acme, "mail", true)
		m.AckBatch(3)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		perEvent := 0
		for _, mf := range mfs {
			for _, metric := range mf.GetMetric() {
				var hasType, hasTenant bool
				for _, lp := range metric.GetLabel() {
					hasType = hasType || lp.GetName() == "event_type"
					hasTenant = hasTenant || lp.GetName() == outboxprom.TenantLabelName
				}
				if hasType {
					perEvent++
				}
				if hasTenant != (on && hasType) {
					t.Errorf("TenantLabel %v: %s %v has the tenant label: %v", on, mf.GetName(), metric.GetLabel(), hasTenant)
				}
			}
		}
		if perEvent == 0 {
			t.Fatal("no per-event series")
		}
		want := map[bool]float64{false: 3, true: 2}[on] // with the label, acme's own series
		labels := map[string]string{"event_type": "Ping"}
		if on {
			labels[outboxprom.TenantLabelName] = "acme"
		}
		if got := value(t, reg, "outbox_delivered_total", labels); got != want {
			t.Errorf("TenantLabel %v: delivered %v = %v, want %v", on, labels, got, want)
		}
		if got := sampleCount(t, reg, "outbox_delivery_seconds", labels); got != uint64(want) {
			t.Errorf("TenantLabel %v: delivery samples %v = %v, want %v", on, labels, got, want)
		}
		labels["subscriber"], labels["outcome"] = "mail", "failed"
		if got := value(t, reg, "outbox_subscriber_runs_total", labels); got != want {
			t.Errorf("TenantLabel %v: subscriber runs %v = %v, want %v", on, labels, got, want)
		}
		labels["outcome"] = "ok"
		if got := value(t, reg, "outbox_subscriber_runs_total", labels); got != 1 {
			t.Errorf("TenantLabel %v: subscriber runs %v = %v, want 1", on, labels, got)
		}
	}
}

// everyPerEventMethod records one event of l in every per-event family,
// with a run of subscriber "mail" that succeeded or failed.
func everyPerEventMethod(m *outboxprom.Metrics, l outbox.EventLabels, subscriberOK bool) {
	m.EventsWritten(l, 2)
	m.EventEnqueued(l, outbox.PathHot)
	m.EventEnqueued(l, outbox.PathCold)
	m.EventDropped(l)
	m.Delivered(l)
	m.Failed(l)
	m.Dead(l)
	m.Expired(l)
	m.DeliveryDuration(l, "done", time.Millisecond)
	m.CommitToDelivery(l, time.Millisecond)
	m.SubscriberRun(l, "mail", subscriberOK)
}

// typeSeries returns, per family with an event_type label, the number of
// distinct event_type values, and the value (or sample count) summed over
// its series.
func typeSeries(t *testing.T, reg prometheus.Gatherer) (types map[string]int, totals map[string]float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	types, totals = map[string]int{}, map[string]float64{}
	for _, mf := range mfs {
		seen := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "event_type" {
					seen[lp.GetValue()] = true
				}
			}
			totals[mf.GetName()] += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
		if len(seen) > 0 {
			types[mf.GetName()] = len(seen)
		}
	}
	return types, totals
}

// TestEventTypeCap records events of 5,000 distinct types with a cap of
// 100 (as when a type is made of request data): every family keeps at most
// 101 event types, the 4,900 others counted under "_other", the totals
// unchanged, and one warning is logged.
func TestEventTypeCap(t *testing.T) {
	for _, tenant := range []bool{false, true} {
		reg := prometheus.NewPedanticRegistry()
		logger, log := outboxtest.NewLogBuffer()
		m, err := outboxprom.New(outboxprom.Options{Registerer: reg, MaxEventTypes: 100, TenantLabel: tenant, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		const n = 5000
		for i := range n {
			everyPerEventMethod(m, outbox.EventLabels{Type: fmt.Sprintf("Type%05d", i), Tenant: "acme"}, true)
		}
		everyPerEventMethod(m, outbox.EventLabels{Type: "Type00007", Tenant: "acme"}, true) // an early type keeps its series
		types, totals := typeSeries(t, reg)
		if len(types) != 10 {
			t.Errorf("TenantLabel %v: %d families with an event_type label, want 10: %v", tenant, len(types), types)
		}
		for family, got := range types {
			if got > 101 {
				t.Errorf("TenantLabel %v: %s has %d event types, want at most 101", tenant, family, got)
			}
		}
		for family, want := range map[string]float64{
			"outbox_events_written_total": 2 * (n + 1), "outbox_enqueued_total": 2 * (n + 1), "outbox_delivered_total": n + 1,
			"outbox_dead_total": n + 1, "outbox_delivery_seconds": n + 1, "outbox_commit_to_delivery_seconds": n + 1,
			"outbox_subscriber_runs_total": n + 1, "outbox_expired_total": n + 1,
		} {
			if totals[family] != want {
				t.Errorf("TenantLabel %v: %s totals %v, want %v", tenant, family, totals[family], want)
			}
		}
		other := map[string]string{"event_type": outboxprom.OverflowLabel}
		if tenant {
			other[outboxprom.TenantLabelName] = outboxprom.OverflowLabel
		}
		if got := value(t, reg, "outbox_delivered_total", other); got != n-100 {
			t.Errorf("TenantLabel %v: delivered under _other %v, want %d", tenant, got, n-100)
		}
		if got := value(t, reg, "outbox_delivered_total", map[string]string{"event_type": "Type00007"}); got != 2 {
			t.Errorf("TenantLabel %v: delivered Type00007 %v, want 2", tenant, got)
		}
		if lines := strings.Count(log.String(), "MaxEventTypes"); lines != 1 {
			t.Errorf("TenantLabel %v: %d warnings, want 1:\n%s", tenant, lines, log.String())
		}
	}
	if _, err := outboxprom.New(outboxprom.Options{Registerer: prometheus.NewRegistry(), MaxEventTypes: -1}); err == nil {
		t.Error("MaxEventTypes -1 accepted")
	}
}

// TestEventTypeCapByDefault: without Options.MaxEventTypes, 5,000 event
// types get at most 1,001 series per family.
func TestEventTypeCapByDefault(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := outboxprom.New(outboxprom.Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5000 {
		m.Delivered(outbox.EventLabels{Type: fmt.Sprintf("Type%05d", i)})
	}
	types, totals := typeSeries(t, reg)
	if types["outbox_delivered_total"] > 1001 || totals["outbox_delivered_total"] != 5000 {
		t.Errorf("delivered: %d event types (want at most 1,001), %v in all (want 5000)",
			types["outbox_delivered_total"], totals["outbox_delivered_total"])
	}
}

// The day-2 series of a real Client: a route's circuit breaker opening
// (outbox_breaker_state, outbox_breaker_transitions_total), the results of
// outbox_delivery_seconds, the retrying and in-flight gauges, and a
// pause this Client obeys (outbox_paused, gone once resumed).
func TestDayTwoMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := outboxprom.New(outboxprom.Options{Registerer: reg, DataSource: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	c, txm := sqliteClient(t, m, outbox.Config{MaxAttempts: 10, PollInterval: 20 * time.Millisecond,
		RetryPolicy:     outbox.RetryPolicyFunc(func(int) time.Duration { return time.Millisecond }),
		MetricsInterval: 20 * time.Millisecond, ControlInterval: 20 * time.Millisecond,
		BreakerFailures: 2, BreakerInterval: time.Hour})
	release := make(chan struct{})
	if err := c.Handle(outbox.EventName("PaymentFailed"), func(context.Context, outbox.Envelope) error { return errors.New("gateway down") }); err != nil {
		t.Fatal(err)
	}
	if err := c.Handle(outbox.EventName("Slow"), func(ctx context.Context, _ outbox.Envelope) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Handle(outbox.EventName("OrderPlaced"), func(context.Context, outbox.Envelope) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	write(t, c, txm, event("PaymentFailed"), event("PaymentFailed"), event("PaymentFailed"), event("Slow"))
	open := map[string]string{"event_type": "PaymentFailed", "state": outbox.BreakerOpen}
	eventually(t, "the breaker of PaymentFailed open", func() bool {
		return value(t, reg, "outbox_breaker_state", open) == 1 &&
			value(t, reg, "outbox_breaker_state", map[string]string{"event_type": "PaymentFailed", "state": outbox.BreakerClosed}) == 0
	})
	if n := value(t, reg, "outbox_breaker_transitions_total", open); n != 1 {
		t.Errorf("moves into open: %v, want 1", n)
	}
	eventually(t, "the retrying and in-flight gauges", func() bool {
		return value(t, reg, "outbox_retrying", nil) >= 1 && value(t, reg, "outbox_in_flight", nil) >= 1
	})
	if n := sampleCount(t, reg, "outbox_delivery_seconds", map[string]string{"event_type": "PaymentFailed", "result": "retry"}); n < 2 {
		t.Errorf("PaymentFailed deliveries with result retry: %d, want at least 2", n)
	}
	close(release)
	eventually(t, "Slow delivered, with result done", func() bool {
		return sampleCount(t, reg, "outbox_delivery_seconds", map[string]string{"event_type": "Slow", "result": "done"}) == 1
	})

	ctx := context.Background()
	if err := c.Pause(ctx, "OrderPlaced", "maintenance"); err != nil {
		t.Fatal(err)
	}
	scope := map[string]string{"scope": "OrderPlaced"}
	eventually(t, "outbox_paused of OrderPlaced", func() bool { return value(t, reg, "outbox_paused", scope) == 1 })
	if err := c.Resume(ctx, "OrderPlaced"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "outbox_paused of OrderPlaced gone", func() bool { return !hasSeries(t, reg, "outbox_paused", scope) })
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// hasSeries reports whether family name has a series with labels.
func hasSeries(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) bool {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == name && matches(m, labels) {
				return true
			}
		}
	}
	return false
}

// The horizon guard's gauges, from a report as a PostgreSQL Client's guard
// makes it: a kind of holder that goes away takes its series with it.
func TestHorizonGauges(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := outboxprom.New(outboxprom.Options{Registerer: reg, DataSource: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	vacuumed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m.Horizon(outbox.HorizonReport{Horizon: outbox.Horizon{DeadTuples: 236_000, LiveTuples: 120_000, TableSize: 80 << 20, LastAutovacuum: vacuumed,
		Holders: []outbox.HorizonHolder{{Kind: outbox.HolderTransaction, PID: 7, Age: 90 * time.Second, XIDAge: 5000}, {Kind: outbox.HolderSlot, XIDAge: 10}}},
		Warnings: []outbox.HorizonWarning{{Check: outbox.CheckDeadTuples}}})
	for name, want := range map[string]float64{"outbox_table_dead_tuples": 236_000, "outbox_table_live_tuples": 120_000,
		"outbox_table_size_bytes": 80 << 20, "outbox_table_last_vacuum_timestamp_seconds": float64(vacuumed.Unix())} {
		if got := value(t, reg, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	tx := map[string]string{"kind": outbox.HolderTransaction}
	if age, xids := value(t, reg, "outbox_horizon_holder_age_seconds", tx), value(t, reg, "outbox_horizon_holder_xid_age", tx); age != 90 || xids != 5000 {
		t.Errorf("transaction holder: %v s, %v transactions; want 90 and 5000", age, xids)
	}
	if value(t, reg, "outbox_horizon_warning", map[string]string{"check": outbox.CheckDeadTuples}) != 1 ||
		value(t, reg, "outbox_horizon_warning", map[string]string{"check": outbox.CheckHolderAge}) != 0 {
		t.Error("outbox_horizon_warning: want 1 for dead_tuples, 0 for holder_age")
	}
	m.Horizon(outbox.HorizonReport{})
	if hasSeries(t, reg, "outbox_horizon_holder_age_seconds", tx) || value(t, reg, "outbox_horizon_warning", map[string]string{"check": outbox.CheckDeadTuples}) != 0 {
		t.Error("a report without holders or warnings left their series")
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
