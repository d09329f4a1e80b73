package outboxamqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/relay"
	amqp "github.com/rabbitmq/amqp091-go"
)

// DefaultPublishTimeout bounds one publish when Config.PublishTimeout is 0.
const DefaultPublishTimeout = 5 * time.Second

// Config configures a Sink. Set exactly one of URL and Conn.
type Config struct {
	// URL is the broker the sink connects to itself, such as
	// "amqp://guest:guest@127.0.0.1:5672/". The sink redials it on the
	// next publish after the connection is lost, and Close closes it.
	URL string
	// AMQPConfig is used to dial URL (optional; its Dial defaults to a
	// dialer with PublishTimeout as the connection timeout).
	AMQPConfig *amqp.Config
	// Conn is a connection the application opened and closes itself. The
	// sink opens its own channel on it and reopens that channel when it is
	// closed, but cannot reopen a closed Conn: until the application gives
	// a new Sink a new connection, Handle fails.
	Conn *amqp.Connection

	// Exchange is the exchange every message is published to ("" is the
	// default exchange, where the routing key names a queue).
	Exchange string
	// RoutingKey maps an event to its routing key (default
	// relay.ByEventType). A message no queue is bound for is returned by
	// the broker and fails its event. A routing key over 255 bytes or not
	// UTF-8 fails its event with relay.ErrInvalidMessage, before it is
	// sent.
	RoutingKey relay.Topic
	// SigningKey, when set (at least relay.MinKeyLen random bytes, kept
	// secret), signs every message (relay.HeaderSignature, see
	// relay.Sign), so that a consumer that verifies (the inbox's
	// VerifyKeys) refuses a message published with an event's id by
	// anyone without the key.
	SigningKey []byte
	// PublishTimeout bounds one publish, from sending the message to the
	// broker's confirmation, one batch of them (HandleBatch), and a dial
	// (default DefaultPublishTimeout). A shorter deadline of the
	// listener's context wins.
	PublishTimeout time.Duration
	// Logger receives the channel and connection events (default
	// slog.Default()).
	Logger *slog.Logger
}

// Sink publishes every event it is given to a RabbitMQ exchange, with
// publisher confirms and the mandatory flag: an outbox.Listener for
// Client.HandleAll. Handle returns nil only once the broker has confirmed
// the message and has not returned it as unroutable, so the outbox marks an
// event DONE only when a queue has it. A Sink is safe for concurrent use;
// its publishes share one channel.
type Sink struct {
	cfg     Config
	key     relay.Topic
	sign    []byte
	timeout time.Duration
	log     *slog.Logger

	mu     sync.Mutex // guards what follows
	conn   *amqp.Connection
	pc     *pubChannel
	closed bool
	loops  sync.WaitGroup
}

var _ outbox.BatchListener = (*Sink)(nil)

// New validates cfg and returns a Sink; with URL it dials first.
// Configuration errors wrap outbox.ErrInvalidConfig.
func New(cfg Config) (*Sink, error) {
	if (cfg.Conn == nil) == (cfg.URL == "") {
		return nil, configErr("set exactly one of URL and Conn")
	}
	if cfg.Conn != nil && cfg.AMQPConfig != nil {
		return nil, configErr("AMQPConfig applies to dialing URL, not to Conn")
	}
	if cfg.Conn != nil && cfg.Conn.IsClosed() {
		return nil, configErr("Conn is closed")
	}
	if cfg.PublishTimeout < 0 {
		return nil, configErr("PublishTimeout must not be negative, got %s", cfg.PublishTimeout)
	}
	if len(cfg.Exchange) > 255 {
		return nil, configErr("exchange name longer than 255 bytes")
	}
	if err := relay.CheckKey("outboxamqp: SigningKey", cfg.SigningKey); err != nil {
		return nil, err
	}
	if cfg.URL != "" {
		if _, err := amqp.ParseURI(cfg.URL); err != nil {
			return nil, configErr("URL: %v", err)
		}
	}
	s := &Sink{cfg: cfg, key: cfg.RoutingKey, sign: cfg.SigningKey, timeout: cfg.PublishTimeout, log: cfg.Logger, conn: cfg.Conn}
	if s.key == nil {
		s.key = relay.ByEventType
	}
	if s.timeout == 0 {
		s.timeout = DefaultPublishTimeout
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.channelLocked(); err != nil {
		if s.conn != nil && s.cfg.URL != "" {
			_ = s.conn.Close()
		}
		return nil, err
	}
	return s, nil
}

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: outboxamqp: "+format, append([]any{outbox.ErrInvalidConfig}, args...)...)
}

