package outboxotel_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
	outboxotel "github.com/go-outbox/outbox/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A delivery continues the trace of the request that wrote its event.
func ExampleInterceptor() {
	ctx := context.Background()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(ctx) }()

	tracing := outboxotel.Options{TracerProvider: tp}
	store := outboxmem.New() // outboxsql.Open(db) in a real application
	client, _ := outbox.New(outbox.Config{
		Store: store, TxContext: store, Logger: slog.New(slog.DiscardHandler),
		Hooks:        []outbox.WriterHook{outboxotel.WriterHook(tracing)},
		Interceptors: []outbox.Interceptor{outboxotel.Interceptor(tracing)},
	})
	_ = client.Handle(outbox.EventName("OrderPlaced"), func(ctx context.Context, e outbox.Envelope) error { return nil })
	_ = client.Start(ctx)
	defer client.Close(ctx)

	reqCtx, request := tp.Tracer("app").Start(ctx, "POST /orders")
	_ = store.InTx(reqCtx, func(ctx context.Context) error {
		_, err := client.Write(ctx, outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithJSON([]byte(`{}`))))
		return err
	})
	request.End()

	for range 1000 {
		for _, s := range spans.Ended() {
			if s.Name() == "process OrderPlaced" {
				fmt.Println(s.Name(), "is a child of the request:", s.Parent().SpanID() == request.SpanContext().SpanID())
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Output: process OrderPlaced is a child of the request: true
}

// The outbox's metrics on an OpenTelemetry MeterProvider.
func ExampleNewMetrics() {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	metrics, err := outboxotel.NewMetrics(mp, outboxotel.MetricsOptions{DataSource: "orders"})
	if err != nil {
		panic(err)
	}
	store := outboxmem.New()
	_, err = outbox.New(outbox.Config{Store: store, TxContext: store, Metrics: metrics})
	fmt.Println(err)
	// Output: <nil>
}
