package main

import (
	"context"
	"fmt"

	outbox "github.com/go-outbox/outbox/core"
	outboxprom "github.com/go-outbox/outbox/metrics/prometheus"
	outboxotel "github.com/go-outbox/outbox/otel"
	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// The scenario of observability, what metrics and tracing cost:
//
//   - e2e-hot-observed: e2e-hot through a Client with Prometheus metrics
//     (metrics/prometheus) and OpenTelemetry tracing (otel: the WriterHook
//     stamps each event with the writer's span, the Interceptor runs each
//     delivery in a span), against the same Client plain. Both sides write
//     inside an application span per transaction ("POST /orders", as a
//     traced service does), with a batching span processor whose exporter
//     drops the spans: what is compared is what the outbox's observability
//     adds to a traced application, before its spans leave the process.

// observation is how a side of e2e-hot-observed observes its Client.
type observation struct {
	tracer       trace.Tracer // the application's request span
	metrics      outbox.Metrics
	hooks        []outbox.WriterHook
	interceptors []outbox.Interceptor
	shutdown     func()
}

// observe returns the observation of a side: the application's tracer
// only, or (observed) the outbox's metrics and tracing too.
func observe(observed bool) (observation, error) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	o := observation{tracer: tp.Tracer("outbox-bench"), shutdown: func() { _ = tp.Shutdown(context.Background()) }}
	if !observed {
		return o, nil
	}
	m, err := outboxprom.New(outboxprom.Options{Registerer: prometheus.NewRegistry()})
	if err != nil {
		o.shutdown()
		return o, err
	}
	opts := outboxotel.Options{TracerProvider: tp}
	o.metrics = m
	o.hooks = []outbox.WriterHook{outboxotel.WriterHook(opts)}
	o.interceptors = []outbox.Interceptor{outboxotel.Interceptor(opts)}
	return o, nil
}

// observedPairs is the number of pairs of e2e-hot-observed.
func (o options) observedPairs() int {
	if o.short {
		return 3
	}
	return max(o.pairs, 25)
}

// e2eObserved runs e2e-hot-observed: pairs of the observed Client and the
// plain one, the median pair reported (see pairs.go). The difference
// measured here is a few percent and the pairs' ratios scatter by ±10 % on
// a shared 2-core machine, so there are at least 25 pairs (with 9, the
// median moved by up to 0.19 from one run to the next; 3 with -short,
// which only proves the scenario runs).
func (e *env) e2eObserved(ctx context.Context, o options, rep *report) error {
	return rep.addPairs(e.b.name, fmt.Sprintf("e2e-hot-observed-c%d", o.e2eWriters), o.e2eWriters, o.observedPairs(), "observed", []string{"plain"}, "plain-framework",
		func(side string) (run, error) {
			obs, err := observe(side == "observed")
			if err != nil {
				return run{}, err
			}
			defer obs.shutdown()
			return e.e2eFramework(ctx, o.e2eWriters, o.duration, variant{obs: &obs})
		})
}