// Handle publishes e as relay.AMQP.Message describes it to Exchange with
// the routing key RoutingKey gives: message-id = e.ID(), persistent, the
// content type of JSON payloads, type = the event type, the headers as a
// table, less the envelope's headers RabbitMQ reads as its own ("x-…",
// CC, BCC) and those in the library's Outbox- namespace. A message the
// broker would refuse by closing the channel or the connection (and with
// it every publish in flight) fails its own event with an error wrapping
// relay.ErrInvalidMessage, before it is sent: a header name over 255
// bytes, a Content-Type over 255 bytes, properties and headers larger
// than the connection's frame size (128 KiB by default). It waits for
// the broker's confirmation and fails when the broker
// returns the message (no queue bound for its routing key), nacks it, or
// the channel or connection closes first, after PublishTimeout without a
// confirmation, at once when ctx is done, and when the broker cannot be
// reached (a dial waits at most PublishTimeout). After Close it fails with
// an error wrapping outbox.ErrClosed.
func (s *Sink) Handle(ctx context.Context, e outbox.Envelope) error {
	return s.HandleBatch(ctx, []outbox.Envelope{e})[0]
}

// HandleBatch publishes events as Handle publishes each, one after the
// other on the sink's channel without waiting, then waits for their
// confirmations (deferred publisher confirms): it returns one result per
// event, nil for each message the broker confirmed and did not return,
// Handle's error for each other one (a returned or nacked message fails
// its own event only). PublishTimeout bounds the whole batch. It makes the
// Sink an outbox.BatchListener: the outbox hands it the events queued
// together.
func (s *Sink) HandleBatch(ctx context.Context, events []outbox.Envelope) []error {
	if err := ctx.Err(); err != nil {
		return relay.Failed("outboxamqp", events, err)
	}
	pc, err := s.channel()
	if err != nil {
		return relay.Failed("outboxamqp", events, err)
	}
	pctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	errs := make([]error, len(events))
	pubs := make([]*publish, len(events))
	keys := make([]string, len(events))
	for i, e := range events {
		m, err := relay.AMQP.Message(e, s.key, s.sign)
		if err != nil {
			errs[i] = fmt.Errorf("outboxamqp: event %s: %w", e.ID(), err)
			continue
		}
		keys[i] = m.Topic
		msg := amqp.Publishing{
			MessageId:    m.ID,
			DeliveryMode: amqp.Persistent,
			ContentType:  m.Headers[relay.HeaderContentType],
			Type:         e.Type(),
			Timestamp:    e.OccurredAt(),
			Headers:      make(amqp.Table, len(m.Headers)),
			Body:         m.Payload,
		}
		for k, v := range m.Headers {
			msg.Headers[k] = v
		}
		if err := checkPublishing(msg, pc.frameMax); err != nil {
			errs[i] = s.failure(e, m.Topic, err)
			continue
		}
		if pubs[i], err = pc.publish(pctx, s.cfg.Exchange, m.Topic, msg); err != nil {
			errs[i] = s.failure(e, m.Topic, err)
		}
	}
	for i, p := range pubs {
		if p == nil {
			continue
		}
		select {
		case <-p.done:
			if p.err != nil {
				errs[i] = s.failure(events[i], keys[i], p.err)
			}
		case <-pctx.Done():
			err := pctx.Err()
			if ctx.Err() == nil {
				err = fmt.Errorf("no confirmation within %s: %w", s.timeout, err)
			}
			errs[i] = s.failure(events[i], keys[i], err)
		}
	}
	return errs
}

// failure describes why the publish of event e with routing key key
// failed with err.
func (s *Sink) failure(e outbox.Envelope, key string, err error) error {
	return fmt.Errorf("outboxamqp: event %s to exchange %q, routing key %q: %w", e.ID(), s.cfg.Exchange, key, err)
}

// channel returns the open publishing channel, dialing and opening one if
// the last one closed.
func (s *Sink) channel() (*pubChannel, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.channelLocked()
}

