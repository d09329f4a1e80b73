package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
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

// Example is the quick start: a Client on an in-memory outbox, one
// listener, one event written in a transaction and delivered right after
// the commit. In production the Store and the TxContext come from package
// outboxsql (or an adapter) instead of outboxmem.
func Example() {
	ctx := context.Background()
	store := outboxmem.New()
	client, err := outbox.New(outbox.Config{Store: store, TxContext: store})
	if err != nil {
		fmt.Println(err)
		return
	}

	shipped := make(chan string, 1)
	err = client.Handle(OrderPlaced, func(ctx context.Context, e outbox.Envelope) error {
		var order struct {
			Total int `json:"total"`
		}
		if err := e.DecodeJSON(&order); err != nil {
			return err
		}
		shipped <- fmt.Sprintf("%s %s, total %d", e.Type(), e.AggregateID(), order.Total)
		return nil // deduplicate by e.ID(): an event can be delivered more than once
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := client.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}

	var id string
	err = store.InTx(ctx, func(ctx context.Context) error {
		// ... the business writes of the same transaction go here ...
		ids, err := client.Write(ctx, outbox.MustEnvelope(OrderPlaced,
			outbox.WithAggregate(OrderAggregate, "o-42"),
			outbox.WithJSONValue(map[string]int{"total": 1200})))
		if err == nil {
			id = ids[0]
		}
		return err
	})
	fmt.Println("committed:", err)

	select {
	case s := <-shipped:
		fmt.Println("delivered:", s)
	case <-time.After(10 * time.Second):
		fmt.Println("not delivered")
	}
	fmt.Println("closed:", client.Close(ctx))
	r, err := client.Get(ctx, id)
	fmt.Println("status:", r.Status, err)

	// Output:
	// committed: <nil>
	// delivered: OrderPlaced o-42, total 1200
	// closed: <nil>
	// status: DONE <nil>
}

func ExampleClient_Handle() {
	ctx := context.Background()
	store := outboxmem.New()
	client, err := outbox.New(outbox.Config{Store: store, TxContext: store})
	if err != nil {
		fmt.Println(err)
		return
	}

	var mu sync.Mutex
	var got []string
	received := make(chan struct{}, 3)
	record := func(listener string, e outbox.Envelope) {
		mu.Lock()
		got = append(got, fmt.Sprintf("%s <- %s %s", listener, e.AggregateType(), e.AggregateID()))
		mu.Unlock()
		received <- struct{}{}
	}

	// Handle takes an event type on any aggregate: the common case.
	_ = client.Handle(OrderPlaced, func(ctx context.Context, e outbox.Envelope) error {
		record("billing", e)
		return nil
	})
	// Register takes one (aggregate type, event type) pair and wins over Handle.
	_ = client.Register(Aggregate("Invoice"), OrderPlaced, outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		record("invoicing", e)
		return nil
	}))
	// One listener per route.
	err = client.Handle(OrderPlaced, func(context.Context, outbox.Envelope) error { return nil })
	fmt.Println("second Handle:", errors.Is(err, outbox.ErrDuplicateListener))

	if err := client.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close(ctx)
	err = store.InTx(ctx, func(ctx context.Context) error {
		_, err := client.Write(ctx,
			outbox.MustEnvelope(OrderPlaced, outbox.WithAggregate(OrderAggregate, "o-1"), outbox.WithJSON([]byte(`{}`))),
			outbox.MustEnvelope(OrderPlaced, outbox.WithAggregate(Aggregate("Invoice"), "i-1"), outbox.WithJSON([]byte(`{}`))),
			outbox.MustEnvelope(OrderPlaced, outbox.WithAggregate(Aggregate("Cart"), "c-1"), outbox.WithJSON([]byte(`{}`))))
		return err
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 3 {
		<-received
	}
	mu.Lock()
	slices.Sort(got) // listeners run concurrently
	for _, line := range got {
		fmt.Println(line)
	}
	mu.Unlock()

	// Output:
	// second Handle: true
	// billing <- Cart c-1
	// billing <- Order o-1
	// invoicing <- Invoice i-1
}

// ExampleClient_Dead shows an event that fails every delivery: after
// MaxAttempts it is DEAD, where it can be listed and, once the cause is
// fixed, replayed.
func ExampleClient_Dead() {
	ctx := context.Background()
	store := outboxmem.New()
	client, err := outbox.New(outbox.Config{
		Store: store, TxContext: store,
		MaxAttempts:  2,
		RetryPolicy:  &outbox.ExponentialBackoff{Base: time.Millisecond, Max: time.Millisecond, NoJitter: true},
		PollInterval: 5 * time.Millisecond,
		Logger:       slog.New(slog.DiscardHandler), // the failures are expected here
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	var fixed atomic.Bool
	delivered := make(chan string, 1)
	_ = client.Handle(OrderPlaced, func(ctx context.Context, e outbox.Envelope) error {
		if !fixed.Load() {
			return errors.New("payment service unavailable")
		}
		delivered <- e.ID()
		return nil
	})
	if err := client.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	// waitFor polls the event's state, the way a test would.
	waitFor := func(id string, status outbox.Status) {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if r, err := client.Get(ctx, id); err == nil && r.Status == status {
				return
			}
		}
		fmt.Println("timed out waiting for", status)
	}

	e := outbox.MustEnvelope(OrderPlaced, outbox.WithAggregate(OrderAggregate, "o-7"), outbox.WithJSON([]byte(`{}`)))
	err = store.InTx(ctx, func(ctx context.Context) error {
		_, err := client.Write(ctx, e)
		return err
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	waitFor(e.ID(), outbox.StatusDead)

	dead, err := client.Dead().List(ctx, outbox.Query{AggregateType: "Order"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range dead {
		fmt.Printf("%s %s after %d attempts: %s\n", r.Envelope.AggregateID(), r.Status, r.Attempts, r.LastError)
	}

	fixed.Store(true)
	fmt.Println("replay:", client.Dead().Replay(ctx, e.ID()))
	fmt.Println("delivered again:", <-delivered == e.ID())
	waitFor(e.ID(), outbox.StatusDone)
	n, _ := client.Dead().Count(ctx, outbox.Query{})
	fmt.Println("dead events left:", n)
	fmt.Println("closed:", client.Close(ctx))

	// Output:
	// o-7 DEAD after 2 attempts: payment service unavailable
	// replay: <nil>
	// delivered again: true
	// dead events left: 0
	// closed: <nil>
}

// ExampleClient_Subscribe fans an event out to three subscribers: each
// gets it, and one that fails retries alone — the others are done with it.
func ExampleClient_Subscribe() {
	ctx := context.Background()
	store := outboxmem.New()
	client, err := outbox.New(outbox.Config{
		Store: store, TxContext: store,
		RetryPolicy:  &outbox.ExponentialBackoff{Base: time.Millisecond, Max: time.Millisecond, NoJitter: true},
		PollInterval: 5 * time.Millisecond,
		Logger:       slog.New(slog.DiscardHandler), // the failure is expected here
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	var (
		mu    sync.Mutex
		calls = map[string]int{}
	)
	done := make(chan struct{})
	subscriber := func(name string) outbox.ListenerFunc {
		return func(ctx context.Context, e outbox.Envelope) error {
			mu.Lock()
			defer mu.Unlock()
			calls[name]++
			if name == "mail" && calls[name] == 1 {
				return errors.New("mail server busy")
			}
			if name == "mail" {
				close(done)
			}
			return nil
		}
	}
	for _, name := range []string{"billing", "mail", "stock"} {
		if err := client.Subscribe(name, OrderPlaced, subscriber(name)); err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := client.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	e := outbox.MustEnvelope(OrderPlaced, outbox.WithAggregate(OrderAggregate, "o-8"), outbox.WithJSON([]byte(`{}`)))
	err = store.InTx(ctx, func(ctx context.Context) error {
		_, err := client.Write(ctx, e)
		return err
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	<-done
	fmt.Println("closed:", client.Close(ctx))
	r, _ := client.Get(ctx, e.ID())
	fmt.Println(r.Status, "after", r.Attempts, "failed attempt; last owed:", r.Subscribers)
	mu.Lock()
	fmt.Println("billing:", calls["billing"], "mail:", calls["mail"], "stock:", calls["stock"])
	mu.Unlock()

	// Output:
	// closed: <nil>
	// DONE after 1 failed attempt; last owed: [mail]
	// billing: 1 mail: 2 stock: 1
}

// ExampleNew_writerOnly splits the outbox over two processes sharing one
// table: a web process that only writes, and a worker that delivers what
// its poller claims.
func ExampleNew_writerOnly() {
	ctx := context.Background()
	store := outboxmem.New() // the shared table

	web, err := outbox.New(outbox.Config{Store: store, TxContext: store, Mode: outbox.ModeWriterOnly})
	if err != nil {
		fmt.Println(err)
		return
	}
	worker, err := outbox.New(outbox.Config{Store: store, Mode: outbox.ModePollerOnly, PollInterval: 5 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	delivered := make(chan string, 1)
	_ = worker.Handle(OrderPlaced, func(ctx context.Context, e outbox.Envelope) error {
		delivered <- e.ID()
		return nil
	})

	var ids []string
	err = store.InTx(ctx, func(ctx context.Context) (err error) {
		ids, err = web.Write(ctx, outbox.MustEnvelope(OrderPlaced, outbox.WithJSON([]byte(`{}`))))
		return err
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	r, _ := web.Get(ctx, ids[0])
	fmt.Println("written:", r.Status, "claimed:", r.LockedBy != "")

	// Without a TxContext the worker cannot write.
	_, err = worker.Write(ctx, outbox.MustEnvelope(OrderPlaced, outbox.WithJSON([]byte(`{}`))))
	fmt.Println("worker writes:", errors.Is(err, outbox.ErrInvalidConfig))

	if err := worker.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("delivered by the worker:", <-delivered == ids[0])
	fmt.Println("closed:", worker.Close(ctx), web.Close(ctx))
	r, _ = web.Get(ctx, ids[0])
	fmt.Println("status:", r.Status)

	// Output:
	// written: NEW claimed: false
	// worker writes: true
	// delivered by the worker: true
	// closed: <nil> <nil>
	// status: DONE
}

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

// ExamplePermanent sends an event its consumer can never accept to DEAD
// at once: the listener marks its error as permanent, and the event is
// not retried (MaxAttempts is 10 here).
func ExamplePermanent() {
	ctx := context.Background()
	store := outboxmem.New()
	client, err := outbox.New(outbox.Config{
		Store: store, TxContext: store, MaxAttempts: 10,
		Logger: slog.New(slog.DiscardHandler), // the failure is expected here
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = client.Handle(OrderPlaced, func(ctx context.Context, e outbox.Envelope) error {
		var order struct{ Total int }
		if err := e.DecodeJSON(&order); err != nil || order.Total < 0 {
			return outbox.Permanent(fmt.Errorf("order %s: invalid total %d", e.AggregateID(), order.Total))
		}
		return nil
	})
	if err := client.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	e := outbox.MustEnvelope(OrderPlaced, outbox.WithAggregate(OrderAggregate, "o-9"), outbox.WithJSON([]byte(`{"Total":-5}`)))
	if err := store.InTx(ctx, func(ctx context.Context) error { _, err := client.Write(ctx, e); return err }); err != nil {
		fmt.Println(err)
		return
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if r, err := client.Get(ctx, e.ID()); err == nil && r.Status == outbox.StatusDead {
			fmt.Printf("%s after %d attempt: %s\n", r.Status, r.Attempts, r.LastError)
			break
		}
	}
	fmt.Println(errors.Is(outbox.Permanent(errors.New("x")), outbox.ErrPermanent))
	fmt.Println("closed:", client.Close(ctx))

	// Output:
	// DEAD after 1 attempt: order o-9: invalid total -5
	// true
	// closed: <nil>
}

// ExampleConfig_ordered delivers the events of one order in the order they
// were written, while different orders go on in parallel. The first
// delivery of OrderPlaced fails: OrderCancelled of the same order waits for
// its retry.
func ExampleConfig_ordered() {
	ctx := context.Background()
	store := outboxmem.New()
	client, err := outbox.New(outbox.Config{Store: store, TxContext: store, Ordered: true,
		PollInterval: 10 * time.Millisecond, RetryPolicy: &outbox.ExponentialBackoff{Base: time.Millisecond, NoJitter: true}})
	if err != nil {
		fmt.Println(err)
		return
	}
	var mu sync.Mutex
	var seen []string
	var failed atomic.Bool
	done := make(chan struct{})
	listener := func(ctx context.Context, e outbox.Envelope) error {
		if e.Type() == OrderPlaced.Name() && !failed.Swap(true) {
			return errors.New("broker unavailable") // retried; the order's next event waits
		}
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, e.OrderingKey()+" "+e.Type())
		if len(seen) == 2 {
			close(done)
		}
		return nil
	}
	for _, et := range []outbox.EventType{OrderPlaced, OrderCancelled} {
		if err := client.Handle(et, listener); err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := client.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close(ctx)

	err = store.InTx(ctx, func(ctx context.Context) error {
		placed := outbox.MustEnvelope(OrderPlaced, outbox.WithAggregate(OrderAggregate, "o-1"), outbox.WithJSON([]byte(`{}`)))
		cancelled := outbox.MustEnvelope(OrderCancelled, outbox.WithAggregate(OrderAggregate, "o-1"), outbox.WithJSON([]byte(`{}`)))
		_, err := client.Write(ctx, placed, cancelled)
		return err
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	<-done
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		fmt.Println(s)
	}
	// Output:
	// Order/o-1 OrderPlaced
	// Order/o-1 OrderCancelled
}
