package relay

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	outbox "github.com/go-outbox/outbox/core"
)

// Broker is what one broker reads as its own in a message: the syntax of
// its topics and the header names it takes as control. A sink builds its
// messages through its Broker (NATS, AMQP, Kafka), so that event data
// never becomes a control header, a wildcard or another topic than meant.
// The zero Broker knows only the library's rules: non-empty topics and
// the reserved "Outbox-" namespace.
type Broker struct {
	name     string
	reserved func(header string) bool
	check    func(topic string) error
}

// The brokers of this repository's sinks.
var (
	// NATS: subjects are tokens of printable ASCII or UTF-8 without
	// spaces, separated by single dots, without the wildcards '*' and '>',
	// at most MaxNATSSubjectLen bytes; headers whose name starts with
	// "Nats-", in any case, are JetStream's (Nats-Msg-Id, Nats-Rollup,
	// Nats-Expected-*, Nats-TTL, …).
	NATS = Broker{name: "NATS", reserved: natsReserved, check: natsSubject}
	// AMQP (RabbitMQ): routing keys of at most 255 bytes of UTF-8 text;
	// headers whose name starts with "x-" (RabbitMQ's extensions: x-death,
	// x-delay, x-stream-filter-value, …) and the sender-selected
	// distribution headers CC and BCC are the broker's. RabbitMQ reads
	// header names case-sensitively, and so does the sink: X-Request-Id
	// is an application's header and is carried.
	AMQP = Broker{name: "AMQP", reserved: amqpReserved, check: amqpRoutingKey}
	// Kafka: topic names of 1 to 249 ASCII letters, digits, '.', '_' and
	// '-', other than "." and ".."; the brokers read no record header.
	Kafka = Broker{name: "Kafka", check: kafkaTopic}
)

// MaxNATSSubjectLen bounds a NATS subject, well inside the server's
// control line (4 KiB by default, max_control_line), whose overflow closes
// the connection and with it every publish in flight.
const MaxNATSSubjectLen = 1024

// Reserved reports whether a header of the envelope named header is left
// out of b's messages: the library's "Outbox-" namespace (any case) and
// b's own control namespace. The sink owns those names: an envelope's
// header in them is dropped, never sent, so that it can neither steer
// the broker nor pass for the library's metadata.
func (b Broker) Reserved(header string) bool {
	return hasPrefixFold(header, "Outbox-") || b.reserved != nil && b.reserved(header)
}

// CheckTopic returns nil if b takes topic as the plain name it is, and
// otherwise an error wrapping ErrInvalidMessage that says why.
func (b Broker) CheckTopic(topic string) error {
	if topic == "" {
		return fmt.Errorf("%w: the topic mapping returned no topic", ErrInvalidMessage)
	}
	if b.check == nil {
		return nil
	}
	if err := b.check(topic); err != nil {
		return fmt.Errorf("%w: %s topic %q: %s", ErrInvalidMessage, b.name, topic, err.Error())
	}
	return nil
}

// Topic returns the topic of e that topic (ByEventType when nil) gives,
// checked by CheckTopic.
func (b Broker) Topic(e outbox.Envelope, topic Topic) (string, error) {
	if topic == nil {
		topic = ByEventType
	}
	t, err := topic(e)
	if err != nil {
		return "", err
	}
	if err := b.CheckTopic(t); err != nil {
		return "", err
	}
	return t, nil
}

// Message builds the message of e for topic (ByEventType when nil),
// signed with key unless key is empty (see Sign). It fails with an error
// wrapping ErrInvalidMessage for a topic b would refuse or misread.
func (b Broker) Message(e outbox.Envelope, topic Topic, key []byte) (Message, error) {
	m, err := b.BareMessage(e, topic, key)
	if err != nil {
		return m, err
	}
	m.Headers = make(map[string]string, b.NumHeaders(e))
	b.RangeHeaders(e, m.Signature, func(k, v string) { m.Headers[k] = v })
	return m, nil
}