func (s *Sink) channelLocked() (*pubChannel, error) {
	if s.closed {
		return nil, fmt.Errorf("sink %w", outbox.ErrClosed)
	}
	if s.pc != nil && !s.pc.isClosed() {
		return s.pc, nil
	}
	if s.conn == nil || s.conn.IsClosed() {
		if s.cfg.URL == "" {
			return nil, errors.New("the application's connection (Config.Conn) is closed")
		}
		conn, err := s.dial()
		if err != nil {
			return nil, err
		}
		s.conn = conn
	}
	ch, err := s.conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open a channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("put the channel in confirm mode: %w", err)
	}
	s.pc = newPubChannel(ch, s.log, &s.loops)
	s.pc.frameMax = s.conn.Config.FrameSize
	return s.pc, nil
}

// defaultFrameMax is RabbitMQ's frame_max when the connection reports
// none.
const defaultFrameMax = 128 << 10

// checkPublishing returns an error wrapping relay.ErrInvalidMessage if
// RabbitMQ would refuse msg by closing the channel or the connection: a
// short string (header name, content type, message id, type) over 255
// bytes, or a content header frame (the properties with the headers
// table) larger than frameMax, which must fit in one frame.
func checkPublishing(msg amqp.Publishing, frameMax int) error {
	if frameMax <= 0 {
		frameMax = defaultFrameMax
	}
	// Frame (7) and end (1), class, weight, body size, flags (14), delivery
	// mode (1), timestamp (8), the short strings and the table's length.
	size := 7 + 1 + 14 + 1 + 8 + 4
	for name, v := range map[string]string{"Content-Type": msg.ContentType, "message id": msg.MessageId, "type": msg.Type} {
		if len(v) > 255 {
			return fmt.Errorf("%w: the %s has %d bytes, AMQP carries at most 255", relay.ErrInvalidMessage, name, len(v))
		}
		size += 1 + len(v)
	}
	for k, v := range msg.Headers {
		if len(k) > 255 {
			return fmt.Errorf("%w: header name %.40q… has %d bytes, AMQP carries at most 255", relay.ErrInvalidMessage, k, len(k))
		}
		s, _ := v.(string)
		size += 1 + len(k) + 1 + 4 + len(s)
	}
	if size > frameMax {
		return fmt.Errorf("%w: the properties and headers take %d bytes, more than the connection's frame size of %d (RabbitMQ's frame_max)", relay.ErrInvalidMessage, size, frameMax)
	}
	return nil
}

func (s *Sink) dial() (*amqp.Connection, error) {
	var cfg amqp.Config
	if s.cfg.AMQPConfig != nil {
		cfg = *s.cfg.AMQPConfig
	}
	if cfg.Dial == nil {
		cfg.Dial = amqp.DefaultDial(s.timeout)
	}
	if cfg.Properties == nil {
		cfg.Properties = amqp.NewConnectionProperties()
		cfg.Properties.SetClientConnectionName("outbox relay")
	}
	conn, err := amqp.DialConfig(s.cfg.URL, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to the broker: %w", err)
	}
	closes := conn.NotifyClose(make(chan *amqp.Error, 1))
	s.loops.Add(1)
	go func() {
		defer s.loops.Done()
		if err := <-closes; err != nil {
			s.log.Warn("outboxamqp: connection lost; the next publish redials", "error", err)
		}
	}()
	return conn, nil
}

// Close stops the sink: Handle fails from then on. It closes the sink's
// channel and the connection the sink dialed (Config.URL); a connection
// the application passed (Config.Conn) stays open. It waits for the
// sink's goroutines. Close is idempotent.
func (s *Sink) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	var errs []error
	if s.pc != nil && !s.pc.isClosed() {
		if err := s.pc.ch.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
			errs = append(errs, err)
		}
	}
	if s.cfg.URL != "" && s.conn != nil && !s.conn.IsClosed() {
		if err := s.conn.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
			errs = append(errs, err)
		}
	}
	s.mu.Unlock()
	s.loops.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("outboxamqp: close: %w", err)
	}
	return nil
}

