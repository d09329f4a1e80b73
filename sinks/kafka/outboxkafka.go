package outboxkafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/relay"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultPublishTimeout bounds one publish when Config.PublishTimeout is 0.
const DefaultPublishTimeout = 5 * time.Second

// Config configures a Sink. Set exactly one of Brokers and Client.
type Config struct {
	// Brokers are the seed brokers of the cluster the sink makes its own
	// client for (host:port each). Close closes that client.
	Brokers []string
	// Options apply to the sink's own client, after its defaults
	// (kgo.SeedBrokers(Brokers...), kgo.ProducerLinger(0): Handle and
	// HandleBatch wait for their records, which they produce at once, so
	// lingering would only add latency), so they win.
	// Idempotent writes, franz-go's default, must stay on.
	Options []kgo.Opt
	// Client is a client the application made and closes itself. It must
	// write idempotently (franz-go's default; New refuses a client with
	// kgo.DisableIdempotentWrite) and not be transactional.
	Client *kgo.Client

	// Topic maps an event to the topic it is produced to (default
	// relay.ByEventType). The topics must exist, unless the cluster and
	// the client allow creating them. A topic name outside Kafka's syntax
	// (relay.Kafka.CheckTopic) fails its event with
	// relay.ErrInvalidMessage, before it is produced.
	Topic relay.Topic
	// SigningKey, when set (at least relay.MinKeyLen random bytes, kept
	// secret), signs every record (relay.HeaderSignature, see
	// relay.Sign), so that a consumer that verifies (the inbox's
	// VerifyKeys) refuses a record produced with an event's id by anyone
	// without the key.
	SigningKey []byte
	// PublishTimeout bounds one publish, until the partition leader's
	// acknowledgement, and one batch of them (HandleBatch) (default
	// DefaultPublishTimeout). A shorter deadline of the listener's context
	// wins.
	PublishTimeout time.Duration
}

// Sink produces every event it is given to Kafka: an outbox.Listener for
// Client.HandleAll. The record key is the event's ordering key (aggregate
// type and id unless WithOrderingKey set another), so all events of one
// key go to one partition, in the order they are handed over. Handle returns once that record's produce has an outcome:
// nil when the brokers acknowledged it (acks=all), else its error, so the
// outbox marks an event DONE only when Kafka has it. A Sink is safe for
// concurrent use.
type Sink struct {
	cl      *kgo.Client
	topic   relay.Topic
	key     []byte
	timeout time.Duration
	own     bool
	closed  atomic.Bool
}

var _ outbox.BatchListener = (*Sink)(nil)

// New validates cfg and returns a Sink; with Brokers it makes its own
// client, which connects on the first publish. Configuration errors wrap
// outbox.ErrInvalidConfig.
func New(cfg Config) (*Sink, error) {
	if (cfg.Client == nil) == (len(cfg.Brokers) == 0) {
		return nil, configErr("set exactly one of Brokers and Client")
	}
	if cfg.Client != nil && len(cfg.Options) > 0 {
		return nil, configErr("Options apply to the sink's own client (Brokers), not to Client")
	}
	if cfg.PublishTimeout < 0 {
		return nil, configErr("PublishTimeout must not be negative, got %s", cfg.PublishTimeout)
	}
	if err := relay.CheckKey("outboxkafka: SigningKey", cfg.SigningKey); err != nil {
		return nil, err
	}
	s := &Sink{cl: cfg.Client, topic: cfg.Topic, key: cfg.SigningKey, timeout: cfg.PublishTimeout}
	if s.topic == nil {
		s.topic = relay.ByEventType
	}
	if s.timeout == 0 {
		s.timeout = DefaultPublishTimeout
	}
	if cfg.Client == nil {
		opts := append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.ProducerLinger(0)}, cfg.Options...)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, configErr("client: %v", err)
		}
		s.cl, s.own = cl, true
	}
	if off, _ := s.cl.OptValue(kgo.DisableIdempotentWrite).(bool); off {
		return nil, s.refuse("the client must write idempotently (drop kgo.DisableIdempotentWrite)")
	}
	if id, _ := s.cl.OptValue(kgo.TransactionalID).(string); id != "" {
		return nil, s.refuse("the client must not be transactional")
	}
	return s, nil
}

// refuse closes the sink's own client and returns a configuration error.
func (s *Sink) refuse(format string, args ...any) error {
	if s.own {
		s.cl.Close()
	}
	return configErr(format, args...)
}

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: outboxkafka: "+format, append([]any{outbox.ErrInvalidConfig}, args...)...)
}

