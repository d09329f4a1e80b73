package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/inbox"
	"github.com/go-outbox/outbox/core/relay"
	"github.com/go-outbox/outbox/core/relay/relaytest"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"
)

// liveness bounds the tests' waits for something that must happen: far
// longer than it takes, so that only a hang fails them.
const liveness = time.Minute

// noLeaks fails t if a goroutine started during the test outlives it and
// its cleanups.
func noLeaks(t *testing.T) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
}

// amqpAdmin returns a connection of the test's own to the shared RabbitMQ,
// or skips the test (fails it under OUTBOX_TEST_REQUIRE_BROKERS=1).
func amqpAdmin(t *testing.T) *amqp.Connection {
	t.Helper()
	conn, err := amqpConnect(amqpBrokerURL(), "outbox-torture test")
	if err != nil {
		relaytest.Unavailable(t, "RabbitMQ at "+envAMQPURL+" (default "+defaultAMQPURL+")", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// startAMQPRun starts the broker of a -relay amqp run of the test's own;
// the returned function closes it (it is closed when the test ends if the
// test did not).
func startAMQPRun(t *testing.T, ctx context.Context) (srv brokerServer, run string, closeSrv func() error) {
	t.Helper()
	run = fmt.Sprintf("test-%d", time.Now().UnixNano())
	srv, err := relayBrokers["amqp"].start(ctx, run)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	var once sync.Once
	closeSrv = func() error {
		err := errors.New("closed already")
		once.Do(func() { err = srv.close(context.Background()) })
		return err
	}
	t.Cleanup(func() { _ = closeSrv() })
	return srv, run, closeSrv
}

// consumer is a brokerClient of the test consuming in a goroutine of its
// own until stop.
type consumer struct {
	brokerClient
	cancel context.CancelFunc
	done   chan struct{} // closed when consume has returned
	err    error         // what it returned
}

// startConsumer dials the run at srv and consumes with apply.
func startConsumer(t *testing.T, ctx context.Context, srv brokerServer, run string, apply func(ctx context.Context, id string, payload []byte) error) *consumer {
	t.Helper()
	cl, err := relayBrokers["amqp"].dial(ctx, srv.url(), run, 0)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	c := &consumer{brokerClient: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.err = cl.consume(cctx, apply)
	}()
	t.Cleanup(func() {
		if err := c.stop(); err != nil {
			t.Errorf("consumer: %v", err)
		}
	})
	return c
}

// stop ends the consumer's consume, waits for it, and closes the client.
func (c *consumer) stop() error {
	c.cancel()
	select {
	case <-c.done:
	case <-time.After(liveness):
		return errors.New("consume did not return once its context ended")
	}
	return errors.Join(c.err, c.close())
}

// amqpLedger records what the consumers of a test applied.
type amqpLedger struct {
	mu       sync.Mutex
	payloads map[string][]byte // by event id, of the published events
	failOnce map[string]bool   // ids whose first apply fails: true until it did
	applied  map[string]int    // applies by id
	gen      map[string]int64  // the cuts before the publish of each event began
	seen     []int64           // per consumer: the highest gen it applied, -1 for none
	unknown  []string          // ids applied that were never published
	changed  chan struct{}     // receives (without blocking) after every apply
}

func newAMQPLedger(consumers int) *amqpLedger {
	l := &amqpLedger{payloads: map[string][]byte{}, failOnce: map[string]bool{}, applied: map[string]int{},
		gen: map[string]int64{}, seen: make([]int64, consumers), changed: make(chan struct{}, 1)}
	for i := range l.seen {
		l.seen[i] = -1
	}
	return l
}

// event makes the n-th event of the test, published after gen cuts.
func (l *amqpLedger) event(n int, gen int64) outbox.Envelope {
	payload := fmt.Appendf(nil, `{"n":%d}`, n)
	e := outbox.MustEnvelope(outbox.EventName("Tortured"), outbox.WithJSON(payload))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.payloads[e.ID()] = payload
	l.gen[e.ID()] = gen
	if n%10 == 0 {
		l.failOnce[e.ID()] = true
	}
	return e
}

// apply returns consumer i's apply.
func (l *amqpLedger) apply(i int) func(ctx context.Context, id string, payload []byte) error {
	return func(ctx context.Context, id string, payload []byte) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		want, ok := l.payloads[id]
		if !ok || string(payload) != string(want) {
			l.unknown = append(l.unknown, fmt.Sprintf("%q with payload %q", id, payload))
			return nil
		}
		if l.failOnce[id] {
			l.failOnce[id] = false
			return errors.New("this event fails its first apply")
		}
		l.applied[id]++
		l.seen[i] = max(l.seen[i], l.gen[id])
		select {
		case l.changed <- struct{}{}:
		default:
		}
		return nil
	}
}

// missing returns how many published events were not applied.
func (l *amqpLedger) missing() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.payloads) - len(l.applied)
}

