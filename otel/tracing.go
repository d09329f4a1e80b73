package outboxotel

import (
	"context"
	"errors"
	"fmt"

	outbox "github.com/go-outbox/outbox/core"
	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/go-outbox/outbox/otel"

// System is the messaging.system attribute of the delivery spans.
const System = "outbox"

// Options configures the writer hook and the interceptor.
type Options struct {
	// TracerProvider starts the delivery spans (default the global one,
	// otel.GetTracerProvider()).
	TracerProvider trace.TracerProvider
	// Propagator writes the writer's span context into the event's headers
	// and reads it back at delivery (default propagation.TraceContext{}:
	// the W3C traceparent and tracestate headers).
	Propagator propagation.TextMapPropagator
}

func (o Options) propagator() propagation.TextMapPropagator {
	if o.Propagator == nil {
		return propagation.TraceContext{}
	}
	return o.Propagator
}

// WriterHook returns a WriterHook that stamps every event written with the
// span context of the writer's ctx (the span of the request or command
// that writes it), as the Propagator's headers: traceparent and
// tracestate by default. Events written without a span in ctx, and
// headers an event already has (a relayed trace context), are left as
// they are. Put it in Config.Hooks; it serves Write and WriteFrom alike.
func WriterHook(opts Options) outbox.WriterHook {
	return &writerHook{prop: opts.propagator()}
}

type writerHook struct {
	outbox.NopHook
	prop propagation.TextMapPropagator
}

// BeforeWrite adds the trace headers to the events.
func (h *writerHook) BeforeWrite(ctx context.Context, events []outbox.Envelope) ([]outbox.Envelope, error) {
	carrier := propagation.MapCarrier{}
	h.prop.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return events, nil
	}
	out := make([]outbox.Envelope, len(events))
	for i, e := range events {
		var err error
		if out[i], err = e.WithAddedHeaders(carrier, false); err != nil {
			return nil, fmt.Errorf("outbox otel: trace headers: %w", err)
		}
	}
	return out, nil
}

// EnvelopeOptions returns a function that gives the header options of
// the span context in ctx (none without a span), for Config.EnvelopeOptions
// (WriteFrom) or for code that builds its envelopes itself where it
// cannot add a WriterHook:
//
//	e, err := outbox.NewEnvelope(orderPlaced, append(opts, traceHeaders(ctx)...)...)
//
// Unlike WriterHook, it replaces no header an option given after it sets.
func EnvelopeOptions(opts Options) func(ctx context.Context) []outbox.EnvelopeOption {
	prop := opts.propagator()
	return func(ctx context.Context) []outbox.EnvelopeOption {
		carrier := propagation.MapCarrier{}
		prop.Inject(ctx, carrier)
		if len(carrier) == 0 {
			return nil
		}
		return []outbox.EnvelopeOption{outbox.WithHeaders(carrier)}
	}
}

// Interceptor returns an Interceptor that runs each delivery in a
// consumer span named "process <event type>". Its parent is the span
// context the WriterHook stored in the event's headers: a delivery is the
// continuation of the operation that wrote the event — the same trace,
// however long after the commit it runs (a retry an hour later included) —
// so the listener's own spans (its queries, its calls) show up under the
// request that caused them. A span link would suit a consumer that handles
// many producers' messages in one operation; here each delivery has
// exactly one cause. An event without trace headers starts a new trace.
//
// The span has the messaging semantic conventions' attributes:
// messaging.system "outbox", messaging.operation.name and .type
// "process", messaging.message.id (the event id),
// messaging.destination.name (the event type), and outbox.aggregate.type,
// outbox.aggregate.id and outbox.delivery.attempt. A failed delivery sets
// the span's status to Error and records the error; a RetryAfter records
// an event and leaves the status unset. The listener receives the span's
// context. Put it in Config.Interceptors.
func Interceptor(opts Options) outbox.Interceptor {
	tp := opts.TracerProvider
	if tp == nil {
		tp = gotel.GetTracerProvider()
	}
	tracer := tp.Tracer(ScopeName)
	prop := opts.propagator()
	return outbox.Interceptor{Around: func(ctx context.Context, e outbox.Envelope, next func(context.Context) error) error {
		start := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
			attribute.String("messaging.system", System),
			attribute.String("messaging.operation.name", "process"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.message.id", e.ID()),
			attribute.String("messaging.destination.name", e.Type()),
			attribute.String("outbox.aggregate.type", e.AggregateType()),
			attribute.String("outbox.aggregate.id", e.AggregateID()),
			attribute.Int("outbox.delivery.attempt", outbox.DeliveryAttempt(ctx)),
		)}
		// Only the event's headers decide the parent: not a span the
		// Client's Start context may carry.
		if sc := trace.SpanContextFromContext(prop.Extract(context.Background(), headerCarrier{e})); sc.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		} else {
			start = append(start, trace.WithNewRoot())
		}
		ctx, span := tracer.Start(ctx, "process "+e.Type(), start...)
		defer span.End()
		err := next(ctx)
		var ra *outbox.RetryAfterError
		switch {
		case err == nil:
		case errors.As(err, &ra):
			span.AddEvent("retry requested", trace.WithAttributes(attribute.String("outbox.retry_after", ra.Delay.String())))
		default:
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		return err
	}}
}

// headerCarrier reads an event's headers for a propagator.
type headerCarrier struct{ e outbox.Envelope }

func (c headerCarrier) Get(key string) string {
	v, _ := c.e.Header(key)
	return v
}

func (headerCarrier) Set(string, string) {}

func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, c.e.NumHeaders())
	c.e.RangeHeaders(func(k, _ string) { keys = append(keys, k) })
	return keys
}
