package relay

import (
	"fmt"
	"strconv"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// Header names of the envelope's metadata on a relayed message. The
// envelope's own headers (for example traceparent) are carried as they are.
const (
	HeaderEventID       = "Outbox-Event-Id"
	HeaderEventType     = "Outbox-Event-Type"
	HeaderAggregateType = "Outbox-Aggregate-Type"
	HeaderAggregateID   = "Outbox-Aggregate-Id"
	HeaderTenantID      = "Outbox-Tenant-Id"
	HeaderSchemaVersion = "Outbox-Schema-Version" // decimal, 1 unless the event set another
	HeaderOccurredAt    = "Outbox-Occurred-At"    // RFC 3339 in UTC, to the microsecond
	HeaderContentType   = "Content-Type"          // application/json for JSON payloads
)

// Topic maps an event to the topic (NATS subject, Kafka topic, AMQP routing
// key) it is published to. It must not return "" for an event it is given.
type Topic func(e outbox.Envelope) string

// ByEventType is the default Topic: the event type, unchanged.
func ByEventType(e outbox.Envelope) string { return e.Type() }

// Prefixed returns a Topic that puts prefix before the event type, such as
// Prefixed("orders.") for subjects orders.OrderPlaced, ….
func Prefixed(prefix string) Topic {
	return func(e outbox.Envelope) string { return prefix + e.Type() }
}

// PerTenant returns a Topic that puts the event's tenant and a dot before
// the topic next gives (ByEventType when nil), such as "acme.OrderPlaced";
// an event without a tenant gets next's topic unchanged. Consumers then
// subscribe per tenant ("acme.>" on NATS, a topic per tenant on Kafka, a
// binding per tenant on RabbitMQ). Tenant ids must be valid in the
// broker's topic names (NATS: no dots, spaces or wildcards).
func PerTenant(next Topic) Topic {
	if next == nil {
		next = ByEventType
	}
	return func(e outbox.Envelope) string {
		if t := e.TenantID(); t != "" {
			return t + "." + next(e)
		}
		return next(e)
	}
}

// Message is what a sink publishes for one event.
type Message struct {
	// ID is the event id: the broker's message id, for its deduplication.
	ID string
	// Topic is where the message goes.
	Topic string
	// Key is the partitioning key: the event's ordering key (its aggregate
	// type and id, "Order/o-1", unless WithOrderingKey set another), so
	// that the events delivered in order per key stay in one partition
	// and in that order ("" for an event without one).
	Key string
	// Headers are the envelope's headers plus the outbox metadata headers.
	Headers map[string]string
	// Payload is the event's payload, byte for byte.
	Payload []byte
}

// NewMessage builds the message of e for topic (ByEventType when nil).
func NewMessage(e outbox.Envelope, topic Topic) Message {
	m := NewBareMessage(e, topic)
	m.Headers = make(map[string]string, NumHeaders(e))
	RangeHeaders(e, func(k, v string) { m.Headers[k] = v })
	return m
}

// NewBareMessage builds the message of e for topic (ByEventType when nil)
// without its headers (Headers is nil): for a sink that hands its client
// the headers in a form of its own, filled with RangeHeaders.
func NewBareMessage(e outbox.Envelope, topic Topic) Message {
	if topic == nil {
		topic = ByEventType
	}
	return Message{ID: e.ID(), Topic: topic(e), Key: e.OrderingKey(), Payload: e.Payload()}
}

// NumHeaders returns how many headers RangeHeaders gives e at most: its
// own and the eight metadata headers.
func NumHeaders(e outbox.Envelope) int { return e.NumHeaders() + 8 }

// RangeHeaders calls fn once for each header of e's message, as
// Message.Headers holds them, without building a map: a sink that hands
// its client a list of headers (Kafka) appends them directly. The
// envelope's own headers come first, in no fixed order, then the outbox
// metadata headers, which replace an own header of the same name; an own
// Content-Type is kept.
func RangeHeaders(e outbox.Envelope, fn func(key, value string)) {
	aggID, tenant, at := e.AggregateID(), e.TenantID(), e.OccurredAt()
	json := e.PayloadKind() == outbox.PayloadJSON
	ownType := false
	e.RangeHeaders(func(k, v string) {
		switch k {
		case HeaderEventID, HeaderEventType, HeaderAggregateType, HeaderSchemaVersion:
			return
		case HeaderAggregateID:
			if aggID != "" {
				return
			}
		case HeaderTenantID:
			if tenant != "" {
				return
			}
		case HeaderOccurredAt:
			if !at.IsZero() {
				return
			}
		case HeaderContentType:
			ownType = true
		}
		fn(k, v)
	})
	fn(HeaderEventID, e.ID())
	fn(HeaderEventType, e.Type())
	fn(HeaderAggregateType, e.AggregateType())
	if aggID != "" {
		fn(HeaderAggregateID, aggID)
	}
	if tenant != "" {
		fn(HeaderTenantID, tenant)
	}
	fn(HeaderSchemaVersion, strconv.Itoa(e.SchemaVersion()))
	if !at.IsZero() {
		// To the microsecond, the precision every Store keeps: the hot path
		// hands over the envelope as written, a redelivery the one read back,
		// and both must carry the same header.
		fn(HeaderOccurredAt, at.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano))
	}
	if json && !ownType {
		fn(HeaderContentType, "application/json")
	}
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
