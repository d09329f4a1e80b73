package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

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
// GET /metrics, and, when traces are on, spans of the requests (not the
// routine ones: untraced) and of every delivery (its parent the request
// that wrote the event) printed as JSON by the OpenTelemetry stdout
// exporter.
type Observability struct {
	registry *prometheus.Registry
	metrics  *outboxprom.Metrics
	tp       trace.TracerProvider
	sdk      *sdktrace.TracerProvider // nil when traces are off
	tracing  outboxotel.Options
}

// traceOutput reads the -trace setting: "" or "off" (no tracing), "stdout"
// (a JSON line per span on stdout) or "pretty" (indented JSON).
func traceOutput(mode string, stdout io.Writer) (w io.Writer, pretty bool, err error) {
	switch strings.ToLower(strings.TrimSpace(mode)) {
	case "", "off":
		return nil, false, nil
	case "stdout":
		return stdout, false, nil
	case "pretty":
		return stdout, true, nil
	}
	return nil, false, fmt.Errorf("%q: want off, stdout or pretty", mode)
}

// routine reports whether r is a request of the service's upkeep — a
// health check, a metrics scrape, the admin page or one of its files —
// which is neither traced nor logged above debug level: a scraper and a
// prober send one every few seconds.
func routine(r *http.Request) bool {
	switch p := r.URL.Path; {
	case p == "/livez" || p == "/readyz" || p == "/metrics" || p == "/favicon.ico":
		return true
	case p == "/admin/" || p == "/admin" || strings.HasPrefix(p, "/admin/assets/"):
		return r.Method == http.MethodGet || r.Method == http.MethodHead
	}
	return false
}

// newObservability builds the registry and, if traces is not nil, a tracer
// provider that prints spans to it, indented if pretty.
func newObservability(traces io.Writer, pretty bool) (*Observability, error) {
	o := &Observability{registry: prometheus.NewRegistry(), tp: noop.NewTracerProvider()}
	o.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var err error
	if o.metrics, err = outboxprom.New(outboxprom.Options{Registerer: o.registry}); err != nil {
		return nil, err
	}
	if traces != nil {
		opts := []stdouttrace.Option{stdouttrace.WithWriter(traces)}
		if pretty {
			opts = append(opts, stdouttrace.WithPrettyPrint())
		}
		exp, err := stdouttrace.New(opts...)
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

// traceRequests runs each request but the routine ones in a server span;
// the outbox events it writes carry the span's context to their listener.
func (o *Observability) traceRequests(next http.Handler) http.Handler {
	tracer := o.tp.Tracer("http-demo")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.sdk == nil || routine(r) {
			next.ServeHTTP(w, r)
			return
		}
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
