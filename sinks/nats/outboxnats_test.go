package outboxnats_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/relay"
	"github.com/go-outbox/outbox/core/relay/relaytest"
	outboxnats "github.com/go-outbox/outbox/sinks/nats"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

// TestMain fails the test binary if a goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fast reconnects, so that a test waits little for a restarted server.
var fast = []nats.Option{nats.ReconnectWait(10 * time.Millisecond), nats.ReconnectJitter(0, 0)}

var discard = slog.New(slog.DiscardHandler)

// connect opens a connection of the test's own to srv, closed at cleanup.
func connect(t testing.TB, srv *server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(srv.URL(), append([]nats.Option{nats.MaxReconnects(-1)}, fast...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

var streams atomic.Int64

// stream is a stream of the test's own capturing "<name>.>". It allows
// rollups, as a stream of compacted state would: a Nats-Rollup header that
// reached it would purge it.
type stream struct {
	name  string
	js    jetstream.JetStream
	topic relay.Topic // "<name>.[<tenant>.]<type>", RefusedType on "nostream.…"
	next  uint64      // the next sequence Read returns
}

// key is the signing key of the fixtures that sign.
var key = []byte("0123456789abcdef0123456789abcdef")

func newStream(t testing.TB, nc *nats.Conn) *stream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s := newStreamValue(fmt.Sprintf("T%d", streams.Add(1)), js)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name: s.name, Subjects: []string{s.name + ".>"}, Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute,
		AllowRollup: true,
	})
	if err != nil {
		t.Fatalf("create stream %s: %v", s.name, err)
	}
	return s
}

func newStreamValue(name string, js jetstream.JetStream) *stream {
	return &stream{name: name, js: js, topic: relaytest.TenantTopic(name+".", "nostream."), next: 1}
}

// read returns the stream's messages after those returned before. The
// server may be restarting: errors are retried until ctx ends.
func (s *stream) read(ctx context.Context) ([]relay.Message, error) {
	var out []relay.Message
	for {
		msgs, err := s.readOnce(ctx)
		out = append(out, msgs...)
		if err == nil {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("read stream %s: %w", s.name, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *stream) readOnce(ctx context.Context) ([]relay.Message, error) {
	st, err := s.js.Stream(ctx, s.name)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, err
	}
	var out []relay.Message
	for ; s.next <= info.State.LastSeq; s.next++ {
		raw, err := st.GetMsg(ctx, s.next)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		m := relay.Message{ID: raw.Header.Get(relay.HeaderEventID), Topic: raw.Subject, Payload: raw.Data, Headers: map[string]string{}}
		for k, vs := range raw.Header {
			if k != jetstream.MsgIDHeader {
				m.Headers[k] = strings.Join(vs, ", ")
			}
		}
		out = append(out, m)
	}
	return out, nil
}

func TestSuite(t *testing.T) {
	srv := startServer(t)
	events := 2000
	if testing.Short() {
		events = 500
	}
	relaytest.Run(t, func(t *testing.T) relaytest.Fixture {
		st := newStream(t, connect(t, srv))
		sink, err := outboxnats.New(outboxnats.Config{
			URL: srv.URL(), Options: fast, Subject: st.topic, PublishTimeout: 2 * time.Second, Logger: discard,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sink.Close() })
		return relaytest.Fixture{
			Sink: sink, Broker: relay.NATS, Topic: st.topic, Read: st.read, Dedupes: true,
			Down:         func(*testing.T) { srv.kill() },
			Up:           func(t *testing.T) { srv.start(t) },
			OutageEvents: events,
		}
	})
}

// EnvURL names the variable with the shared NATS server TestSharedServer
// uses (default nats://127.0.0.1:4222).
const EnvURL = "OUTBOX_TEST_NATS_URL"

// TestSharedServer runs the suite's cases that need no outage on the
// shared server, with a connection of the application's, as a user's relay
// would use it, signing its messages.
func TestSharedServer(t *testing.T) {
	url := os.Getenv(EnvURL)
	if url == "" {
		url = "nats://127.0.0.1:4222"
	}
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
	if err != nil {
		relaytest.Unavailable(t, "NATS at "+url, err)
	}
	defer nc.Close()
	relaytest.Run(t, func(t *testing.T) relaytest.Fixture {
		st := newSharedStream(t, nc)
		sink, err := outboxnats.New(outboxnats.Config{Conn: nc, Subject: st.topic, SigningKey: key})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sink.Close() })
		return relaytest.Fixture{Sink: sink, Broker: relay.NATS, Topic: st.topic, SigningKey: key, Read: st.read, Dedupes: true}
	})
}

