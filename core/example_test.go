package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// OrderEvent is how an application declares its event types: constants of
// its own string type with a Name method.
type OrderEvent string

func (e OrderEvent) Name() string { return string(e) }

const (
	OrderPlaced    OrderEvent = "OrderPlaced"
	OrderCancelled OrderEvent = "OrderCancelled"
)

// Aggregate names the kinds of entities events are about.
type Aggregate string

func (a Aggregate) Name() string { return string(a) }

const OrderAggregate Aggregate = "Order"

func ExampleNewEnvelope() {
	type placed struct {
		OrderID string `json:"orderId"`
		Total   int    `json:"total"`
	}
	e, err := outbox.NewEnvelope(OrderPlaced,
		outbox.WithAggregate(OrderAggregate, "o-42"),
		outbox.WithHeader("trace-id", "t-1"),
		outbox.WithJSONValue(placed{OrderID: "o-42", Total: 1200}),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, isULID := outbox.ULIDTime(e.ID())
	trace, _ := e.Header("trace-id")
	fmt.Println("id is a ULID:", isULID)
	fmt.Println(e.Type(), e.AggregateType(), e.AggregateID())
	fmt.Println(e.PayloadKind(), e.PayloadString())
	fmt.Println("trace-id:", trace)

	// Without a payload, or with more than one, NewEnvelope fails.
	_, err = outbox.NewEnvelope(OrderCancelled)
	fmt.Println(errors.Is(err, outbox.ErrInvalidEnvelope))

	// Output:
	// id is a ULID: true
	// OrderPlaced Order o-42
	// json {"orderId":"o-42","total":1200}
	// trace-id: t-1
	// true
}

func ExampleRegistry_Register() {
	r := outbox.NewRegistry()
	err := r.Register(OrderAggregate, OrderPlaced, outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		fmt.Println("shipping order", e.AggregateID())
		return nil
	}))
	fmt.Println("register:", err)

	// One listener per (aggregate type, event type).
	err = r.Register(OrderAggregate, OrderPlaced, outbox.ListenerFunc(func(context.Context, outbox.Envelope) error { return nil }))
	fmt.Println("duplicate:", errors.Is(err, outbox.ErrDuplicateListener))

	// Handle is the shorthand for events without an aggregate.
	_ = r.Handle(outbox.EventName("CacheFlushed"), func(context.Context, outbox.Envelope) error { return nil })

	e := outbox.MustEnvelope(OrderPlaced, outbox.WithAggregate(OrderAggregate, "o-7"), outbox.WithJSON([]byte(`{}`)))
	if l := r.ListenerFor(e.AggregateType(), e.Type()); l != nil {
		_ = l.Handle(context.Background(), e)
	}
	fmt.Println("global route:", r.ListenerFor("__GLOBAL__", "CacheFlushed") != nil)
	fmt.Println("unroutable:", r.ListenerFor("Invoice", "OrderPlaced") == nil)

	// Output:
	// register: <nil>
	// duplicate: true
	// shipping order o-7
	// global route: true
	// unroutable: true
}

func ExampleExponentialBackoff() {
	p := &outbox.ExponentialBackoff{Base: 200 * time.Millisecond, Max: 2 * time.Second, NoJitter: true}
	for attempt := 1; attempt <= 6; attempt++ {
		fmt.Println(attempt, p.Delay(attempt))
	}

	// Jitter multiplies by a factor in [0.5, 1.5); inject Rand to make it deterministic.
	low := &outbox.ExponentialBackoff{Rand: func() float64 { return 0 }}
	high := &outbox.ExponentialBackoff{Rand: func() float64 { return 0.75 }}
	fmt.Println(low.Delay(1), high.Delay(1))

	// Output:
	// 1 200ms
	// 2 400ms
	// 3 800ms
	// 4 1.6s
	// 5 2s
	// 6 2s
	// 100ms 250ms
}

func ExampleRetryAfter() {
	// A listener that knows the downstream is busy asks for a later retry
	// without using up one of the event's attempts.
	listener := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		return outbox.RetryAfter(30*time.Second, "rate limited by the payment provider")
	})

	err := listener.Handle(context.Background(), outbox.MustEnvelope(OrderPlaced, outbox.WithJSON([]byte(`{}`))))
	var ra *outbox.RetryAfterError
	if errors.As(err, &ra) {
		fmt.Println("retry in", ra.Delay, "because", ra.Reason)
	}
	fmt.Println(err)

	// Output:
	// retry in 30s because rate limited by the payment provider
	// outbox: retry after 30s: rate limited by the payment provider
}

func ExampleCallbacks() {
	// A TxContext adapter keeps one Callbacks per transaction and runs it
	// when the transaction ends.
	var cb outbox.Callbacks
	cb.AfterCommit(func() { fmt.Println("committed: first") })
	cb.AfterRollback(func() { fmt.Println("rolled back") })
	cb.AfterCommit(func() { fmt.Println("committed: second") })

	cb.RunCommit()
	cb.RunCommit() // callbacks run exactly once
	cb.RunRollback()

	// Output:
	// committed: first
	// committed: second
}