// pubChannel is one channel in confirm mode and the publishes waiting for
// their confirmation. One goroutine receives the channel's returns and
// confirmations. Both come from the connection's reader goroutine, in the
// broker's order, and both notification channels are unbuffered: a return
// is received before the confirmation of the same message, and marks the
// oldest unconfirmed publish of its message id as returned.
type pubChannel struct {
	ch       *amqp.Channel
	frameMax int        // the connection's negotiated frame size
	pubMu    sync.Mutex // serialises the delivery tag and the publish
	mu       sync.Mutex // guards what follows; never held across a blocking call
	tags     map[uint64]*publish
	byID     map[string][]*publish // publishes not yet returned, oldest first
	closed   bool
	err      error // why the channel closed
}

type publish struct {
	id       string
	done     chan struct{}
	err      error
	returned *amqp.Return
}

func newPubChannel(ch *amqp.Channel, log *slog.Logger, loops *sync.WaitGroup) *pubChannel {
	pc := &pubChannel{ch: ch, tags: make(map[uint64]*publish), byID: make(map[string][]*publish)}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation))
	returns := ch.NotifyReturn(make(chan amqp.Return))
	closes := ch.NotifyClose(make(chan *amqp.Error, 1))
	loops.Add(1)
	go func() {
		defer loops.Done()
		pc.loop(confirms, returns)
		err := errors.New("channel closed")
		if amqpErr, ok := <-closes; ok && amqpErr != nil {
			err = fmt.Errorf("channel closed: %w", amqpErr)
			log.Warn("outboxamqp: channel closed; the next publish opens a new one", "error", amqpErr)
		}
		pc.fail(err)
	}()
	return pc
}

func (pc *pubChannel) loop(confirms <-chan amqp.Confirmation, returns <-chan amqp.Return) {
	for confirms != nil || returns != nil {
		select {
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			pc.returned(r)
		case c, ok := <-confirms:
			if !ok {
				confirms = nil
				continue
			}
			pc.confirmed(c)
		}
	}
}

func (pc *pubChannel) returned(r amqp.Return) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	ps := pc.byID[r.MessageId]
	if len(ps) == 0 {
		return
	}
	ps[0].returned = &r
	pc.byID[r.MessageId] = ps[1:]
	if len(ps) == 1 {
		delete(pc.byID, r.MessageId)
	}
}

func (pc *pubChannel) confirmed(c amqp.Confirmation) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	p, ok := pc.tags[c.DeliveryTag]
	if !ok {
		return
	}
	delete(pc.tags, c.DeliveryTag)
	pc.forget(p)
	switch {
	case p.returned != nil:
		p.err = fmt.Errorf("returned by the broker: %d %s (no queue is bound for the routing key)", p.returned.ReplyCode, p.returned.ReplyText)
	case !c.Ack:
		p.err = errors.New("nacked by the broker")
	}
	close(p.done)
}

// forget removes p from byID if it is still there (it was not returned).
func (pc *pubChannel) forget(p *publish) {
	ps := pc.byID[p.id]
	for i, q := range ps {
		if q == p {
			ps = append(ps[:i:i], ps[i+1:]...)
			break
		}
	}
	if len(ps) == 0 {
		delete(pc.byID, p.id)
	} else {
		pc.byID[p.id] = ps
	}
}

// fail ends every waiting publish with err and marks the channel closed.
func (pc *pubChannel) fail(err error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.closed, pc.err = true, err
	for tag, p := range pc.tags {
		p.err = err
		close(p.done)
		delete(pc.tags, tag)
	}
	clear(pc.byID)
}

func (pc *pubChannel) isClosed() bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.closed || pc.ch.IsClosed()
}

// publish sends msg and returns the publish to wait on.
func (pc *pubChannel) publish(ctx context.Context, exchange, key string, msg amqp.Publishing) (*publish, error) {
	p := &publish{id: msg.MessageId, done: make(chan struct{})}
	pc.pubMu.Lock()
	defer pc.pubMu.Unlock()
	tag := pc.ch.GetNextPublishSeqNo()
	pc.mu.Lock()
	if pc.closed {
		err := pc.err
		pc.mu.Unlock()
		return nil, err
	}
	pc.tags[tag] = p
	pc.byID[p.id] = append(pc.byID[p.id], p)
	pc.mu.Unlock()
	if err := pc.ch.PublishWithContext(ctx, exchange, key, true, false, msg); err != nil {
		pc.mu.Lock()
		if _, ok := pc.tags[tag]; ok {
			delete(pc.tags, tag)
			pc.forget(p)
		}
		pc.mu.Unlock()
		return nil, err
	}
	return p, nil
}
