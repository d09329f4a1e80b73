package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

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

// e2eObserved runs e2e-hot-observed: pairs of runs, the plain Client and
// the observed one, alternating which goes first, and reports the pair
// whose ratio is the median of the pairs. Not the best of each side, as
// the other scenarios do: the difference measured here (a few percent) is
// smaller than what separates two runs of the same side a minute apart on
// a shared machine, and the best of each side would compare the luckiest
// run of one with the luckiest of the other. The pairs are 2×-rounds+1,
// at least 9 (3 with -short, which only proves the scenario runs): their
// ratios scatter by ±10 % on a shared 2-core machine.
func (e *env) e2eObserved(ctx context.Context, o options, rep *report) error {
	n := max(2*o.rounds+1, 9)
	if o.short {
		n = 3
	}
	pairs := make([][2]run, n)
	for r := range pairs {
		order := []bool{false, true}
		if r%2 == 1 {
			order = []bool{true, false}
		}
		for _, observed := range order {
			obs, err := observe(observed)
			if err != nil {
				return err
			}
			res, err := e.e2eFramework(ctx, o.e2eWriters, o.duration, variant{obs: &obs})
			obs.shutdown()
			if err != nil {
				return fmt.Errorf("e2e-hot-observed (observed=%v): %w", observed, err)
			}
			if observed {
				pairs[r][1] = res
			} else {
				pairs[r][0] = res
			}
		}
	}
	slices.SortFunc(pairs, func(a, b [2]run) int { return cmp.Compare(a[1].rate()/a[0].rate(), b[1].rate()/b[0].rate()) })
	ratios := make([]float64, len(pairs))
	for i, p := range pairs {
		ratios[i] = p[1].rate() / p[0].rate()
	}
	med := pairs[len(pairs)/2]
	med[0].note = strings.TrimPrefix(med[0].note+",plain-framework", ",")
	rep.add(result{db: e.b.name, scenario: fmt.Sprintf("e2e-hot-observed-c%d", o.e2eWriters), conc: o.e2eWriters, fw: med[1], raw: med[0],
		rssKB: peakRSSKB(), ratios: ratios})
	return nil
}
