// Package outboxotel traces and measures the outbox with OpenTelemetry.
//
// Tracing follows an event from the request that wrote it to its
// listener: WriterHook stores the writer's span context in the event's
// headers (W3C traceparent and tracestate), and Interceptor runs each
// delivery in a consumer span whose parent is that span context, with the
// messaging semantic conventions' attributes. The listener gets the span's
// context, so its own spans nest under it:
//
//	tracing := outboxotel.Options{TracerProvider: tp}
//	client, _ := outbox.New(outbox.Config{
//		Store: store, TxContext: txm,
//		Hooks:        []outbox.WriterHook{outboxotel.WriterHook(tracing)},
//		Interceptors: []outbox.Interceptor{outboxotel.Interceptor(tracing)},
//	})
//
// NewMetrics is an outbox.Metrics on an OpenTelemetry MeterProvider, an
// alternative to the metrics/prometheus module: the same counters,
// histograms and backlog gauges, named outbox.*.
//
// The package is named outboxotel, not otel, so that it never shadows
// go.opentelemetry.io/otel in the files that import both; its module path
// stays github.com/go-outbox/outbox/otel:
//
//	import outboxotel "github.com/go-outbox/outbox/otel"
package outboxotel
