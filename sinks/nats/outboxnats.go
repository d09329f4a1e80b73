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

// asyncMaxPending is how many publishes may wait for their
// acknowledgement at once (a Client's workers times their batches); past
// it a publish waits for room.
const asyncMaxPending = 16384

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
	// without one, Handle fails for that event. A subject outside NATS's
	// syntax (relay.NATS.CheckTopic: an empty token, a wildcard, a space)
	// fails its event with relay.ErrInvalidMessage, before it is sent.
	Subject relay.Topic
	// SigningKey, when set (at least relay.MinKeyLen random bytes, kept
	// secret), signs every message (relay.HeaderSignature, see
	// relay.Sign) and adds the signature's digest to its Nats-Msg-Id (see
	// relay.Message.DedupID): a message published with an event's id by
	// anyone without the key neither passes a verifying consumer (the
	// inbox's VerifyKeys) nor makes JetStream drop the real one as a
	// duplicate.
	SigningKey []byte
	// PublishTimeout bounds one publish, from sending the message to the
	// stream's acknowledgement, and one batch of them (HandleBatch)
	// (default DefaultPublishTimeout). A shorter deadline of the
	// listener's context wins.
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
	key     []byte
	timeout time.Duration
	own     bool
	closed  atomic.Bool
}

var _ outbox.BatchListener = (*Sink)(nil)

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
	if err := relay.CheckKey("outboxnats: SigningKey", cfg.SigningKey); err != nil {
		return nil, err
	}
	s := &Sink{nc: cfg.Conn, subject: cfg.Subject, key: cfg.SigningKey, timeout: cfg.PublishTimeout}
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
			// The URL may carry a user and password or a token: neither
			// reaches the error.
			return nil, relay.RedactURL(cfg.URL).Errorf("outboxnats: connect to %s: %w", err)
		}
		s.nc, s.own = nc, true
	}
	// A publish is given up after PublishTimeout (HandleBatch); the
	// client forgets its pending acknowledgement a while later.
	js, err := jetstream.New(s.nc,
		jetstream.WithPublishAsyncMaxPending(asyncMaxPending),
		jetstream.WithPublishAsyncTimeout(2*s.timeout))
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

// Handle publishes e as relay.NATS.Message describes it, on the subject
// Config.Subject gives, with Nats-Msg-Id = e.ID() (with a SigningKey, the
// message's DedupID), and waits for the stream's acknowledgement. The
// envelope's headers in the Nats- and Outbox- namespaces (any case) are
// left out: JetStream would read them as control headers (Nats-Rollup,
// Nats-Expected-*, …). It fails at once when the connection is away or
// ctx is done, after PublishTimeout without an acknowledgement, and when
// no stream captures the subject; with an error wrapping
// relay.ErrInvalidMessage, before anything is sent, when the subject is
// not valid (see Config.Subject). After Close it fails with an error
// wrapping outbox.ErrClosed.
func (s *Sink) Handle(ctx context.Context, e outbox.Envelope) error {
	return s.HandleBatch(ctx, []outbox.Envelope{e})[0]
}

// HandleBatch publishes events as Handle publishes each, asynchronously
// and in their order, then waits for the stream's acknowledgements: it
// returns one result per event, nil for each event the stream stored and
// Handle's error for each other one (a subject no stream captures fails
// its own events only). PublishTimeout bounds the whole batch. It makes
// the Sink an outbox.BatchListener: the outbox hands it the events queued
// together.
func (s *Sink) HandleBatch(ctx context.Context, events []outbox.Envelope) []error {
	if s.closed.Load() {
		return relay.Failed("outboxnats", events, fmt.Errorf("sink %w", outbox.ErrClosed))
	}
	if err := ctx.Err(); err != nil {
		return relay.Failed("outboxnats", events, err)
	}
	pctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	errs := make([]error, len(events))
	deadline, _ := pctx.Deadline()
	futures := make([]jetstream.PubAckFuture, len(events))
	subjects := make([]string, len(events))
	for i, e := range events {
		m, err := relay.NATS.Message(e, s.subject, s.key)
		if err != nil {
			errs[i] = fmt.Errorf("outboxnats: event %s: %w", e.ID(), err)
			continue
		}
		subjects[i] = m.Topic
		if !s.nc.IsConnected() {
			errs[i] = fmt.Errorf("outboxnats: event %s to %q: not connected to NATS (%s)", m.ID, m.Topic, s.nc.Status())
			continue
		}
		msg := &nats.Msg{Subject: m.Topic, Data: m.Payload, Header: make(nats.Header, len(m.Headers)+1)}
		for k, v := range m.Headers {
			msg.Header[k] = []string{v} // as they are: NATS header names are case-sensitive
		}
		// While too many publishes wait for their acknowledgement, the
		// publish waits for room, within the batch's timeout.
		f, err := s.js.PublishMsgAsync(msg, jetstream.WithMsgID(m.DedupID()), jetstream.WithStallWait(max(time.Until(deadline), time.Millisecond)))
		if err != nil {
			errs[i] = s.failure(ctx, m.ID, m.Topic, err)
			continue
		}
		futures[i] = f
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok(): // also for a duplicate the stream dropped: it has the event
		case err := <-f.Err():
			errs[i] = s.failure(ctx, events[i].ID(), subjects[i], err)
		case <-pctx.Done():
			errs[i] = s.failure(ctx, events[i].ID(), subjects[i], pctx.Err())
		}
	}
	return errs
}

// failure describes why the publish of event id to subject failed with
// err; ctx is the caller's.
func (s *Sink) failure(ctx context.Context, id, subject string, err error) error {
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return fmt.Errorf("outboxnats: event %s: no stream answered for subject %q: no stream captures it, or JetStream is not available: %w", id, subject, err)
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return fmt.Errorf("outboxnats: event %s to %q: no acknowledgement within %s: %w", id, subject, s.timeout, err)
	}
	return fmt.Errorf("outboxnats: event %s to %q: %w", id, subject, err)
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
