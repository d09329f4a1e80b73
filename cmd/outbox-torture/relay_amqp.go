package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/inbox"
	"github.com/go-outbox/outbox/core/relay"
	"github.com/go-outbox/outbox/core/relay/relaytest"
	outboxamqp "github.com/go-outbox/outbox/sinks/amqp"
	amqp "github.com/rabbitmq/amqp091-go"
)

// -relay amqp runs on the shared RabbitMQ, which the run must not stop: the
// workers reach it through a proxy of the coordinator's (relaytest.Proxy), and
// the fault is every connection through the proxy cut at once, with new
// ones refused for amqpOutage. The run has an exchange and a queue of its
// own, named for it (amqpName), which close deletes.

// envAMQPURL names the variable with the URL of the RabbitMQ of -relay amqp
// (default defaultAMQPURL).
const envAMQPURL = "OUTBOX_TEST_AMQP_URL"

// defaultAMQPURL is the shared RabbitMQ of the machine and of CI.
const defaultAMQPURL = "amqp://guest:guest@127.0.0.1:5672/"

const (
	// amqpOutage is how long the proxy refuses connections after a cut.
	amqpOutage = time.Second
	// amqpDialTimeout bounds a connection to RabbitMQ, handshake included.
	amqpDialTimeout = 5 * time.Second
	// amqpPrefetch is how many unacknowledged messages a consumer holds.
	amqpPrefetch = 32
	// amqpBackoff is the first wait of a client before it connects again;
	// each failure doubles it, up to amqpMaxBackoff.
	amqpBackoff    = 50 * time.Millisecond
	amqpMaxBackoff = time.Second
	// amqpQueueExpiry removes the run's queue when nothing has used it for
	// that long: the queue of a run that never reached close.
	amqpQueueExpiry = time.Hour
)

// init makes RabbitMQ the broker of -relay amqp.
func init() {
	relayBrokers["amqp"] = relayBroker{start: startAMQP, dial: dialAMQP}
}

// amqpName is the name of the exchange and of the queue of the run named
// run.
func amqpName(run string) string { return "outbox-torture-" + run }

// amqpRoutingKey gives every event of the run named run a routing key the
// run's queue is bound for: its name, a dot and the event type.
func amqpRoutingKey(run string) relay.Topic { return relay.Prefixed(amqpName(run) + ".") }

// amqpBrokerURL is the URL of the RabbitMQ of -relay amqp.
func amqpBrokerURL() string {
	if u := os.Getenv(envAMQPURL); u != "" {
		return u
	}
	return defaultAMQPURL
}

// amqpConnect opens a connection to url, named name in RabbitMQ's
// management views.
func amqpConnect(url, name string) (*amqp.Connection, error) {
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(name)
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(amqpDialTimeout), Properties: props})
	if err != nil {
		return nil, fmt.Errorf("connect to RabbitMQ: %w", err)
	}
	return conn, nil
}

// withAMQPChannel runs fn on a channel of a connection of its own to url,
// then closes both. When ctx ends, it closes the connection, which fails
// what fn is waiting for.
func withAMQPChannel(ctx context.Context, url string, fn func(ch *amqp.Channel) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	conn, err := amqpConnect(url, "outbox-torture coordinator")
	if err != nil {
		return err
	}
	defer conn.Close()
	defer context.AfterFunc(ctx, func() { _ = conn.Close() })()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open a channel: %w", err)
	}
	defer ch.Close()
	return fn(ch)
}

// amqpServer is the coordinator's side of -relay amqp: the run's exchange
// and queue on the shared RabbitMQ, and the proxy the workers connect
// through.
type amqpServer struct {
	broker string // RabbitMQ's own URL
	name   string // the exchange's and the queue's
	proxy  *relaytest.Proxy
	via    string // broker's URL with the proxy's address
}

// startAMQP declares the run's exchange and queue on the shared RabbitMQ,
// the queue bound for every routing key of the run, and starts the proxy
// in front of RabbitMQ.
func startAMQP(ctx context.Context, run string) (brokerServer, error) {
	broker := amqpBrokerURL()
	uri, err := amqp.ParseURI(broker)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envAMQPURL, err)
	}
	name := amqpName(run)
	if err := withAMQPChannel(ctx, broker, func(ch *amqp.Channel) error { return declareAMQP(ch, name) }); err != nil {
		return nil, err
	}
	s := &amqpServer{broker: broker, name: name}
	if s.proxy, err = relaytest.StartProxy(net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port))); err != nil {
		return nil, errors.Join(fmt.Errorf("start the proxy to RabbitMQ: %w", err), s.delete(ctx))
	}
	host, port, _ := net.SplitHostPort(s.proxy.Addr())
	uri.Host = host
	uri.Port, _ = strconv.Atoi(port)
	s.via = uri.String()
	return s, nil
}

