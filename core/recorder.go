package outbox

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"
)

// Recorder collects the domain events an aggregate raises while it
// changes, until they are pulled to be written in the same transaction as
// the aggregate (Client.WriteFrom). Embed it in an aggregate root, by
// value; its zero value is ready to use, and it is safe for concurrent use.
//
//	type Order struct {
//		outbox.Recorder
//		ID string
//	}
//
//	func (o *Order) AggregateRef() (outbox.AggregateType, string) { return orderAggregate, o.ID }
//
//	func (o *Order) Place() { o.Raise(OrderPlaced{OrderID: o.ID}) }
//
// The domain layer only records; the application layer writes what was
// recorded, after it has saved the aggregate.
type Recorder struct {
	mu     sync.Mutex
	events []any
}

// Raise records events, in order.
func (r *Recorder) Raise(events ...any) {
	r.mu.Lock()
	r.events = append(r.events, events...)
	r.mu.Unlock()
}

// PullEvents returns the recorded events, oldest first, and forgets them.
func (r *Recorder) PullEvents() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	events := r.events
	r.events = nil
	return events
}

// Aggregate is an aggregate root whose raised events Client.WriteFrom
// writes: embed a Recorder and name the aggregate.
type Aggregate interface {
	// AggregateRef names the aggregate: its type and its id.
	AggregateRef() (AggregateType, string)
	// PullEvents returns the events raised since the last call, oldest
	// first, and forgets them.
	PullEvents() []any
}

// A domain event names its type with an EventType method, or through
// Client.RegisterEventType; it may carry its own id (EventID), occurrence
// time (OccurredAt) and payload schema version (SchemaVersion). Its payload
// is its JSON encoding.
type (
	namedEvent    interface{ EventType() string }
	identified    interface{ EventID() string }
	timeStamped   interface{ OccurredAt() time.Time }
	versioned     interface{ SchemaVersion() int }
	eventTypeName struct{ name EventName }
)

// RegisterEventType names the event type of domain events of sample's Go
// type, for events without an EventType method: the name is stored with
// every event, so it must stay the same when the Go type is renamed or
// moved. A second, different name for one Go type fails with an error
// wrapping ErrInvalidConfig.
func (c *Client) RegisterEventType(sample any, name EventType) error {
	if sample == nil || name == nil || name.Name() == "" {
		return configErr("RegisterEventType needs a sample event and a name")
	}
	t := reflect.TypeOf(sample)
	if prev, loaded := c.eventTypes.LoadOrStore(t, eventTypeName{EventName(name.Name())}); loaded && prev.(eventTypeName).name != EventName(name.Name()) {
		return configErr("event type %v is registered as %s already", t, prev.(eventTypeName).name)
	}
	return nil
}

// WriteFrom pulls the events each aggregate raised and writes them, in the
// transaction carried by ctx, in one Write: each becomes an Envelope with
// its type (its EventType method, or its registered name), its id and
// occurrence time (its EventID and OccurredAt methods if it has them; else
// a new ULID and now), its SchemaVersion method's version if it has one,
// the aggregate's type and id, its JSON encoding as
// payload, and the options Config.EnvelopeOptions draws from ctx (trace
// headers, tenant). The pulled events are gone from the aggregates even
// when the write fails: the transaction then fails too, and a retried
// command raises them again.
func (c *Client) WriteFrom(ctx context.Context, aggregates ...Aggregate) ([]string, error) {
	var extra []EnvelopeOption
	if c.cfg.EnvelopeOptions != nil {
		extra = c.cfg.EnvelopeOptions(ctx)
	}
	var events []Envelope
	for _, agg := range aggregates {
		if agg == nil {
			return nil, fmt.Errorf("%w: WriteFrom of a nil aggregate", ErrInvalidEnvelope)
		}
		at, id := agg.AggregateRef()
		for _, ev := range agg.PullEvents() {
			e, err := c.envelopeOf(ev, at, id, extra)
			if err != nil {
				return nil, err
			}
			events = append(events, e)
		}
	}
	if len(events) == 0 {
		return nil, nil
	}
	return c.Write(ctx, events...)
}

// envelopeOf turns one domain event of aggregate (at, id) into an Envelope.
func (c *Client) envelopeOf(ev any, at AggregateType, id string, extra []EnvelopeOption) (Envelope, error) {
	var name EventName
	switch {
	case ev == nil:
		return Envelope{}, fmt.Errorf("%w: a nil domain event was raised", ErrInvalidEnvelope)
	case isNamed(ev):
		name = EventName(ev.(namedEvent).EventType())
	default:
		v, ok := c.eventTypes.Load(reflect.TypeOf(ev))
		if !ok {
			return Envelope{}, fmt.Errorf("%w: domain event %T has no type name: give it an EventType() string method or register one with Client.RegisterEventType", ErrInvalidEnvelope, ev)
		}
		name = v.(eventTypeName).name
	}
	opts := make([]EnvelopeOption, 0, 4+len(extra))
	opts = append(opts, WithAggregate(at, id), WithJSONValue(ev))
	if e, ok := ev.(identified); ok {
		opts = append(opts, WithID(e.EventID()))
	}
	occurred := utcNow(c.cfg.Clock)
	if e, ok := ev.(timeStamped); ok {
		occurred = e.OccurredAt()
	}
	opts = append(opts, WithOccurredAt(occurred))
	if e, ok := ev.(versioned); ok {
		opts = append(opts, WithSchemaVersion(e.SchemaVersion()))
	}
	opts = append(opts, extra...)
	e, err := NewEnvelope(name, opts...)
	if err != nil {
		return Envelope{}, fmt.Errorf("domain event %T: %w", ev, err)
	}
	return e, nil
}

func isNamed(ev any) bool {
	_, ok := ev.(namedEvent)
	return ok
}
