package relay

import (
	"errors"
	"fmt"

	outbox "github.com/go-outbox/outbox/core"
)

// Header names of the envelope's metadata on a relayed message. The
// envelope's own headers (for example traceparent) are carried as they
// are, except those in a reserved namespace (see Broker.Reserved): every
// name that starts with "Outbox-", in any case, is the library's.
const (
	HeaderEventID       = "Outbox-Event-Id"
	HeaderEventType     = "Outbox-Event-Type"
	HeaderAggregateType = "Outbox-Aggregate-Type"
	HeaderAggregateID   = "Outbox-Aggregate-Id"
	HeaderTenantID      = "Outbox-Tenant-Id"
	HeaderSchemaVersion = "Outbox-Schema-Version" // decimal, 1 unless the event set another
	HeaderOccurredAt    = "Outbox-Occurred-At"    // RFC 3339 in UTC, to the microsecond
	HeaderSignature     = "Outbox-Signature"      // with a signing key: see Sign
	HeaderContentType   = "Content-Type"          // application/json for JSON payloads
)

// ErrInvalidMessage is wrapped by the error of an event whose message its
// broker would refuse or read differently than meant: a topic outside the
// broker's syntax, a topic part (a tenant id) that is not one part, a
// header the broker cannot carry. Such an event fails alone, before
// anything is sent, and fails again on every attempt until the event or
// the mapping is changed: it ends DEAD after MaxAttempts, where
// Client.Dead shows the reason.
var ErrInvalidMessage = errors.New("relay: the broker would refuse or misread the message")

// Topic maps an event to the topic (NATS subject, Kafka topic, AMQP routing
// key) it is published to, or fails for that event (wrap
// ErrInvalidMessage). The sink checks what it returns against its
// broker's syntax (Broker.CheckTopic).
type Topic func(e outbox.Envelope) (string, error)

// ByEventType is the default Topic: the event type, unchanged.
func ByEventType(e outbox.Envelope) (string, error) { return e.Type(), nil }

// Prefixed returns a Topic that puts prefix before the event type, such as
// Prefixed("orders.") for subjects orders.OrderPlaced, ….
func Prefixed(prefix string) Topic {
	return func(e outbox.Envelope) (string, error) { return prefix + e.Type(), nil }
}

// PerTenant returns a Topic that puts the event's tenant and a dot before
// the topic next gives (ByEventType when nil), such as "acme.OrderPlaced";
// an event without a tenant gets next's topic unchanged. Consumers then
// subscribe per tenant ("acme.>" on NATS, a topic per tenant on Kafka, a
// binding per tenant on RabbitMQ). The tenant id must be one topic part
// (CheckPart): an event whose tenant id is not fails, so that a tenant
// such as "acme.evil" never reaches acme's subjects.
func PerTenant(next Topic) Topic {
	if next == nil {
		next = ByEventType
	}
	return func(e outbox.Envelope) (string, error) {
		t := e.TenantID()
		if t == "" {
			return next(e)
		}
		if err := CheckPart(t); err != nil {
			return "", fmt.Errorf("tenant id: %w", err)
		}
		topic, err := next(e)
		if err != nil {
			return "", err
		}
		return t + "." + topic, nil
	}
}

// MaxPartLen is the longest topic part CheckPart accepts, in bytes.
const MaxPartLen = 64

// CheckPart returns nil if s can be one part of a topic on every broker
// (a NATS subject token, an AMQP routing-key word, a piece of a Kafka topic
// name): 1 to MaxPartLen ASCII letters, digits, '_' and '-'. Anything
// else (a dot, which would make two parts; a wildcard '*', '>' or '#'; a
// space; an empty part) fails with an error wrapping ErrInvalidMessage.
// A Topic that builds topics from event data checks each such part.
func CheckPart(s string) error {
	if s == "" {
		return fmt.Errorf("%w: an empty topic part", ErrInvalidMessage)
	}
	if len(s) > MaxPartLen {
		return fmt.Errorf("%w: topic part %q is longer than %d bytes", ErrInvalidMessage, s, MaxPartLen)
	}
	for i := range len(s) {
		if c := s[i]; !partByte(c) {
			return fmt.Errorf("%w: topic part %q holds %q: a part is made of ASCII letters, digits, '_' and '-'", ErrInvalidMessage, s, c)
		}
	}
	return nil
}

func partByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// Message is what a sink publishes for one event.
type Message struct {
	// ID is the event id.
	ID string
	// Topic is where the message goes.
	Topic string
	// Key is the partitioning key: the event's ordering key (its aggregate
	// type and id, "Order/o-1", unless WithOrderingKey set another), so
	// that the events delivered in order per key stay in one partition
	// and in that order ("" for an event without one).
	Key string
	// Headers are the envelope's headers outside the reserved namespaces
	// plus the outbox metadata headers.
	Headers map[string]string
	// Payload is the event's payload, byte for byte.
	Payload []byte
	// Signature is the HeaderSignature value, "" without a signing key.
	Signature string
}

// DedupID is the id a deduplicating broker (NATS JetStream's Nats-Msg-Id)
// gets: the event id, and with a signature the id and the signature's
// digest, so that a message forged with the event's id but without the
// signing key does not take the place of the real one: the real message
// has another dedup id and is stored beside it, where a consumer that
// verifies signatures keeps the real one. A redelivery of the event has
// the same DedupID.
func (m Message) DedupID() string {
	if m.Signature == "" {
		return m.ID
	}
	return m.ID + "." + m.Signature[len(signaturePrefix):]
}

// Failed returns the results of a batch that failed as a whole before
// anything was published: for each event, err wrapped after
// "<sink>: event <id>: ", as a sink's HandleBatch reports it.
func Failed(sink string, events []outbox.Envelope, err error) []error {
	errs := make([]error, len(events))
	for i, e := range events {
		errs[i] = fmt.Errorf("%s: event %s: %w", sink, e.ID(), err)
	}
	return errs
}
