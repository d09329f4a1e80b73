package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/relay"
	outboxamqp "github.com/go-outbox/outbox/sinks/amqp"
	outboxnats "github.com/go-outbox/outbox/sinks/nats"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
)

// delivery is one message handed to the consumer, whichever broker
// brought it.
type delivery struct {
	eventID string
	data    []byte
	ack     func() error // done with it
	nak     func() error // deliver it again
}

// broker is where the relay publishes and the consumer reads: the sink of
// the relay, a subscription for the consumer, and whether the consumer
// has seen everything.
type broker interface {
	// describe names the broker and its stream or queue, for the story.
	describe() string
	// sink is the relay's outbox.Listener.
	sink() outbox.Listener
	// consume hands the consumer's messages to handle, one at a time,
	// until close.
	consume(ctx context.Context, handle func(delivery)) error
	// drained reports whether every message the broker holds for the
	// consumer was delivered and acknowledged.
	drained(ctx context.Context, c *counters) (bool, error)
	// close stops the consumer (waiting for the message it handles),
	// closes the sink and deletes what the broker holds for this run. Calls
	// after the first return its result.
	close(ctx context.Context) error
}

// closeOnce runs a close function once and keeps its result.
type closeOnce struct {
	once sync.Once
	err  error
}

func (c *closeOnce) do(ctx context.Context, fn func(ctx context.Context) error) error {
	c.once.Do(func() { c.err = fn(ctx) })
	return c.err
}

// guard runs the consumer's handler until it is stopped: a message that
// arrives after stop is left for the broker to deliver again.
type guard struct {
	mu      sync.Mutex
	stopped bool
}

func (g *guard) run(handle func(delivery), d delivery) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		_ = d.nak()
		return
	}
	handle(d)
}

// stop waits for the message being handled, then stops the handler.
func (g *guard) stop() {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
}

// natsBroker is NATS JetStream: a stream of its own for the run (its
// duplicate window drops a re-published event), an ephemeral consumer
// with explicit acknowledgements.
type natsBroker struct {
	url    string
	nc     *nats.Conn
	js     jetstream.JetStream
	stream string
	s      *outboxnats.Sink
	cons   jetstream.Consumer
	cc     jetstream.ConsumeContext
	g      guard
	once   closeOnce
}

func newNATS(ctx context.Context, url, run string) (*natsBroker, error) {
	nc, err := nats.Connect(url, nats.Name("outbox relay demo"), nats.Timeout(2*time.Second))
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	b := &natsBroker{url: url, nc: nc, stream: "RELAY_DEMO_" + run}
	if b.js, err = jetstream.New(nc); err != nil {
		nc.Close()
		return nil, err
	}
	prefix := "relaydemo." + run + "."
	_, err = b.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: b.stream, Subjects: []string{prefix + ">"}, Storage: jetstream.MemoryStorage,
		Duplicates: 2 * time.Minute, // a re-published event inside the window is dropped
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("create stream %s (is JetStream enabled? nats-server -js): %w", b.stream, err)
	}
	b.s, err = outboxnats.New(outboxnats.Config{Conn: nc, Subject: relay.Prefixed(prefix)})
	if err != nil {
		_ = b.js.DeleteStream(ctx, b.stream)
		nc.Close()
		return nil, err
	}
	return b, nil
}

func (b *natsBroker) describe() string {
	return fmt.Sprintf("NATS JetStream at %s, stream %s", b.url, b.stream)
}

func (b *natsBroker) sink() outbox.Listener { return b.s }

func (b *natsBroker) consume(ctx context.Context, handle func(delivery)) error {
	cons, err := b.js.CreateConsumer(ctx, b.stream, jetstream.ConsumerConfig{
		AckPolicy: jetstream.AckExplicitPolicy,
		AckWait:   30 * time.Second,
	})
	if err != nil {
		return fmt.Errorf("create consumer on %s: %w", b.stream, err)
	}
	b.cons = cons
	b.cc, err = cons.Consume(func(m jetstream.Msg) {
		id := m.Headers().Get(relay.HeaderEventID)
		if id == "" {
			id = m.Headers().Get(jetstream.MsgIDHeader)
		}
		b.g.run(handle, delivery{eventID: id, data: m.Data(), ack: m.Ack, nak: m.Nak})
	})
	return err
}

func (b *natsBroker) drained(ctx context.Context, _ *counters) (bool, error) {
	info, err := b.cons.Info(ctx)
	if err != nil {
		return false, err
	}
	return info.NumPending == 0 && info.NumAckPending == 0, nil
}

func (b *natsBroker) close(ctx context.Context) error { return b.once.do(ctx, b.shutdown) }

