package outboxotel_test

import (
	"context"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	outboxotel "github.com/go-outbox/outbox/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkTracingPerEvent is the CPU cost tracing adds to one event,
// without a database or a scheduler in the way: the WriterHook stamping it
// at Write, and the Interceptor running its delivery in a span (exported
// through a batcher to an exporter that drops it).
func BenchmarkTracingPerEvent(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	opts := outboxotel.Options{TracerProvider: tp}
	hook, ic := outboxotel.WriterHook(opts), outboxotel.Interceptor(opts)
	ctx, span := tp.Tracer("bench").Start(context.Background(), "request")
	defer span.End()
	events := []outbox.Envelope{event("OrderPlaced")}
	next := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		stamped, err := hook.BeforeWrite(ctx, events)
		if err != nil {
			b.Fatal(err)
		}
		if err := ic.Around(context.Background(), stamped[0], next); err != nil {
			b.Fatal(err)
		}
	}
}

// placed labels the benchmarks' event.
var placed = outbox.EventLabels{Type: "OrderPlaced"}

// BenchmarkMetricsPerEvent is the CPU cost of the OpenTelemetry Metrics
// calls one event makes on the hot path: written, enqueued, latency,
// duration, delivered, and its share of an ack batch.
func BenchmarkMetricsPerEvent(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	m, err := outboxotel.NewMetrics(mp)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		m.EventsWritten(placed, 1)
		m.EventEnqueued(placed, outbox.PathHot)
		m.CommitToDelivery(placed, 3*time.Millisecond)
		m.ListenerDuration(placed, time.Millisecond)
		m.Delivered(placed)
		m.AckBatch(1)
	}
}