// behind returns the consumers that applied no event published after gen
// cuts.
func (l *amqpLedger) behind(gen int64) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for i, g := range l.seen {
		if g < gen {
			out = append(out, i)
		}
	}
	return out
}

// waitChange waits for an apply, at most d: a pace for polling, not an
// assertion.
func (l *amqpLedger) waitChange(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.changed:
	case <-t.C:
	case <-ctx.Done():
	}
}

// publishRetrying publishes e through sink until the broker has it, as the
// outbox would deliver it again, and counts the failed attempts.
func publishRetrying(ctx context.Context, sink outbox.Listener, e outbox.Envelope, failed *atomic.Int64) error {
	for {
		err := sink.Handle(ctx, e)
		if err == nil {
			return nil
		}
		failed.Add(1)
		if !sleep(ctx, 20*time.Millisecond) {
			return fmt.Errorf("event %s: %w (last: %w)", e.ID(), ctx.Err(), err)
		}
	}
}

// Two workers publish through their sinks and consume the run's queue
// while the coordinator cuts every connection to RabbitMQ, in the middle
// of the publishing, several times: every event is applied (at least
// once), with its payload; an apply that fails is delivered again; both
// consumers apply events published after each cut; and close deletes the
// run's queue and exchange.
func TestAMQPRelayThroughCuts(t *testing.T) {
	noLeaks(t)
	admin := amqpAdmin(t)
	const events, cuts, workers = 500, 3, 2
	ctx, cancel := context.WithTimeout(context.Background(), 3*liveness)
	defer cancel()
	srv, run, closeSrv := startAMQPRun(t, ctx)
	l := newAMQPLedger(workers)
	cs := make([]*consumer, workers)
	for i := range cs {
		cs[i] = startConsumer(t, ctx, srv, run, l.apply(i))
	}

	var gen, failed atomic.Int64 // the cuts so far; the publishes that failed
	n := 0
	for round := range cuts + 1 {
		// Each worker publishes its share of the round; the cut comes once
		// the first worker is half way through its share.
		share := events / (cuts + 1) / workers
		halfway := make(chan struct{})
		errs := make(chan error, workers)
		for w, c := range cs {
			first := n + w*share
			go func() {
				for k := range share {
					if w == 0 && k == share/2 {
						close(halfway)
					}
					if err := publishRetrying(ctx, c.sink(), l.event(first+k, gen.Load()), &failed); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		n += workers * share
		if round < cuts {
			<-halfway
			what, err := srv.fault(ctx)
			if err != nil {
				t.Fatalf("fault: %v", err)
			}
			// Two clients, each with the sink's connection and the
			// consumer's: a fault that cut fewer went past the proxy.
			var cut int
			if _, err := fmt.Sscanf(what, "cut %d ", &cut); err != nil || cut < 2*len(cs) {
				t.Fatalf("fault %q: want at least %d connections cut", what, 2*len(cs))
			}
			gen.Add(1)
			t.Logf("cut %d: %s", round+1, what)
		}
		for range cs {
			if err := <-errs; err != nil {
				t.Fatalf("publish: %v", err)
			}
		}
		// Both consumers must apply events published after the cut: more
		// go out, one at a time, until they have.
		for behind := l.behind(gen.Load()); len(behind) > 0; behind = l.behind(gen.Load()) {
			if ctx.Err() != nil {
				t.Fatalf("consumers %v applied no event published after cut %d", behind, gen.Load())
			}
			if err := publishRetrying(ctx, cs[n%workers].sink(), l.event(n, gen.Load()), &failed); err != nil {
				t.Fatalf("publish: %v", err)
			}
			n++
			l.waitChange(ctx, time.Second)
		}
	}
	for l.missing() > 0 {
		if ctx.Err() != nil {
			t.Fatalf("%d of %d events never applied", l.missing(), n)
		}
		l.waitChange(ctx, time.Second)
	}
	t.Logf("%d events published (%d failed publishes retried), all applied", n, failed.Load())

	for i, c := range cs {
		if err := c.stop(); err != nil {
			t.Errorf("consumer %d: %v", i, err)
		}
	}
	l.mu.Lock()
	for id, fails := range l.failOnce {
		if fails {
			t.Errorf("event %s: its first apply never came", id)
		}
	}
	if len(l.unknown) > 0 {
		t.Errorf("applied what no sink published: %v", l.unknown)
	}
	l.mu.Unlock()

	name := amqpName(run)
	ch, err := admin.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclarePassive(name, true, false, false, false, nil); err != nil {
		t.Fatalf("the run's queue is not there before close: %v", err)
	}
	if err := closeSrv(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := ch.QueueDeclarePassive(name, true, false, false, false, nil); !isNotFound(err) {
		t.Errorf("declaring the run's queue passively after close: %v, want 404 NOT_FOUND", err)
	}
	if ch, err = admin.Channel(); err != nil { // the 404 closed the last one
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.ExchangeDeclarePassive(name, amqp.ExchangeTopic, true, false, false, false, nil); !isNotFound(err) {
		t.Errorf("declaring the run's exchange passively after close: %v, want 404 NOT_FOUND", err)
	}
}

// isNotFound reports whether err is RabbitMQ's 404 NOT_FOUND.
func isNotFound(err error) bool {
	var amqpErr *amqp.Error
	return errors.As(err, &amqpErr) && amqpErr.Code == amqp.NotFound
}

// A message the consumer cannot apply at any delivery — without an event
// id, with one that is not a string, or one the inbox cannot hold — is
// dropped, not returned to the queue, and the consumer goes on with the
// next one. close ends a consume.
func TestAMQPConsumerDropsWhatNoDeliveryCanApply(t *testing.T) {
	noLeaks(t)
	admin := amqpAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	srv, run, _ := startAMQPRun(t, ctx)
	tooLong := strings.Repeat("x", inbox.MaxIDLen+1)

	var mu sync.Mutex
	applies := map[string]int{}
	good := make(chan struct{})
	c := startConsumer(t, ctx, srv, run, func(_ context.Context, id string, _ []byte) error {
		mu.Lock()
		defer mu.Unlock()
		applies[id]++
		switch id {
		case tooLong: // as the inbox fails it
			return fmt.Errorf("%w: the id has %d bytes", inbox.ErrInvalidID, len(id))
		case "good":
			if applies[id] == 1 {
				close(good)
			}
		}
		return nil
	})

	ch, err := admin.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	name := amqpName(run)
	for _, m := range []amqp.Publishing{
		{MessageId: "no headers\n\x1b[31m", Body: []byte("\x00\xff")},
		{MessageId: "not a string", Headers: amqp.Table{relay.HeaderEventID: int32(7)}},
		{MessageId: "empty", Headers: amqp.Table{relay.HeaderEventID: ""}},
		{MessageId: "too long", Headers: amqp.Table{relay.HeaderEventID: tooLong}},
		{MessageId: "good", Headers: amqp.Table{relay.HeaderEventID: "good"}},
	} {
		if err := ch.PublishWithContext(ctx, name, name+".Hostile", true, false, m); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-good:
	case <-ctx.Done():
		t.Fatal("the message after the ones that cannot be applied was never applied")
	}
	// close alone ends the consume.
	if err := c.close(); err != nil {
		t.Errorf("close: %v", err)
	}
	select {
	case <-c.done:
		if c.err != nil {
			t.Errorf("consume: %v", c.err)
		}
	case <-time.After(liveness):
		t.Fatal("consume still running after close")
	}
	mu.Lock()
	if applies[""] > 0 || applies[tooLong] != 1 || len(applies) != 2 {
		t.Errorf("applies by id length: %v, want one of the long id and one of \"good\"", lengths(applies))
	}
	mu.Unlock()
	q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if q.Messages != 0 {
		t.Errorf("%d messages back in the queue, want 0: the consumer returned what it must drop", q.Messages)
	}
}

// lengths maps the ids of applies to their length, for a readable
// failure.
func lengths(applies map[string]int) map[int]int {
	out := map[int]int{}
	for id, n := range applies {
		out[len(id)] += n
	}
	return out
}

// When the run's queue is deleted under a consumer, RabbitMQ cancels the
// consumer on a channel that stays open: the consumer connects again, and
// once the queue is back it applies what comes.
func TestAMQPConsumerOutlivesItsQueue(t *testing.T) {
	noLeaks(t)
	admin := amqpAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	srv, run, _ := startAMQPRun(t, ctx)
	name := amqpName(run)
	applied := make(chan string, 1)
	c := startConsumer(t, ctx, srv, run, func(_ context.Context, id string, _ []byte) error {
		select {
		case applied <- id:
		default:
		}
		return nil
	})
	ch, err := admin.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for { // until the consumer consumes
		q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if q.Consumers > 0 {
			break
		}
		if !sleep(ctx, 10*time.Millisecond) {
			t.Fatal("the consumer never consumed the run's queue")
		}
	}
	if _, err := ch.QueueDelete(name, false, false, false); err != nil {
		t.Fatal(err)
	}
	if err := declareAMQP(ch, name); err != nil {
		t.Fatal(err)
	}
	m := amqp.Publishing{Headers: amqp.Table{relay.HeaderEventID: "after"}}
	if err := ch.PublishWithContext(ctx, name, name+".Again", true, false, m); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-applied:
		if id != "after" {
			t.Errorf("applied %q, want %q", id, "after")
		}
	case <-ctx.Done():
		t.Fatal("nothing applied after the queue came back")
	}
	if err := c.stop(); err != nil {
		t.Errorf("consumer: %v", err)
	}
}
