package outboxamqp_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxtest"
	"github.com/go-outbox/outbox/core/relay"
	"github.com/go-outbox/outbox/core/relay/relaytest"
	outboxamqp "github.com/go-outbox/outbox/sinks/amqp"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"
)

// TestMain fails the test binary if a goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// EnvURL names the variable with the RabbitMQ the tests use.
const EnvURL = "OUTBOX_TEST_AMQP_URL"

// DefaultURL is the shared RabbitMQ of the machine and of CI.
const DefaultURL = "amqp://guest:guest@127.0.0.1:5672/"

var discard = slog.New(slog.DiscardHandler)

// brokerURL returns the URL of the tests' broker with its host and port
// replaced by hostport (a proxy, or a port nothing listens on).
func brokerURL(t testing.TB, hostport string) string {
	t.Helper()
	uri, err := amqp.ParseURI(testURL())
	if err != nil {
		t.Fatalf("%s: %v", EnvURL, err)
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatal(err)
	}
	uri.Host = host
	if uri.Port, err = strconv.Atoi(port); err != nil {
		t.Fatal(err)
	}
	return uri.String()
}

func testURL() string {
	if url := os.Getenv(EnvURL); url != "" {
		return url
	}
	return DefaultURL
}

// broker returns the address of the shared RabbitMQ (OUTBOX_TEST_AMQP_URL
// or 127.0.0.1:5672) and a connection of the test's own to it, or skips
// the test (fails it under OUTBOX_TEST_REQUIRE_BROKERS=1).
func broker(t testing.TB) (hostport string, conn *amqp.Connection) {
	t.Helper()
	url := testURL()
	uri, err := amqp.ParseURI(url)
	if err != nil {
		t.Fatalf("%s: %v", EnvURL, err)
	}
	hostport = fmt.Sprintf("%s:%d", uri.Host, uri.Port)
	relaytest.RequireTCP(t, "RabbitMQ", hostport)
	conn, err = amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		relaytest.Unavailable(t, "RabbitMQ at "+hostport, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return hostport, conn
}

var names atomic.Int64

// topology is an exchange and a queue of the test's own on the shared
// broker: the queue takes every routing key "<name>.#"; routing keys
// outside it are unroutable. Both are deleted when the test ends (and
// expire on their own if it never does).
type topology struct {
	name string
	ch   *amqp.Channel
	key  relay.Topic // "<name>.[<tenant>.]<type>", RefusedType on "unbound.…"
}

// key is the signing key of the fixtures that sign.
var key = []byte("0123456789abcdef0123456789abcdef")

func newTopology(t testing.TB, conn *amqp.Connection) *topology {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	tp := &topology{name: fmt.Sprintf("outboxtest.%d.%d", time.Now().UnixNano(), names.Add(1)), ch: ch}
	tp.key = relaytest.TenantTopic(tp.name+".", "unbound.")
	if err := ch.ExchangeDeclare(tp.name, amqp.ExchangeTopic, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(tp.name, false, false, false, false, amqp.Table{amqp.QueueTTLArg: int32(10 * 60 * 1000)}); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(tp.name, tp.name+".#", tp.name, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ch, err := conn.Channel() // the test's channel may have been closed by an error
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer ch.Close()
		if _, err := ch.QueueDelete(tp.name, false, false, false); err != nil {
			t.Errorf("delete queue %s: %v", tp.name, err)
		}
		if err := ch.ExchangeDelete(tp.name, false, false); err != nil {
			t.Errorf("delete exchange %s: %v", tp.name, err)
		}
	})
	return tp
}

// get takes every message from the queue.
func (tp *topology) get() ([]amqp.Delivery, error) {
	var out []amqp.Delivery
	for {
		d, ok, err := tp.ch.Get(tp.name, true)
		if err != nil || !ok {
			return out, err
		}
		out = append(out, d)
	}
}

func (tp *topology) read(context.Context) ([]relay.Message, error) {
	ds, err := tp.get()
	out := make([]relay.Message, len(ds))
	for i, d := range ds {
		m := relay.Message{ID: d.MessageId, Topic: d.RoutingKey, Payload: d.Body, Headers: make(map[string]string, len(d.Headers))}
		for k, v := range d.Headers {
			s, ok := v.(string)
			if !ok {
				s = fmt.Sprintf("%T %v", v, v)
			}
			m.Headers[k] = s
		}
		out[i] = m
	}
	return out, err
}

func newSink(t testing.TB, cfg outboxamqp.Config) *outboxamqp.Sink {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = discard
	}
	s, err := outboxamqp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// TestSuite runs the suite with the sink dialing RabbitMQ through a proxy
// the test cuts for the outage cases.
func TestSuite(t *testing.T) {
	hostport, conn := broker(t)
	events := 2000
	if testing.Short() {
		events = 500
	}
	relaytest.Run(t, func(t *testing.T) relaytest.Fixture {
		tp := newTopology(t, conn)
		proxy := relaytest.NewProxy(t, hostport)
		sink := newSink(t, outboxamqp.Config{
			URL: brokerURL(t, proxy.Addr()), Exchange: tp.name, RoutingKey: tp.key, PublishTimeout: 2 * time.Second,
		})
		return relaytest.Fixture{
			Sink: sink, Broker: relay.AMQP, Topic: tp.key, Read: tp.read,
			Down:         func(*testing.T) { proxy.Cut() },
			Up:           func(*testing.T) { proxy.Restore() },
			OutageEvents: events,
		}
	})
}

// TestSuiteOnApplicationConnection runs the cases without an outage with a
// connection the application opened, signing the messages: a sink that
// cannot redial, where a message that closed the connection would end
// every later event DEAD.
func TestSuiteOnApplicationConnection(t *testing.T) {
	_, conn := broker(t)
	relaytest.Run(t, func(t *testing.T) relaytest.Fixture {
		tp := newTopology(t, conn)
		sink := newSink(t, outboxamqp.Config{Conn: conn, Exchange: tp.name, RoutingKey: tp.key, SigningKey: key})
		return relaytest.Fixture{Sink: sink, Broker: relay.AMQP, Topic: tp.key, SigningKey: key, Read: tp.read}
	})
	if conn.IsClosed() {
		t.Error("the application's connection is closed")
	}
}

func event(t *testing.T, typ string, opts ...outbox.EnvelopeOption) outbox.Envelope {
	t.Helper()
	e, err := outbox.NewEnvelope(outbox.EventName(typ),
		append([]outbox.EnvelopeOption{outbox.WithAggregate(outbox.AggregateName("Order"), "o-1"), outbox.WithJSON([]byte(`{"n":1}`))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestProperties: the AMQP properties of a message, besides what the
// suite checks.
func TestProperties(t *testing.T) {
	_, conn := broker(t)
	tp := newTopology(t, conn)
	sink := newSink(t, outboxamqp.Config{Conn: conn, Exchange: tp.name, RoutingKey: tp.key})
	at := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	jsonEvent := event(t, relaytest.OrderPlaced, outbox.WithOccurredAt(at))
	binEvent, err := outbox.NewEnvelope(outbox.EventName(relaytest.OrderShipped), outbox.WithBytes([]byte{1, 2, 3}))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []outbox.Envelope{jsonEvent, binEvent} {
		if err := sink.Handle(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := tp.get()
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 {
		t.Fatalf("%d messages, want 2", len(ds))
	}
	for i, want := range []struct {
		id, contentType, typ string
		ts                   time.Time
	}{
		{jsonEvent.ID(), "application/json", relaytest.OrderPlaced, at},
		{binEvent.ID(), "", relaytest.OrderShipped, binEvent.OccurredAt().Truncate(time.Second)},
	} {
		d := ds[i]
		if d.MessageId != want.id || d.DeliveryMode != amqp.Persistent || d.ContentType != want.contentType || d.Type != want.typ ||
			!d.Timestamp.Equal(want.ts) || d.Exchange != tp.name {
			t.Errorf("message %d: id %q mode %d content type %q type %q timestamp %v exchange %q; want %q %d %q %q %v %q",
				i, d.MessageId, d.DeliveryMode, d.ContentType, d.Type, d.Timestamp, d.Exchange,
				want.id, amqp.Persistent, want.contentType, want.typ, want.ts, tp.name)
		}
	}
}

// TestChannelRecovery: a publish to an exchange that does not exist makes
// the broker close the channel; the error says why, and the next publish
// opens a new channel and gets the same clear error, never a stale
// "channel closed". Once the exchange exists, publishing works on.
func TestChannelRecovery(t *testing.T) {
	_, conn := broker(t)
	tp := newTopology(t, conn)
	missing := tp.name + ".later"
	sink := newSink(t, outboxamqp.Config{Conn: conn, Exchange: missing, RoutingKey: tp.key})
	for i := range 3 {
		err := sink.Handle(context.Background(), event(t, relaytest.OrderPlaced))
		if err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), missing) {
			t.Fatalf("publish %d to a missing exchange: %v", i+1, err)
		}
	}
	if err := tp.ch.ExchangeDeclare(missing, amqp.ExchangeFanout, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := tp.ch.QueueBind(tp.name, "", missing, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ch, err := conn.Channel(); err == nil {
			_ = ch.ExchangeDelete(missing, false, false)
			_ = ch.Close()
		}
	})
	e := event(t, relaytest.OrderPlaced)
	if err := sink.Handle(context.Background(), e); err != nil {
		t.Fatalf("after the exchange was made: %v", err)
	}
	ds, err := tp.get()
	if err != nil || len(ds) != 1 || ds[0].MessageId != e.ID() {
		t.Fatalf("queue holds %d messages (%v), want event %s", len(ds), err, e.ID())
	}
}

// TestReturnsMatchTheirPublishes: routable and unroutable events published
// at the same time on the sink's one channel each get their own outcome.
func TestReturnsMatchTheirPublishes(t *testing.T) {
	_, conn := broker(t)
	tp := newTopology(t, conn)
	sink := newSink(t, outboxamqp.Config{Conn: conn, Exchange: tp.name, RoutingKey: tp.key})
	var events []outbox.Envelope
	for i := range 200 {
		typ := relaytest.OrderPlaced
		if i%3 == 0 {
			typ = relaytest.RefusedType
		}
		events = append(events, event(t, typ))
	}
	errs := make([]error, len(events))
	done := make(chan struct{})
	for i, e := range events {
		go func() {
			errs[i] = sink.Handle(context.Background(), e)
			done <- struct{}{}
		}()
	}
	for range events {
		<-done
	}
	routed := map[string]bool{}
	for i, e := range events {
		refused := e.Type() == relaytest.RefusedType
		switch {
		case refused && (errs[i] == nil || !strings.Contains(errs[i].Error(), "NO_ROUTE")):
			t.Errorf("unroutable event %d: %v", i, errs[i])
		case !refused && errs[i] != nil:
			t.Errorf("routable event %d: %v", i, errs[i])
		case !refused:
			routed[e.ID()] = true
		}
	}
	ds, err := tp.get()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if !routed[d.MessageId] {
			t.Errorf("queue holds %s, which was not routed", d.MessageId)
		}
		delete(routed, d.MessageId)
	}
	if len(routed) != 0 {
		t.Errorf("%d routed events missing from the queue", len(routed))
	}
}

func TestConfig(t *testing.T) {
	_, conn := broker(t)
	closed, err := amqp.Dial(testURL())
	if err != nil {
		t.Fatal(err)
	}
	_ = closed.Close()
	for name, cfg := range map[string]outboxamqp.Config{
		"neither URL nor Conn":    {},
		"both URL and Conn":       {URL: testURL(), Conn: conn},
		"AMQPConfig with Conn":    {Conn: conn, AMQPConfig: &amqp.Config{}},
		"closed Conn":             {Conn: closed},
		"negative PublishTimeout": {Conn: conn, PublishTimeout: -time.Second},
		"long exchange name":      {Conn: conn, Exchange: strings.Repeat("x", 256)},
		"short SigningKey":        {Conn: conn, SigningKey: key[:31]},
		"bad URL":                 {URL: "http://127.0.0.1:5672/"},
	} {
		if _, err := outboxamqp.New(cfg); !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
	_, err = outboxamqp.New(outboxamqp.Config{URL: brokerURL(t, "127.0.0.1:1"), PublishTimeout: time.Second})
	if err == nil || errors.Is(err, outbox.ErrInvalidConfig) {
		t.Errorf("dialing a port nothing listens on: %v, want a connection error", err)
	}
}

// TestClose: Close closes what the sink opened, never the application's
// connection; after Close, Handle fails with ErrClosed.
func TestClose(t *testing.T) {
	_, conn := broker(t)
	tp := newTopology(t, conn)
	ctx := context.Background()
	borrowed, err := outboxamqp.New(outboxamqp.Config{Conn: conn, Exchange: tp.name, RoutingKey: tp.key})
	if err != nil {
		t.Fatal(err)
	}
	if err := borrowed.Handle(ctx, event(t, relaytest.OrderPlaced)); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(borrowed.Close(), borrowed.Close()); err != nil {
		t.Fatal(err)
	}
	if err := borrowed.Handle(ctx, event(t, relaytest.OrderPlaced)); !errors.Is(err, outbox.ErrClosed) {
		t.Errorf("Handle after Close: %v, want ErrClosed", err)
	}
	if conn.IsClosed() {
		t.Error("Close closed the application's connection")
	}
	// The sink's own connection: goleak (TestMain) sees whether Close let
	// its goroutines go.
	owned, err := outboxamqp.New(outboxamqp.Config{URL: testURL(), Exchange: tp.name, RoutingKey: tp.key, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := owned.Handle(ctx, event(t, relaytest.OrderPlaced)); err != nil {
		t.Fatal(err)
	}
	if err := owned.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRefusedMessageFailsAlone: a message RabbitMQ would refuse by closing
// the channel or the connection (a header name over 255 bytes, headers
// over the frame size, a long Content-Type) fails its own event with
// relay.ErrInvalidMessage before it is sent; headers RabbitMQ reads as
// its own (a string CC or BCC, x-…) are left out. The events published
// with them in one batch are delivered, and so is every later event on
// the application's connection, which stays open.
func TestRefusedMessageFailsAlone(t *testing.T) {
	_, conn := broker(t)
	tp := newTopology(t, conn)
	sink := newSink(t, outboxamqp.Config{Conn: conn, Exchange: tp.name, RoutingKey: tp.key})
	// Headers NewEnvelope refuses (over the envelope's limits) come from
	// rows stored before those checks, or by another program.
	stored := func(h map[string]string) outbox.Envelope {
		return outboxtest.Stored(t, event(t, relaytest.OrderPlaced), "", h)
	}
	refused := []outbox.Envelope{
		stored(map[string]string{strings.Repeat("n", 256): "v"}),
		stored(map[string]string{strings.Repeat("ü", 200): "v"}),
		stored(map[string]string{"big": strings.Repeat("v", 200<<10)}),
		stored(manyHeaders(3000)),
		event(t, relaytest.OrderPlaced, outbox.WithHeader(relay.HeaderContentType, strings.Repeat("c", 256))),
	}
	var events, good []outbox.Envelope
	for i := range 3 * len(refused) {
		if i%3 == 1 {
			events = append(events, refused[i/3])
			continue
		}
		e := outboxtest.Stored(t, event(t, relaytest.OrderShipped, outbox.WithHeader("CC", "elsewhere"), outbox.WithHeader("BCC", "elsewhere"),
			outbox.WithHeader("x-delay", "600000"), outbox.WithHeader("X-Request-Id", "r-1")), "", map[string]string{"big": strings.Repeat("v", 100<<10)})
		events, good = append(events, e), append(good, e)
	}
	t.Logf("%d refused messages, 3 reserved headers, among %d events", len(refused), len(events))
	errs := sink.HandleBatch(context.Background(), events)
	isRefused := map[string]bool{}
	for _, e := range refused {
		isRefused[e.ID()] = true
	}
	for i, e := range events {
		switch {
		case isRefused[e.ID()] && !errors.Is(errs[i], relay.ErrInvalidMessage):
			t.Errorf("event %d: %v, want relay.ErrInvalidMessage", i, errs[i])
		case !isRefused[e.ID()] && errs[i] != nil:
			t.Errorf("event %d, beside the refused ones: %v", i, errs[i])
		}
	}
	later := event(t, relaytest.InvoiceIssued)
	if err := sink.Handle(context.Background(), later); err != nil {
		t.Errorf("a later event: %v", err)
	}
	if conn.IsClosed() {
		t.Fatal("the application's connection closed")
	}
	ds, err := tp.get()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{later.ID(): true}
	for _, e := range good {
		want[e.ID()] = true
	}
	for _, d := range ds {
		if !want[d.MessageId] {
			t.Errorf("the queue holds %s", d.MessageId)
			continue
		}
		delete(want, d.MessageId)
		for _, h := range []string{"CC", "BCC", "x-delay"} {
			if _, ok := d.Headers[h]; ok {
				t.Errorf("message %s carries the event's %s header", d.MessageId, h)
			}
		}
		if d.Headers["X-Request-Id"] != "r-1" && d.MessageId != later.ID() {
			t.Errorf("message %s lost its X-Request-Id header", d.MessageId)
		}
	}
	if len(want) != 0 {
		t.Errorf("%d events missing from the queue", len(want))
	}
}

func manyHeaders(n int) map[string]string {
	h := make(map[string]string, n)
	for i := range n {
		h[fmt.Sprintf("h%04d-%s", i, strings.Repeat("n", 40))] = "v"
	}
	return h
}