// newSharedStream makes a uniquely named stream on a shared server and
// deletes it when the test ends.
func newSharedStream(t *testing.T, nc *nats.Conn) *stream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("OUTBOXTEST_%d_%d", time.Now().UnixNano(), streams.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.MemoryStorage, AllowRollup: true})
	if err != nil {
		relaytest.Unavailable(t, "JetStream on the shared server", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Errorf("delete stream %s: %v", name, err)
		}
	})
	return newStreamValue(name, js)
}

func TestConfig(t *testing.T) {
	srv := startServer(t)
	nc := connect(t, srv)
	closed := connect(t, srv)
	closed.Close()
	for name, cfg := range map[string]outboxnats.Config{
		"neither Conn nor URL":     {},
		"both Conn and URL":        {Conn: nc, URL: srv.URL()},
		"Options with Conn":        {Conn: nc, Options: fast},
		"closed Conn":              {Conn: closed},
		"negative PublishTimeout":  {Conn: nc, PublishTimeout: -time.Second},
		"negative, with URL ahead": {URL: srv.URL(), PublishTimeout: -1},
		"short SigningKey":         {Conn: nc, SigningKey: key[:31]},
	} {
		if _, err := outboxnats.New(cfg); !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := outboxnats.New(outboxnats.Config{URL: "nats://127.0.0.1:1", Options: []nats.Option{nats.Timeout(time.Second)}}); err == nil {
		t.Error("New connected to a port nothing listens on")
	} else if errors.Is(err, outbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("connect error %q: want a connection error naming the URL", err)
	}
}

func event(t *testing.T, typ, aggregate string) outbox.Envelope {
	t.Helper()
	e, err := outbox.NewEnvelope(outbox.EventName(typ),
		outbox.WithAggregate(outbox.AggregateName("Order"), aggregate), outbox.WithJSON([]byte(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestClose: Close closes the connection the sink opened, never the
// application's own; after Close, Handle fails with ErrClosed.
func TestClose(t *testing.T) {
	srv := startServer(t)
	nc := connect(t, srv)
	st := newStream(t, nc)
	ctx := context.Background()

	borrowed, err := outboxnats.New(outboxnats.Config{Conn: nc, Subject: st.topic})
	if err != nil {
		t.Fatal(err)
	}
	if err := borrowed.Handle(ctx, event(t, relaytest.OrderPlaced, "o-1")); err != nil {
		t.Fatal(err)
	}
	if err := borrowed.Close(); err != nil {
		t.Fatal(err)
	}
	if err := borrowed.Handle(ctx, event(t, relaytest.OrderPlaced, "o-1")); !errors.Is(err, outbox.ErrClosed) {
		t.Errorf("Handle after Close: %v, want ErrClosed", err)
	}
	if !nc.IsConnected() {
		t.Error("Close closed the application's connection")
	}

	var closedConns atomic.Int32
	owned, err := outboxnats.New(outboxnats.Config{URL: srv.URL(), Subject: st.topic, Logger: discard,
		Options: []nats.Option{nats.ClosedHandler(func(*nats.Conn) { closedConns.Add(1) })}})
	if err != nil {
		t.Fatal(err)
	}
	if err := owned.Handle(ctx, event(t, relaytest.OrderPlaced, "o-2")); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(owned.Close(), owned.Close()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for closedConns.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := closedConns.Load(); n != 1 {
		t.Errorf("the sink's own connection closed %d times, want 1", n)
	}
}

// TestOrderPerSubject: events handed over one after the other are stored
// in that order, as the outbox's per-key ordering hands them over.
func TestOrderPerSubject(t *testing.T) {
	srv := startServer(t)
	st := newStream(t, connect(t, srv))
	sink, err := outboxnats.New(outboxnats.Config{URL: srv.URL(), Subject: st.topic, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	var want []string
	for range 100 {
		e := event(t, relaytest.OrderPlaced, "o-1")
		if err := sink.Handle(context.Background(), e); err != nil {
			t.Fatal(err)
		}
		want = append(want, e.ID())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs, err := st.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != len(want) {
		t.Fatalf("%d messages, want %d", len(msgs), len(want))
	}
	for i, m := range msgs {
		if m.ID != want[i] {
			t.Fatalf("message %d is event %s, want %s", i, m.ID, want[i])
		}
	}
}

// TestPublishTimeout: a publish the stream does not acknowledge in time
// fails with an error saying so. The stream's subject is answered by a
// plain subscriber that never replies.
func TestPublishTimeout(t *testing.T) {
	srv := startServer(t)
	nc := connect(t, srv)
	sub, err := nc.SubscribeSync("silent.>")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	sink, err := outboxnats.New(outboxnats.Config{Conn: nc, Subject: relay.Prefixed("silent."), PublishTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = sink.Handle(context.Background(), event(t, relaytest.OrderPlaced, "o-1"))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no acknowledgement within 100ms") {
		t.Errorf("unacknowledged publish: %v", err)
	}
}

// TestConnectErrorHidesCredentials: the error of a failed connect names the
// server but neither the password nor the token of its URL, whether the
// URL parses or not.
func TestConnectErrorHidesCredentials(t *testing.T) {
	port := freePort(t) // nothing listens on it
	for _, url := range []string{
		fmt.Sprintf("nats://alice:s3cret-pw@127.0.0.1:%d", port),
		fmt.Sprintf("nats://s3cret-token@127.0.0.1:%d", port),
		fmt.Sprintf("nats://127.0.0.1:%d,nats://bob:s3cret-pw2@127.0.0.1:%d", port, port),
		"nats://alice:s3cret-pw@127.0.0.1:notaport",
		"nats://alice:s3cret%2Fpw@[::1",
	} {
		_, err := outboxnats.New(outboxnats.Config{URL: url, Options: []nats.Option{nats.Timeout(time.Second)}})
		if err == nil {
			t.Fatalf("%s: connected", url)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("the error shows a credential: %v", err)
		}
		if !strings.Contains(err.Error(), "redacted@") || strings.Contains(err.Error(), "%!") {
			t.Errorf("the error does not name the server: %v", err)
		}
	}
}

// TestForgedIDSuppressesNoSignedEvent: a message published first with an
// upcoming event's id (ids are predictable) is taken by JetStream's
// duplicate window for that event, and the real event is then dropped
// while Handle reports success, unless the sink signs: then the real
// message's Nats-Msg-Id carries the digest only the key gives, JetStream
// stores it, and relay.Verify tells it from the forgery.
func TestForgedIDSuppressesNoSignedEvent(t *testing.T) {
	srv := startServer(t)
	nc := connect(t, srv)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, signed := range []bool{false, true} {
		st := newStream(t, nc)
		cfg := outboxnats.Config{Conn: nc, Subject: st.topic}
		if signed {
			cfg.SigningKey = key
		}
		sink, err := outboxnats.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		real := event(t, relaytest.OrderPlaced, "o-1")
		// The forger knows the id and the format, not the key.
		forged := &nats.Msg{Subject: st.name + "." + relaytest.OrderPlaced, Data: []byte(`{"refund":true}`), Header: nats.Header{}}
		forged.Header.Set(relay.HeaderEventID, real.ID())
		forged.Header.Set(relay.HeaderSignature, "v1=forged")
		for _, id := range []string{real.ID(), real.ID() + ".forged"} {
			if _, err := js.PublishMsg(ctx, forged, jetstream.WithMsgID(id)); err != nil {
				t.Fatal(err)
			}
		}
		if err := sink.Handle(ctx, real); err != nil {
			t.Fatal(err)
		}
		_ = sink.Close()
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		msgs, err := st.read(rctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		verified := 0
		for _, m := range msgs {
			if relay.Verify([][]byte{key}, m.Headers, m.Payload) == nil {
				verified++
			}
		}
		t.Logf("signed=%v: %d messages with the event's id, %d verified", signed, len(msgs), verified)
		switch {
		case !signed && len(msgs) != 2:
			t.Errorf("unsigned: %d messages, want the 2 forged ones only (the trust model docs/relays.md describes)", len(msgs))
		case signed && (len(msgs) != 3 || verified != 1):
			t.Errorf("signed: %d messages, %d verified; want the real one stored beside the forged ones, and it alone verified", len(msgs), verified)
		}
	}
}

// TestHeaderValueCannotInjectHeaders: a header value with a line break
// cannot add a header line (a Nats-Rollup that would purge the stream):
// the line breaks are blanked, the stream keeps every message.
func TestHeaderValueCannotInjectHeaders(t *testing.T) {
	srv := startServer(t)
	st := newStream(t, connect(t, srv))
	sink, err := outboxnats.New(outboxnats.Config{URL: srv.URL(), Subject: st.topic, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	ctx := context.Background()
	for _, v := range []string{"", "a\r\nNats-Rollup: all", "a\nNats-Rollup: all", "a\rNats-Rollup: all", "a\r\n\r\nbody"} {
		opts := []outbox.EnvelopeOption{outbox.WithJSON([]byte(`{}`))}
		if v != "" {
			opts = append(opts, outbox.WithHeader("X-Note", v))
		}
		e, err := outbox.NewEnvelope(outbox.EventName(relaytest.OrderPlaced), opts...)
		if err != nil {
			t.Fatal(err)
		}
		if err := sink.Handle(ctx, e); err != nil {
			t.Errorf("X-Note %q: %v", v, err)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	msgs, err := st.read(rctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 5 {
		t.Fatalf("%d messages in the stream, want 5", len(msgs))
	}
	for _, m := range msgs {
		if strings.ContainsAny(m.Headers["X-Note"], "\r\n") || m.Headers["Nats-Rollup"] != "" {
			t.Errorf("message %s: headers %q", m.ID, m.Headers)
		}
	}
}