// BareMessage is Message without the headers (Headers is nil): for a sink
// that hands its client the headers in a form of its own, filled with
// RangeHeaders.
func (b Broker) BareMessage(e outbox.Envelope, topic Topic, key []byte) (Message, error) {
	t, err := b.Topic(e, topic)
	if err != nil {
		return Message{}, err
	}
	m := Message{ID: e.ID(), Topic: t, Key: e.OrderingKey(), Payload: e.Payload()}
	if len(key) > 0 {
		m.Signature = Sign(key, e)
	}
	return m, nil
}

// NumHeaders returns how many headers RangeHeaders gives e at most: its
// own and the nine metadata headers.
func (b Broker) NumHeaders(e outbox.Envelope) int { return e.NumHeaders() + 9 }

// RangeHeaders calls fn once for each header of e's message, as
// Message.Headers holds them, without building a map: a sink that hands
// its client a list of headers (Kafka) appends them directly. The
// envelope's own headers come first, in no fixed order, less those b
// reserves (Reserved); an own Content-Type is kept. Then come the outbox
// metadata headers, and HeaderSignature with signature unless it is "".
func (b Broker) RangeHeaders(e outbox.Envelope, signature string, fn func(key, value string)) {
	json := e.PayloadKind() == outbox.PayloadJSON
	ownType := false
	e.RangeHeaders(func(k, v string) {
		if b.Reserved(k) {
			return
		}
		if k == HeaderContentType {
			ownType = true
		}
		fn(k, v)
	})
	rangeMetadata(e, fn)
	if signature != "" {
		fn(HeaderSignature, signature)
	}
	if json && !ownType {
		fn(HeaderContentType, "application/json")
	}
}

// rangeMetadata calls fn with each outbox metadata header of e, in the
// order Sign binds them.
func rangeMetadata(e outbox.Envelope, fn func(key, value string)) {
	fn(HeaderEventID, e.ID())
	fn(HeaderEventType, e.Type())
	fn(HeaderAggregateType, e.AggregateType())
	if id := e.AggregateID(); id != "" {
		fn(HeaderAggregateID, id)
	}
	if t := e.TenantID(); t != "" {
		fn(HeaderTenantID, t)
	}
	fn(HeaderSchemaVersion, strconv.Itoa(e.SchemaVersion()))
	if at := e.OccurredAt(); !at.IsZero() {
		// To the microsecond, the precision every Store keeps: the hot path
		// hands over the envelope as written, a redelivery the one read back,
		// and both must carry the same header.
		fn(HeaderOccurredAt, at.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano))
	}
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func natsReserved(h string) bool { return hasPrefixFold(h, "Nats-") }

func amqpReserved(h string) bool {
	return strings.HasPrefix(h, "x-") || h == "CC" || h == "BCC"
}

func natsSubject(s string) error {
	if len(s) > MaxNATSSubjectLen {
		return fmt.Errorf("longer than %d bytes", MaxNATSSubjectLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("not UTF-8")
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" {
			return fmt.Errorf("an empty token (a leading, trailing or double dot)")
		}
		if i := strings.IndexFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '*' || r == '>' }); i >= 0 {
			return fmt.Errorf("token %q holds %q (spaces, control characters and the wildcards '*' and '>' are not plain subject text)", tok, tok[i:i+1])
		}
	}
	return nil
}

func amqpRoutingKey(s string) error {
	if len(s) > 255 {
		return fmt.Errorf("longer than 255 bytes")
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("not UTF-8")
	}
	return nil
}

func kafkaTopic(s string) error {
	if len(s) > 249 {
		return fmt.Errorf("longer than 249 characters")
	}
	if s == "." || s == ".." {
		return fmt.Errorf("not a topic name")
	}
	for i := range len(s) {
		if c := s[i]; !partByte(c) && c != '.' {
			return fmt.Errorf("holds %q: a topic name is made of ASCII letters, digits, '.', '_' and '-'", c)
		}
	}
	return nil
}
