package relaytest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
	"github.com/go-outbox/outbox/core/relay"
)

// Bench describes the benchmarks of one sink for RunBench.
type Bench struct {
	// NewSink returns a sink on topics of its own and the topic mapping it
	// was built with.
	NewSink func(b *testing.B) (outbox.Listener, relay.Topic)
	// Raw is the baseline: it publishes the messages Broker.Message
	// makes of events with topic, with the sink's broker client and the
	// same acknowledgement guarantee, collecting the acknowledgements
	// asynchronously, and returns once every one is in (or the first
	// error).
	Raw func(b *testing.B, events []outbox.Envelope, topic relay.Topic) error
	// Concurrency is how many events the sink publishes at a time: the
	// goroutines calling Handle, the Client's Workers (default 64).
	Concurrency int
}

// RunBench runs four sub-benchmarks of b.N events each and reports
// events/s: "raw" (Bench.Raw), "sink" (Handle from Concurrency
// goroutines), "relay" (a backlog of b.N events in an outbox Client on
// outboxmem with Concurrency workers and claims of 500, relayed through
// HandleAll one event at a time, ListenerBatchSize 1; the time ends when
// the broker has acknowledged every event) and "relay-batch" (the same
// with the default ListenerBatchSize: the sink's HandleBatch).
func RunBench(b *testing.B, bench Bench) {
	if bench.Concurrency <= 0 {
		bench.Concurrency = 64
	}
	b.Run("raw", func(b *testing.B) {
		_, topic := bench.NewSink(b)
		events := benchEvents(b, b.N)
		b.ResetTimer()
		if err := bench.Raw(b, events, topic); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		report(b)
	})
	b.Run("sink", func(b *testing.B) {
		sink, _ := bench.NewSink(b)
		events := benchEvents(b, b.N)
		next := make(chan outbox.Envelope, len(events))
		for _, e := range events {
			next <- e
		}
		close(next)
		errs := make(chan error, bench.Concurrency)
		var wg sync.WaitGroup
		b.ResetTimer()
		for range bench.Concurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for e := range next {
					if err := sink.Handle(context.Background(), e); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		b.StopTimer()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		report(b)
	})
	b.Run("relay", func(b *testing.B) { benchRelay(b, bench, 1) })
	b.Run("relay-batch", func(b *testing.B) { benchRelay(b, bench, 0) })
}

// benchRelay relays a backlog of b.N events through an outbox Client and
// the sink, with the Client's ListenerBatchSize set to batchSize (0: the
// default; 1: one event at a time, through Handle).
func benchRelay(b *testing.B, bench Bench, batchSize int) {
	sink, _ := bench.NewSink(b)
	if _, ok := sink.(outbox.BatchListener); !ok && batchSize != 1 {
		b.Skip("the sink is not an outbox.BatchListener")
	}
	store := outboxmem.New()
	client, err := outbox.New(outbox.Config{
		Store: store, TxContext: store, Workers: bench.Concurrency, PollInterval: 10 * time.Millisecond, PollBatchSize: 500,
		ListenerBatchSize: batchSize, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	// Counts the events the broker acknowledged: their DONE follows
	// within the Client's ack interval.
	counted := &counter{sink: sink, n: int64(b.N), all: make(chan struct{})}
	if err := client.HandleAll(counted); err != nil {
		b.Fatal(err)
	}
	// Written before Start: a backlog the poller claims.
	for batch := range slices.Chunk(benchEvents(b, b.N), 500) {
		err := store.InTx(context.Background(), func(ctx context.Context) error {
			_, err := client.Write(ctx, batch...)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	if err := client.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	select {
	case <-counted.all:
	case <-time.After(10 * time.Minute):
		b.Fatalf("%d of %d events relayed after 10 minutes", counted.relayed.Load(), b.N)
	}
	b.StopTimer()
	if err := client.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	report(b)
}

// report reports the events/s of a sub-benchmark of b.N events.
func report(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// counter is a BatchListener that passes events on to sink and closes
// all once sink has delivered n of them.
type counter struct {
	sink    outbox.Listener
	n       int64
	relayed atomic.Int64
	all     chan struct{}
	once    sync.Once
}

func (c *counter) add(k int) {
	if c.relayed.Add(int64(k)) >= c.n {
		c.once.Do(func() { close(c.all) })
	}
}

func (c *counter) Handle(ctx context.Context, e outbox.Envelope) error {
	err := c.sink.Handle(ctx, e)
	if err == nil {
		c.add(1)
	}
	return err
}

func (c *counter) HandleBatch(ctx context.Context, events []outbox.Envelope) []error {
	errs := c.sink.(outbox.BatchListener).HandleBatch(ctx, events)
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		}
	}
	c.add(ok)
	return errs
}

// benchEvents returns n small JSON events on 64 aggregates.
func benchEvents(b *testing.B, n int) []outbox.Envelope {
	b.Helper()
	types := EventTypes()
	events := make([]outbox.Envelope, n)
	for i := range events {
		e, err := outbox.NewEnvelope(outbox.EventName(types[i%len(types)]),
			outbox.WithAggregate(outbox.AggregateName("Order"), fmt.Sprintf("o-%d", i%64)),
			outbox.WithHeader("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
			outbox.WithJSON(fmt.Appendf(nil, `{"n":%d,"total":1200}`, i)))
		if err != nil {
			b.Fatal(err)
		}
		events[i] = e
	}
	return events
}
