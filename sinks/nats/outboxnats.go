package outboxnats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/relay"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultPublishTimeout bounds one publish when Config.PublishTimeout is 0.
const DefaultPublishTimeout = 5 * time.Second

// Config configures a Sink. Set exactly one of Conn and URL.
type Config struct {
	// Conn is a connection the application opened: the sink publishes on
	// it, and the application closes it (Sink.Close leaves it open).
	Conn *nats.Conn
	// URL is a server the sink connects to itself, such as
	// "nats://127.0.0.1:4222" (a comma-separated list for a cluster).
	// Sink.Close closes that connection. The sink's connection reconnects
	// forever: while it is away, Handle fails at once and the outbox
	// retries.
	URL string
	// Options apply to the connection to URL, after the sink's own
	// (a name, reconnect forever, logging through Logger), so they win.
	Options []nats.Option

	// Subject maps an event to the subject it is published on (default
	// relay.ByEventType). A stream must capture every subject it returns:
	// without one, Handle fails for that event.
	Subject relay.Topic
	// PublishTimeout bounds one publish, from sending the message to the
	// stream's acknowledgement (default DefaultPublishTimeout). A shorter
	// deadline of the listener's context wins.
	PublishTimeout time.Duration
	// Logger receives the connection events of a connection the sink
	// opened (default slog.Default()).
	Logger *slog.Logger
}

// Sink publishes every event it is given to NATS JetStream: an
// outbox.Listener for Client.HandleAll. Handle returns once the stream has
// acknowledged the message (nil), or with the error that kept it from
// doing so, so the outbox marks an event DONE only when JetStream stores
// it. Each message carries the event id as Nats-Msg-Id: a redelivery
// inside the stream's duplicate window is acknowledged without being
// stored again. A Sink is safe for concurrent use.
type Sink struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	subject relay.Topic
	timeout time.Duration
	own     bool
	closed  atomic.Bool
}

// New validates cfg and returns a Sink; with URL it connects first.
// Configuration errors wrap outbox.ErrInvalidConfig.
func New(cfg Config) (*Sink, error) {
	if (cfg.Conn == nil) == (cfg.URL == "") {
		return nil, configErr("set exactly one of Conn and URL")
	}
	if cfg.Conn != nil && len(cfg.Options) > 0 {
		return nil, configErr("Options apply to a connection to URL, not to Conn")
	}
	if cfg.Conn != nil && cfg.Conn.IsClosed() {
		return nil, configErr("Conn is closed")
	}
	if cfg.PublishTimeout < 0 {
		return nil, configErr("PublishTimeout must not be negative, got %s", cfg.PublishTimeout)
	}
	s := &Sink{nc: cfg.Conn, subject: cfg.Subject, timeout: cfg.PublishTimeout}
	if s.subject == nil {
		s.subject = relay.ByEventType
	}
	if s.timeout == 0 {
		s.timeout = DefaultPublishTimeout
	}
	if cfg.URL != "" {
		log := cfg.Logger
		if log == nil {
			log = slog.Default()
		}
		opts := append([]nats.Option{
			nats.Name("outbox relay"),
			nats.MaxReconnects(-1),
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
				log.Warn("outboxnats: disconnected; events are retried until the connection is back", "error", err)
			}),
			nats.ReconnectHandler(func(nc *nats.Conn) {
				log.Info("outboxnats: reconnected", "server", nc.ConnectedUrlRedacted())
			}),
		}, cfg.Options...)
		nc, err := nats.Connect(cfg.URL, opts...)
		if err != nil {
			return nil, fmt.Errorf("outboxnats: connect to %s: %w", cfg.URL, err)
		}
		s.nc, s.own = nc, true
	}
	js, err := jetstream.New(s.nc)
	if err != nil {
		if s.own {
			s.nc.Close()
		}
		return nil, fmt.Errorf("outboxnats: %w", err)
	}
	s.js = js
	return s, nil
}

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: outboxnats: "+format, append([]any{outbox.ErrInvalidConfig}, args...)...)
}

// Handle publishes e as relay.NewMessage describes it, on the subject
// Config.Subject gives, with Nats-Msg-Id = e.ID(), and waits for the
// stream's acknowledgement. It fails at once when the connection is away
// or ctx is done, after PublishTimeout without an acknowledgement, and
// when no stream captures the subject. After Close it fails with an error
// wrapping outbox.ErrClosed.
func (s *Sink) Handle(ctx context.Context, e outbox.Envelope) error {
	if s.closed.Load() {
		return fmt.Errorf("outboxnats: event %s: sink %w", e.ID(), outbox.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("outboxnats: event %s: %w", e.ID(), err)
	}
	m := relay.NewMessage(e, s.subject)
	if m.Topic == "" {
		return fmt.Errorf("outboxnats: event %s: Subject returned no subject for event type %s", m.ID, e.Type())
	}
	if !s.nc.IsConnected() {
		return fmt.Errorf("outboxnats: event %s to %q: not connected to NATS (%s)", m.ID, m.Topic, s.nc.Status())
	}
	msg := &nats.Msg{Subject: m.Topic, Data: m.Payload, Header: make(nats.Header, len(m.Headers)+1)}
	for k, v := range m.Headers {
		msg.Header[k] = []string{v} // as they are: NATS header names are case-sensitive
	}
	pctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.js.PublishMsg(pctx, msg, jetstream.WithMsgID(m.ID))
	switch {
	case err == nil:
		return nil // also for a duplicate the stream dropped: it has the event
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return fmt.Errorf("outboxnats: event %s: no stream answered for subject %q: no stream captures it, or JetStream is not available: %w", m.ID, m.Topic, err)
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return fmt.Errorf("outboxnats: event %s to %q: no acknowledgement within %s: %w", m.ID, m.Topic, s.timeout, err)
	}
	return fmt.Errorf("outboxnats: event %s to %q: %w", m.ID, m.Topic, err)
}

// Close stops the sink: Handle fails from then on. It closes the
// connection the sink opened (Config.URL); a connection the application
// passed (Config.Conn) stays open. Close is idempotent.
func (s *Sink) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.own {
		s.nc.Close()
	}
	return nil
}