// declareAMQP declares the exchange and the queue named name, durable,
// the queue bound for every routing key amqpRoutingKey gives. The queue
// expires after amqpQueueExpiry unused, and the exchange goes with its
// last binding: a run that never reached close leaves nothing behind for
// long.
func declareAMQP(ch *amqp.Channel, name string) error {
	if err := ch.ExchangeDeclare(name, amqp.ExchangeTopic, true, true, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %s: %w", name, err)
	}
	args := amqp.Table{amqp.QueueTTLArg: amqpQueueExpiry.Milliseconds()}
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		return fmt.Errorf("declare queue %s: %w", name, err)
	}
	if err := ch.QueueBind(name, name+".#", name, false, nil); err != nil {
		return fmt.Errorf("bind queue %s: %w", name, err)
	}
	return nil
}

// url returns RabbitMQ's URL with the proxy's address.
func (s *amqpServer) url() string { return s.via }

// fault cuts every connection of the workers to RabbitMQ and refuses new
// ones for amqpOutage.
func (s *amqpServer) fault(ctx context.Context) (string, error) {
	n := s.proxy.Cut()
	ok := sleep(ctx, amqpOutage)
	s.proxy.Restore()
	if !ok {
		return "", context.Cause(ctx)
	}
	return fmt.Sprintf("cut %d RabbitMQ connections, refused new ones for %s", n, amqpOutage), nil
}

// close stops the proxy and deletes the run's queue and exchange (if ctx
// ends first, the queue is left to expire after amqpQueueExpiry).
func (s *amqpServer) close(ctx context.Context) error {
	return errors.Join(s.proxy.Close(), s.delete(ctx))
}

// delete deletes the run's queue, with the messages left in it, and its
// exchange.
func (s *amqpServer) delete(ctx context.Context) error {
	return withAMQPChannel(ctx, s.broker, func(ch *amqp.Channel) error {
		if _, err := ch.QueueDelete(s.name, false, false, false); err != nil {
			return fmt.Errorf("delete queue %s: %w", s.name, err)
		}
		if err := ch.ExchangeDelete(s.name, false, false); err != nil {
			return fmt.Errorf("delete exchange %s: %w", s.name, err)
		}
		return nil
	})
}

// amqpClient is a worker's side of -relay amqp: the outbox's sink, which
// publishes with confirms to the run's exchange and dials again after a
// lost connection, and a consumer of the run's queue on a connection of
// its own.
type amqpClient struct {
	url       string // through the proxy
	queue     string
	snk       *outboxamqp.Sink
	log       *slog.Logger
	closing   context.Context // ends at close, and every consume with it
	stop      context.CancelFunc
	consumers sync.WaitGroup // the consumes running

	mu     sync.Mutex // guards closed, and consumers.Add against close's Wait
	closed bool
}

// dialAMQP connects a worker to the run's exchange and queue at url. While
// RabbitMQ cannot be reached (a worker started during a cut) it tries
// again until ctx ends.
func dialAMQP(ctx context.Context, url, run string, _ int) (brokerClient, error) {
	c := &amqpClient{url: url, queue: amqpName(run), log: slog.Default()}
	cfg := outboxamqp.Config{URL: url, Exchange: amqpName(run), RoutingKey: amqpRoutingKey(run), Logger: c.log}
	var b backoff
	for {
		snk, err := outboxamqp.New(cfg)
		switch {
		case err == nil:
			c.snk = snk
			c.closing, c.stop = context.WithCancel(context.Background())
			return c, nil
		case errors.Is(err, outbox.ErrInvalidConfig):
			return nil, err
		case !b.wait(ctx):
			return nil, fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		}
	}
}

// sink returns the sink that publishes the outbox's events.
func (c *amqpClient) sink() outbox.Listener { return c.snk }