// Record returns the record Handle produces for e with topic (relay.ByEventType
// when nil), signed with key unless it is empty: relay.Kafka.Message's
// topic and key (the ordering key; none for an event without one), the
// headers sorted by name (the envelope's own less those in the library's
// Outbox- namespace: Kafka's brokers read no header), the payload as
// value. It fails with an error wrapping relay.ErrInvalidMessage for a
// topic outside Kafka's syntax.
func Record(e outbox.Envelope, topic relay.Topic, key []byte) (*kgo.Record, error) {
	m, err := relay.Kafka.BareMessage(e, topic, key)
	if err != nil {
		return nil, err
	}
	r := &kgo.Record{Topic: m.Topic, Value: m.Payload, Headers: make([]kgo.RecordHeader, 0, relay.Kafka.NumHeaders(e))}
	if m.Key != "" {
		r.Key = []byte(m.Key)
	}
	// Straight into the record, without relay.Kafka.Message's map: this is
	// the relay's path for every event.
	relay.Kafka.RangeHeaders(e, m.Signature, func(k, v string) { r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)}) })
	slices.SortFunc(r.Headers, func(a, b kgo.RecordHeader) int { return strings.Compare(a.Key, b.Key) })
	return r, nil
}

// Handle produces e's record (see Record) and waits for its outcome. It
// fails with that record's error (an unknown topic, a record too large,
// …), after PublishTimeout without an acknowledgement, and at once when
// ctx is done. A record that timed out may still be written later by the
// client (an idempotent producer cannot take back a request it sent): the
// outbox then delivers the event again, as a second record with the same
// Outbox-Event-Id. After Close, Handle fails with an error wrapping
// outbox.ErrClosed.
func (s *Sink) Handle(ctx context.Context, e outbox.Envelope) error {
	return s.HandleBatch(ctx, []outbox.Envelope{e})[0]
}

// HandleBatch produces the records of events (see Record) in their order,
// each with a promise, and waits for every outcome: it returns one result
// per event, nil for each record the brokers acknowledged and Handle's
// error for each other one (a topic that does not exist, a record too
// large: those events only). PublishTimeout bounds the whole batch. It
// makes the Sink an outbox.BatchListener: the outbox hands it the events
// queued together, and the client sends them in as few requests as it
// can.
func (s *Sink) HandleBatch(ctx context.Context, events []outbox.Envelope) []error {
	if s.closed.Load() {
		return relay.Failed("outboxkafka", events, fmt.Errorf("sink %w", outbox.ErrClosed))
	}
	if err := ctx.Err(); err != nil {
		return relay.Failed("outboxkafka", events, err)
	}
	pctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	errs := make([]error, len(events))
	// The promises run on the client's goroutines, possibly after
	// HandleBatch returned: they report to p, which outlives the wait.
	p := &promises{errs: make([]error, len(events)), outcome: make([]bool, len(events)), all: make(chan struct{})}
	records := make([]*kgo.Record, len(events))
	for i, e := range events {
		r, err := Record(e, s.topic, s.key)
		if err != nil {
			p.errs[i], p.outcome[i] = err, true
			records[i] = &kgo.Record{}
			continue
		}
		records[i] = r
		p.pending++
	}
	if p.pending == 0 {
		close(p.all)
	}
	for i, r := range records {
		if !p.outcome[i] {
			s.cl.Produce(pctx, r, func(_ *kgo.Record, err error) { p.set(i, err) })
		}
	}
	select {
	case <-p.all:
	case <-pctx.Done():
	}
	for i, err := range p.results(pctx.Err()) {
		if err != nil {
			errs[i] = s.failure(ctx, events[i], records[i].Topic, err)
		}
	}
	return errs
}

// promises collects the outcomes of a batch's records.
type promises struct {
	mu      sync.Mutex
	errs    []error
	outcome []bool // the record's promise ran (or it was never produced)
	pending int
	all     chan struct{} // closed when pending reaches 0
}

func (p *promises) set(i int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.outcome[i] {
		return
	}
	p.errs[i], p.outcome[i] = err, true
	if p.pending--; p.pending == 0 {
		close(p.all)
	}
}

// results returns each record's outcome so far, timeout for each record
// without one; outcomes that come later are dropped.
func (p *promises) results(timeout error) []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]error, len(p.errs))
	for i, done := range p.outcome {
		if !done {
			p.errs[i], p.outcome[i] = timeout, true
		}
		out[i] = p.errs[i]
	}
	return out
}

// failure describes why event e's record to topic failed with err; ctx is
// the caller's.
func (s *Sink) failure(ctx context.Context, e outbox.Envelope, topic string, err error) error {
	switch {
	case topic == "":
		return fmt.Errorf("outboxkafka: event %s: %w", e.ID(), err)
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return fmt.Errorf("outboxkafka: event %s: topic %q does not exist: %w", e.ID(), topic, err)
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return fmt.Errorf("outboxkafka: event %s to topic %q: no acknowledgement within %s: %w", e.ID(), topic, s.timeout, err)
	case errors.Is(err, kgo.ErrClientClosed) && s.closed.Load():
		return fmt.Errorf("outboxkafka: event %s: sink %w", e.ID(), outbox.ErrClosed)
	}
	return fmt.Errorf("outboxkafka: event %s to topic %q: %w", e.ID(), topic, err)
}

// Close stops the sink: Handle fails from then on. It closes the client
// the sink made (Config.Brokers), failing what it still buffers; a client
// the application passed (Config.Client) stays open. Close is idempotent.
func (s *Sink) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.own {
		s.cl.Close()
	}
	return nil
}
