// Package otel traces and measures the outbox with OpenTelemetry.
//
// Tracing follows an event from the request that wrote it to its
// listener: WriterHook stores the writer's span context in the event's
// headers (W3C traceparent and tracestate), and Interceptor runs each
// delivery in a consumer span whose parent is that span context, with the
// messaging semantic conventions' attributes. The listener gets the span's
// context, so its own spans nest under it:
//
//	tracing := otel.Options{TracerProvider: tp}
//	client, _ := outbox.New(outbox.Config{
//		Store: store, TxContext: txm,
//		Hooks:        []outbox.WriterHook{otel.WriterHook(tracing)},
//		Interceptors: []outbox.Interceptor{otel.Interceptor(tracing)},
//	})
//
// NewMetrics is an outbox.Metrics on an OpenTelemetry MeterProvider, an
// alternative to the metrics/prometheus module: the same counters,
// histograms and backlog gauges, named outbox.*.
package otel