// consume consumes the run's queue until ctx ends or close is called,
// connecting again whenever its connection or channel closes. It
// acknowledges a message once apply returned nil for it and returns it to
// the queue otherwise. A message without an event id, or with one the
// inbox cannot hold (apply fails with inbox.ErrInvalidID), is dropped: it
// would fail the same way at every delivery.
func (c *amqpClient) consume(ctx context.Context, apply func(ctx context.Context, eventID string, payload []byte) error) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("consume: the client is %w", outbox.ErrClosed)
	}
	c.consumers.Add(1)
	c.mu.Unlock()
	defer c.consumers.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.closing, cancel)()
	var b backoff
	for {
		consumed, err := c.consumeOnce(ctx, apply)
		if ctx.Err() != nil {
			return nil
		}
		if consumed {
			b.reset()
		}
		c.log.Debug("outbox-torture: amqp consumer: connecting again", "error", err)
		if !b.wait(ctx) {
			return nil
		}
	}
}

// consumeOnce consumes on one connection until it or its channel closes
// or ctx ends. It reports whether it got as far as consuming, and why it
// stopped.
func (c *amqpClient) consumeOnce(ctx context.Context, apply func(ctx context.Context, eventID string, payload []byte) error) (consumed bool, err error) {
	conn, err := amqpConnect(c.url, "outbox-torture consumer")
	if err != nil {
		return false, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return false, fmt.Errorf("open a channel: %w", err)
	}
	closes := ch.NotifyClose(make(chan *amqp.Error, 1))
	if err := ch.Qos(amqpPrefetch, 0, false); err != nil {
		return false, fmt.Errorf("set the prefetch count: %w", err)
	}
	deliveries, err := ch.Consume(c.queue, "", false, false, false, false, nil)
	if err != nil {
		return false, fmt.Errorf("consume queue %s: %w", c.queue, err)
	}
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case d, ok := <-deliveries:
			if !ok {
				// The channel closed (its error, if any, came first), or
				// the broker cancelled the consumer (its queue was
				// deleted) and the channel is still open.
				select {
				case err := <-closes:
					if err != nil {
						return true, fmt.Errorf("channel closed: %w", err)
					}
				default:
				}
				return true, errors.New("the channel closed or the broker cancelled the consumer")
			}
			if err := c.handle(ctx, d, apply); err != nil {
				return true, err
			}
		}
	}
}

// handle applies d and acknowledges it, returns it to the queue if apply
// failed, or drops it if it carries no event id the inbox can hold. The
// error is that of the acknowledgement: the channel is gone.
func (c *amqpClient) handle(ctx context.Context, d amqp.Delivery, apply func(ctx context.Context, eventID string, payload []byte) error) error {
	id, _ := d.Headers[relay.HeaderEventID].(string)
	if id == "" {
		c.log.Warn("outbox-torture: amqp consumer: dropped a message without an event id",
			"message_id", d.MessageId, "routing_key", d.RoutingKey, "bytes", len(d.Body))
		return d.Reject(false)
	}
	err := apply(ctx, id, d.Body)
	switch {
	case err == nil:
		return d.Ack(false)
	case errors.Is(err, inbox.ErrInvalidID):
		c.log.Warn("outbox-torture: amqp consumer: dropped a message with an invalid event id",
			"message_id", d.MessageId, "routing_key", d.RoutingKey, "error", err)
		return d.Reject(false)
	default:
		c.log.Debug("outbox-torture: amqp consumer: apply failed, the message goes back to the queue", "event", id, "error", err)
		sleep(ctx, amqpBackoff) // not at once: what failed (the database cut away) may need a moment
		return d.Nack(false, true)
	}
}

// close ends every consume, waits until they have returned (each once its
// current apply has, its connection closed), and closes the sink. It is
// idempotent.
func (c *amqpClient) close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.stop()
	c.consumers.Wait()
	return c.snk.Close()
}

// backoff is how long a client waits before it tries to connect again:
// amqpBackoff at first, twice as long after each failure, up to
// amqpMaxBackoff.
type backoff time.Duration

// wait waits, doubles the next wait and reports true; or reports false as
// soon as ctx ends.
func (b *backoff) wait(ctx context.Context) bool {
	d := max(time.Duration(*b), amqpBackoff)
	*b = backoff(min(2*d, amqpMaxBackoff))
	return sleep(ctx, d)
}

// reset makes the next wait amqpBackoff again.
func (b *backoff) reset() { *b = 0 }
