package main

import (
	"context"
	"fmt"
	"io"
	"net/http"

	outboxprom "github.com/go-outbox/outbox/metrics/prometheus"
	outboxotel "github.com/go-outbox/outbox/otel"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/fx"
)

// Observability is the service's metrics registry and tracer: the
// outbox's Prometheus collector for the default data source, served on
// GET /metrics, and, when traces are on, spans of every request and of
// every delivery (its parent the request that wrote the event) printed as
// JSON by the OpenTelemetry stdout exporter.
type Observability struct {
	registry *prometheus.Registry
	metrics  *outboxprom.Metrics
	tp       trace.TracerProvider
	sdk      *sdktrace.TracerProvider // nil when traces are off
	tracing  outboxotel.Options
}

// newObservability builds the registry and, if traces is not nil, a tracer
// provider that prints spans to it.
func newObservability(traces io.Writer) (*Observability, error) {
	o := &Observability{registry: prometheus.NewRegistry(), tp: noop.NewTracerProvider()}
	o.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var err error
	if o.metrics, err = outboxprom.New(outboxprom.Options{Registerer: o.registry}); err != nil {
		return nil, err
	}
	if traces != nil {
		exp, err := stdouttrace.New(stdouttrace.WithWriter(traces), stdouttrace.WithPrettyPrint())
		if err != nil {
			return nil, fmt.Errorf("trace exporter: %w", err)
		}
		// Synchronous: each span is printed as it ends (a demo, not a
		// production setting, where a batcher belongs).
		o.sdk = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		o.tp = o.sdk
	}
	o.tracing = outboxotel.Options{TracerProvider: o.tp}
	return o, nil
}

// lifecycle flushes and stops the tracer provider when the app stops. It is
// invoked before the outbox is built, so its stop hook runs after the
// Client's: the spans of the last deliveries are printed.
func (o *Observability) lifecycle() fx.Option {
	return fx.Invoke(func(lc fx.Lifecycle) {
		lc.Append(fx.StopHook(func(ctx context.Context) error {
			if o.sdk == nil {
				return nil
			}
			return o.sdk.Shutdown(ctx)
		}))
	})
}

// metricsHandler serves the registry in the Prometheus text format.
func (o *Observability) metricsHandler() http.Handler {
	return promhttp.HandlerFor(o.registry, promhttp.HandlerOpts{Registry: o.registry})
}

// traceRequests runs each request in a server span; the outbox events it
// writes carry the span's context to their listener.
func (o *Observability) traceRequests(next http.Handler) http.Handler {
	tracer := o.tp.Tracer("http-demo")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := tracer.Start(r.Context(), r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
		defer span.End()
		rec := &statusRecorder{ResponseWriter: w}
		r = r.WithContext(ctx)
		next.ServeHTTP(rec, r)
		if r.Pattern != "" {
			span.SetName(r.Pattern) // "POST /orders": the route, not the path
			span.SetAttributes(attribute.String("http.route", r.Pattern))
		}
		span.SetAttributes(attribute.Int("http.response.status_code", rec.status))
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		if rec.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(rec.status))
		}
	})
}