func (b *natsBroker) shutdown(ctx context.Context) error {
	if b.cc != nil {
		b.cc.Stop()
		select {
		case <-b.cc.Closed():
		case <-ctx.Done():
		}
	}
	b.g.stop()
	_ = b.s.Close()
	err := b.js.DeleteStream(ctx, b.stream)
	b.nc.Close()
	return err
}

// amqpBroker is RabbitMQ: an exchange and a queue of their own for the run.
// RabbitMQ does not deduplicate: a re-published event reaches the consumer
// twice, and the inbox drops the second.
type amqpBroker struct {
	url                  string
	conn                 *amqp.Connection
	ch                   *amqp.Channel
	exchange, queue, tag string
	s                    *outboxamqp.Sink
	done                 chan struct{} // the consumer's loop ended
	g                    guard
	once                 closeOnce
}

func newAMQP(url, run string, logger *slog.Logger) (*amqpBroker, error) {
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
	if err != nil {
		return nil, fmt.Errorf("connect to RabbitMQ at %s: %w", redact(url), err)
	}
	b := &amqpBroker{url: url, conn: conn, exchange: "relay-demo-" + run, queue: "relay-demo-" + run, tag: "relay-demo-" + run,
		done: make(chan struct{})}
	fail := func(err error) (*amqpBroker, error) {
		_ = conn.Close()
		return nil, err
	}
	if b.ch, err = conn.Channel(); err != nil {
		return fail(err)
	}
	if err := b.ch.ExchangeDeclare(b.exchange, "topic", false, false, false, false, nil); err != nil {
		return fail(fmt.Errorf("declare exchange %s: %w", b.exchange, err))
	}
	if _, err := b.ch.QueueDeclare(b.queue, false, false, false, false, nil); err != nil {
		return fail(fmt.Errorf("declare queue %s: %w", b.queue, err))
	}
	if err := b.ch.QueueBind(b.queue, "orders.*", b.exchange, false, nil); err != nil {
		return fail(fmt.Errorf("bind queue %s: %w", b.queue, err))
	}
	b.s, err = outboxamqp.New(outboxamqp.Config{URL: url, Exchange: b.exchange, RoutingKey: relay.Prefixed("orders."), Logger: logger})
	if err != nil {
		_ = b.deleteAll()
		return fail(err)
	}
	return b, nil
}

func (b *amqpBroker) describe() string {
	return fmt.Sprintf("RabbitMQ at %s, exchange and queue %s", redact(b.url), b.queue)
}

func (b *amqpBroker) sink() outbox.Listener { return b.s }

func (b *amqpBroker) consume(_ context.Context, handle func(delivery)) error {
	if err := b.ch.Qos(32, 0, false); err != nil {
		return err
	}
	msgs, err := b.ch.Consume(b.queue, b.tag, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("consume %s: %w", b.queue, err)
	}
	go func() {
		defer close(b.done)
		for d := range msgs {
			id, _ := d.Headers[relay.HeaderEventID].(string)
			if id == "" {
				id = d.MessageId
			}
			b.g.run(handle, delivery{eventID: id, data: d.Body,
				ack: func() error { return d.Ack(false) },
				nak: func() error { return d.Nack(false, true) }})
		}
	}()
	return nil
}

// drained: the queue holds no ready message, the consumer has had as many
// deliveries as the relay published messages plus the ones it sent back to
// be delivered again, and has acknowledged or sent back each.
func (b *amqpBroker) drained(_ context.Context, c *counters) (bool, error) {
	q, err := b.ch.QueueDeclarePassive(b.queue, false, false, false, false, nil)
	if err != nil {
		return false, err
	}
	return q.Messages == 0 && c.deliveries.Load() >= c.relayed.Load()+c.naks.Load() && c.settled.Load() == c.deliveries.Load(), nil
}

func (b *amqpBroker) close(ctx context.Context) error { return b.once.do(ctx, b.shutdown) }

func (b *amqpBroker) shutdown(ctx context.Context) error {
	var errs []error
	if err := b.ch.Cancel(b.tag, false); err == nil {
		select {
		case <-b.done: // the deliveries already sent were handled
		case <-ctx.Done():
			errs = append(errs, ctx.Err())
		}
	}
	b.g.stop()
	errs = append(errs, b.s.Close(), b.deleteAll(), b.conn.Close())
	return errors.Join(errs...)
}

// deleteAll deletes the run's queue and exchange.
func (b *amqpBroker) deleteAll() error {
	_, qErr := b.ch.QueueDelete(b.queue, false, false, false)
	return errors.Join(qErr, b.ch.ExchangeDelete(b.exchange, false, false))
}
