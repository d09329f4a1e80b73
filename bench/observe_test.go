package bench

import (
	"context"
	"database/sql"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
	"github.com/go-outbox/outbox/core/outboxsql"
	outboxprom "github.com/go-outbox/outbox/metrics/prometheus"
	outboxotel "github.com/go-outbox/outbox/otel"
	"github.com/prometheus/client_golang/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// observed is one way of observing a Client: its metrics, hooks,
// interceptors, and the tracer whose span wraps each write (the request
// that writes the event), if any.
type observed struct {
	metrics      outbox.Metrics
	hooks        []outbox.WriterHook
	interceptors []outbox.Interceptor
	tracer       trace.Tracer
}

// inTx runs fn in a transaction of a Client's store.
type inTx func(ctx context.Context, fn func(ctx context.Context) error) error

// observedClient starts a Client in ModeHotPathOnly, on a fresh SQLite file
// or (memory) on outboxmem, observed by o, whose listener counts
// deliveries.
func observedClient(b *testing.B, memory bool, o observed, delivered *atomic.Int64) (*outbox.Client, inTx) {
	b.Helper()
	var store outbox.Store
	var txc outbox.TxContext
	var run inTx
	if memory {
		mem := outboxmem.New()
		store, txc, run = mem, mem, mem.InTx
	} else {
		db, err := sql.Open("sqlite", outboxsql.SQLiteDSN(filepath.Join(b.TempDir(), "bench.db")))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		sqlStore, err := outboxsql.Open(db)
		if err != nil {
			b.Fatal(err)
		}
		if err := sqlStore.Migrate(context.Background()); err != nil {
			b.Fatal(err)
		}
		txm := outboxsql.NewTxManager(db)
		store, txc, run = sqlStore, txm, txm.InTx
	}
	c, err := outbox.New(outbox.Config{Store: store, TxContext: txc, Mode: outbox.ModeHotPathOnly, Logger: quiet, DisablePurge: true,
		Metrics: o.metrics, Hooks: o.hooks, Interceptors: o.interceptors})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			b.Error(err)
		}
	})
	if err := c.Handle(outbox.EventName("OrderPlaced"), func(context.Context, outbox.Envelope) error {
		delivered.Add(1)
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return c, run
}

// BenchmarkObservabilityOverhead measures what metrics and tracing cost on
// the hot path end to end (BenchmarkHotPath: a transaction that writes one
// event and commits, the listener runs), on SQLite and, to show the
// framework's own CPU cost without a database, on the in-memory store
// (outboxmem). Each sub-benchmark runs two Clients side by side in this
// process, each on its own store, and alternates between them operation by operation — one plain,
// one observed — so that both see the same machine load; it reports
// plain-ns/op, observed-ns/op and their ratio (observed/plain).
func BenchmarkObservabilityOverhead(b *testing.B) {
	tracing := func(b *testing.B) (outboxotel.Options, trace.Tracer) {
		// A batching processor with an exporter that drops the spans:
		// what an application pays before its spans leave the process.
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return outboxotel.Options{TracerProvider: tp}, tp.Tracer("bench")
	}
	promMetrics := func(b *testing.B) outbox.Metrics {
		m, err := outboxprom.New(outboxprom.Options{Registerer: prometheus.NewRegistry()})
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		setup func(b *testing.B) observed
	}{
		{"prometheus", func(b *testing.B) observed { return observed{metrics: promMetrics(b)} }},
		{"prometheus+tracing", func(b *testing.B) observed {
			opts, tracer := tracing(b)
			return observed{metrics: promMetrics(b), hooks: []outbox.WriterHook{outboxotel.WriterHook(opts)},
				interceptors: []outbox.Interceptor{outboxotel.Interceptor(opts)}, tracer: tracer}
		}},
		{"otel-metrics+tracing", func(b *testing.B) observed {
			opts, tracer := tracing(b)
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			m, err := outboxotel.NewMetrics(mp)
			if err != nil {
				b.Fatal(err)
			}
			return observed{metrics: m, hooks: []outbox.WriterHook{outboxotel.WriterHook(opts)},
				interceptors: []outbox.Interceptor{outboxotel.Interceptor(opts)}, tracer: tracer}
		}},
	} {
		for _, memory := range []bool{false, true} {
			name := "sqlite/" + tc.name
			if memory {
				name = "memory/" + tc.name
			}
			b.Run(name, func(b *testing.B) { overhead(b, memory, tc.setup(b)) })
		}
	}
}

// overhead alternates a plain Client and one observed by o, b.N times.
func overhead(b *testing.B, memory bool, o observed) {
	var plainN, obsN atomic.Int64
	plain, plainTx := observedClient(b, memory, observed{}, &plainN)
	obs, obsTx := observedClient(b, memory, o, &obsN)
	events := make([]outbox.Envelope, 2*b.N)
	for i := range events {
		events[i] = event(b, i, 1)
	}
	var plainTime, obsTime time.Duration
	// Both sides write inside the application's own request span when o
	// traces: what is measured is what the outbox adds to a traced
	// application, not the application's span.
	plainOp := func(i int) {
		start := time.Now()
		ctx := context.Background()
		var span trace.Span
		if o.tracer != nil {
			ctx, span = o.tracer.Start(ctx, "POST /orders")
		}
		if err := plainTx(ctx, func(ctx context.Context) error {
			_, err := plain.Write(ctx, events[2*i])
			return err
		}); err != nil {
			b.Fatal(err)
		}
		if span != nil {
			span.End()
		}
		spin(b, &plainN, int64(i+1))
		plainTime += time.Since(start)
	}
	obsOp := func(i int) {
		start := time.Now()
		ctx := context.Background()
		var span trace.Span
		if o.tracer != nil {
			ctx, span = o.tracer.Start(ctx, "POST /orders")
		}
		if err := obsTx(ctx, func(ctx context.Context) error {
			_, err := obs.Write(ctx, events[2*i+1])
			return err
		}); err != nil {
			b.Fatal(err)
		}
		if span != nil {
			span.End()
		}
		spin(b, &obsN, int64(i+1))
		obsTime += time.Since(start)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		// Either goes first every other time: neither always runs right
		// after the other's background work (acks, span export).
		if i%2 == 0 {
			plainOp(i)
			obsOp(i)
		} else {
			obsOp(i)
			plainOp(i)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(plainTime.Nanoseconds())/float64(b.N), "plain-ns/op")
	b.ReportMetric(float64(obsTime.Nanoseconds())/float64(b.N), "observed-ns/op")
	b.ReportMetric(float64(obsTime)/float64(plainTime), "ratio")
}

// spin waits until delivered reaches n, yielding instead of sleeping: a
// sleep's timer granularity would dwarf the in-memory store's cost.
func spin(b *testing.B, delivered *atomic.Int64, n int64) {
	deadline := time.Now().Add(time.Minute)
	for delivered.Load() < n {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d events delivered after a minute", delivered.Load(), n)
		}
		runtime.Gosched()
	}
}
