package outboxotel_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"maps"
	"path/filepath"
	"sync"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	outboxotel "github.com/go-outbox/outbox/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
	_ "modernc.org/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sqliteClient opens a fresh SQLite outbox and a Client on it; both are
// closed at cleanup.
func sqliteClient(t testing.TB, cfg outbox.Config) (*outbox.Client, *outboxsql.TxManager) {
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
	cfg.Store, cfg.TxContext = store, txm
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

func event(et string) outbox.Envelope {
	return outbox.MustEnvelope(outbox.EventName(et), outbox.WithJSON([]byte(`{}`)), outbox.WithAggregate(outbox.AggregateName("Order"), "o-1"))
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDeliverySpanIsAChildOfTheWritersSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	opts := outboxotel.Options{TracerProvider: tp}
	c, txm := sqliteClient(t, outbox.Config{MaxAttempts: 1,
		Hooks: []outbox.WriterHook{outboxotel.WriterHook(opts)}, Interceptors: []outbox.Interceptor{outboxotel.Interceptor(opts)}})

	var mu sync.Mutex
	seen := map[string]trace.SpanContext{} // event type -> the span context the listener got
	listener := func(fail bool) func(ctx context.Context, e outbox.Envelope) error {
		return func(ctx context.Context, e outbox.Envelope) error {
			mu.Lock()
			seen[e.Type()] = trace.SpanContextFromContext(ctx)
			mu.Unlock()
			if fail {
				return errors.New("card declined")
			}
			return nil
		}
	}
	for et, fail := range map[string]bool{"OrderPlaced": false, "PaymentFailed": true, "Untraced": false} {
		if err := c.Handle(outbox.EventName(et), listener(fail)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The request that writes: a span around the transaction.
	ctx, writer := tp.Tracer("app").Start(context.Background(), "POST /orders")
	var ids []string
	if err := txm.InTx(ctx, func(ctx context.Context) (err error) {
		ids, err = c.Write(ctx, event("OrderPlaced"), event("PaymentFailed"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	writer.End()
	// No span in the writer's context: no headers, a new trace.
	if err := txm.InTx(context.Background(), func(ctx context.Context) error {
		_, err := c.Write(ctx, event("Untraced"))
		return err
	}); err != nil {
		t.Fatal(err)
	}

	rec0, err := c.Get(context.Background(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if tp, ok := rec0.Envelope.Header("traceparent"); !ok || len(tp) != 55 {
		t.Errorf("stored traceparent %q", tp)
	}

	byName := func(name string) sdktrace.ReadOnlySpan {
		for _, s := range rec.Ended() {
			if s.Name() == name {
				return s
			}
		}
		return nil
	}
	eventually(t, "three delivery spans", func() bool {
		return byName("process OrderPlaced") != nil && byName("process PaymentFailed") != nil && byName("process Untraced") != nil
	})
	wsc := writer.SpanContext()
	for _, name := range []string{"process OrderPlaced", "process PaymentFailed"} {
		s := byName(name)
		if s.SpanContext().TraceID() != wsc.TraceID() || s.Parent().SpanID() != wsc.SpanID() || !s.Parent().IsRemote() {
			t.Errorf("%s: trace %s parent %s; want trace %s parent %s (the writer's span)", name,
				s.SpanContext().TraceID(), s.Parent().SpanID(), wsc.TraceID(), wsc.SpanID())
		}
		if s.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("%s: kind %v", name, s.SpanKind())
		}
		mu.Lock()
		got := seen[name[len("process "):]]
		mu.Unlock()
		if got.SpanID() != s.SpanContext().SpanID() {
			t.Errorf("%s: the listener's context has span %s, want the delivery span %s", name, got.SpanID(), s.SpanContext().SpanID())
		}
	}
	ok := byName("process OrderPlaced")
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range ok.Attributes() {
		attrs[kv.Key] = kv.Value
	}
	for k, want := range map[attribute.Key]string{"messaging.system": "outbox", "messaging.operation.name": "process",
		"messaging.operation.type": "process", "messaging.message.id": ids[0], "messaging.destination.name": "OrderPlaced",
		"outbox.aggregate.type": "Order", "outbox.aggregate.id": "o-1"} {
		if got := attrs[k].AsString(); got != want {
			t.Errorf("attribute %s = %q, want %q", k, got, want)
		}
	}
	if attrs["outbox.delivery.attempt"].AsInt64() != 1 {
		t.Errorf("attempt %v", attrs["outbox.delivery.attempt"])
	}
	if ok.Status().Code != codes.Unset {
		t.Errorf("success status %v", ok.Status())
	}
	if failed := byName("process PaymentFailed"); failed.Status().Code != codes.Error || failed.Status().Description != "card declined" || len(failed.Events()) == 0 {
		t.Errorf("failure status %v, events %v", failed.Status(), failed.Events())
	}
	untraced := byName("process Untraced")
	if untraced.Parent().IsValid() || untraced.SpanContext().TraceID() == wsc.TraceID() {
		t.Errorf("an event without headers continued trace %s", untraced.Parent().TraceID())
	}
}

func TestWriterHookKeepsExistingHeaders(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("app").Start(context.Background(), "relay")
	defer span.End()
	relayed := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	e := outbox.MustEnvelope(outbox.EventName("E"), outbox.WithJSON([]byte(`{}`)), outbox.WithHeader("traceparent", relayed))
	out, err := outboxotel.WriterHook(outboxotel.Options{}).BeforeWrite(ctx, []outbox.Envelope{e, event("F")})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := out[0].Header("traceparent"); v != relayed {
		t.Errorf("relayed traceparent replaced by %q", v)
	}
	if v, _ := out[1].Header("traceparent"); v == "" || v[36:52] != span.SpanContext().SpanID().String() {
		t.Errorf("traceparent %q, want the writer's span %s", v, span.SpanContext().SpanID())
	}
}

func TestMetricsOnAMeterProvider(t *testing.T) {
	m, reader := ordersMetrics(t)
	c, txm := sqliteClient(t, outbox.Config{Metrics: m, MetricsInterval: 10 * time.Millisecond})
	for _, name := range []string{"mail", "stock"} { // two subscribers: outbox.subscriber.runs
		if err := c.Subscribe(name, outbox.EventName("OrderPlaced"), outbox.ListenerFunc(func(context.Context, outbox.Envelope) error { return nil })); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := txm.InTx(context.Background(), func(ctx context.Context) error {
		_, err := c.Write(ctx, event("OrderPlaced"), event("OrderPlaced"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	collect := func() map[string]metricdata.Aggregation {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		out := map[string]metricdata.Aggregation{}
		for _, sm := range rm.ScopeMetrics {
			for _, md := range sm.Metrics {
				out[md.Name] = md.Data
			}
		}
		return out
	}
	sum := func(a metricdata.Aggregation) int64 {
		s, _ := a.(metricdata.Sum[int64])
		var n int64
		for _, dp := range s.DataPoints {
			n += dp.Value
		}
		return n
	}
	eventually(t, "2 delivered", func() bool { return sum(collect()["outbox.delivered"]) == 2 })
	got := collect()
	if n := sum(got["outbox.events.written"]); n != 2 {
		t.Errorf("written %d", n)
	}
	h := got["outbox.delivery.duration"].(metricdata.Histogram[float64])
	if len(h.DataPoints) != 1 || h.DataPoints[0].Count != 2 {
		t.Fatalf("delivery histogram %+v", h.DataPoints)
	}
	dp := h.DataPoints[0]
	if v, _ := dp.Attributes.Value(outboxotel.EventTypeKey); v.AsString() != "OrderPlaced" {
		t.Errorf("attributes %v", dp.Attributes)
	}
	if v, _ := dp.Attributes.Value(outboxotel.DataSourceKey); v.AsString() != "orders" {
		t.Errorf("attributes %v", dp.Attributes)
	}
	if l := got["outbox.commit_to_delivery.duration"].(metricdata.Histogram[float64]); l.DataPoints[0].Count != 2 {
		t.Errorf("latency count %d", l.DataPoints[0].Count)
	}
	runs, _ := got["outbox.subscriber.runs"].(metricdata.Sum[int64])
	perSubscriber := map[string]int64{}
	for _, dp := range runs.DataPoints {
		name, _ := dp.Attributes.Value(outboxotel.SubscriberKey)
		outcome, _ := dp.Attributes.Value(outboxotel.OutcomeKey)
		perSubscriber[name.AsString()+" "+outcome.AsString()] += dp.Value
	}
	if want := map[string]int64{"mail ok": 2, "stock ok": 2}; !maps.Equal(perSubscriber, want) {
		t.Errorf("subscriber runs %v, want %v", perSubscriber, want)
	}
	eventually(t, "a backlog sample", func() bool {
		g, ok := collect()["outbox.pending"].(metricdata.Gauge[int64])
		return ok && len(g.DataPoints) == 1 && g.DataPoints[0].Value == 0
	})
}

func TestEnvelopeOptions(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	headers := outboxotel.EnvelopeOptions(outboxotel.Options{})
	if opts := headers(context.Background()); len(opts) != 0 {
		t.Errorf("%d options without a span", len(opts))
	}
	ctx, span := tp.Tracer("app").Start(context.Background(), "command")
	defer span.End()
	e := outbox.MustEnvelope(outbox.EventName("E"), append([]outbox.EnvelopeOption{outbox.WithJSON([]byte(`{}`))}, headers(ctx)...)...)
	if v, _ := e.Header("traceparent"); v != "00-"+span.SpanContext().TraceID().String()+"-"+span.SpanContext().SpanID().String()+"-01" {
		t.Errorf("traceparent %q", v)
	}
}

// TestTenantAttribute: the tenant attribute appears on the per-event
// measurements only with MetricsOptions.TenantAttribute.
func TestTenantAttribute(t *testing.T) {
	for _, on := range []bool{false, true} {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		m, err := outboxotel.NewMetrics(mp, outboxotel.MetricsOptions{TenantAttribute: on})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []outbox.EventLabels{{Type: "Ping", Tenant: "acme"}, {Type: "Ping"}} {
			m.EventsWritten(l, 1)
			m.EventEnqueued(l, outbox.PathCold)
			m.Delivered(l)
			m.Dead(l)
			m.ListenerDuration(l, time.Millisecond)
		}
		m.AckBatch(2)
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		_ = mp.Shutdown(context.Background())
		tenants := map[string]bool{}
		for _, sm := range rm.ScopeMetrics {
			for _, md := range sm.Metrics {
				var sets []attribute.Set
				switch d := md.Data.(type) {
				case metricdata.Sum[int64]:
					for _, dp := range d.DataPoints {
						sets = append(sets, dp.Attributes)
					}
				case metricdata.Histogram[float64]:
					for _, dp := range d.DataPoints {
						sets = append(sets, dp.Attributes)
					}
				case metricdata.Histogram[int64]:
					for _, dp := range d.DataPoints {
						sets = append(sets, dp.Attributes)
					}
				}
				for _, set := range sets {
					_, typed := set.Value(outboxotel.EventTypeKey)
					v, has := set.Value(outboxotel.TenantKey)
					if has != (on && typed) {
						t.Errorf("TenantAttribute %v: %s %v has the tenant: %v", on, md.Name, set, has)
					}
					if has {
						tenants[v.AsString()] = true
					}
				}
			}
		}
		if on && (!tenants["acme"] || !tenants[""]) {
			t.Errorf("tenants seen %v, want acme and none", tenants)
		}
	}
}

func TestHorizonGauges(t *testing.T) {
	m, reader := ordersMetrics(t)
	m.Horizon(outbox.HorizonReport{Horizon: outbox.Horizon{DeadTuples: 236_000, TableSize: 80 << 20,
		Holders: []outbox.HorizonHolder{{Kind: outbox.HolderTransaction, Age: 90 * time.Second, XIDAge: 5000}}},
		Warnings: []outbox.HorizonWarning{{Check: outbox.CheckHolderAge}}})
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	ints := map[string]int64{}
	floats := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			switch g := md.Data.(type) {
			case metricdata.Gauge[int64]:
				for _, dp := range g.DataPoints {
					kind, _ := dp.Attributes.Value(outboxotel.HolderKey)
					check, _ := dp.Attributes.Value(outboxotel.CheckKey)
					ints[md.Name+" "+kind.AsString()+check.AsString()] = dp.Value
				}
			case metricdata.Gauge[float64]:
				for _, dp := range g.DataPoints {
					kind, _ := dp.Attributes.Value(outboxotel.HolderKey)
					floats[md.Name+" "+kind.AsString()] = dp.Value
				}
			}
		}
	}
	for name, want := range map[string]int64{"outbox.table.dead_tuples ": 236_000, "outbox.table.size ": 80 << 20,
		"outbox.horizon.holder.xid_age transaction": 5000, "outbox.horizon.holder.xid_age replication slot": 0,
		"outbox.horizon.warning holder_age": 1, "outbox.horizon.warning dead_tuples": 0} {
		if ints[name] != want {
			t.Errorf("%s = %d, want %d (all: %v)", name, ints[name], want, ints)
		}
	}
	if floats["outbox.horizon.holder.age transaction"] != 90 {
		t.Errorf("holder age: %v", floats)
	}
}

// ordersMetrics returns the Metrics of data source "orders" on a meter
// provider shut down at cleanup, and the provider's manual reader.
func ordersMetrics(t *testing.T) (*outboxotel.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := outboxotel.NewMetrics(mp, outboxotel.MetricsOptions{DataSource: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	return m, reader
}
