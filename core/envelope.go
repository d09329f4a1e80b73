package outbox

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxPayloadSize is the largest payload an Envelope accepts: 1 MiB.
const MaxPayloadSize = 1 << 20

// Length limits of the envelope's string fields, matching the outbox table's columns.
const (
	MaxEventIDLen       = 36
	MaxEventTypeLen     = 128
	MaxAggregateTypeLen = 64
	MaxAggregateIDLen   = 128
	// MaxTenantIDLen is the longest tenant id, in bytes. A tenant id must
	// also be valid UTF-8 without control characters, and must not start
	// or end with white space (it is compared exactly, and "acme " is
	// not "acme").
	MaxTenantIDLen = 64
	// MaxHeaders is the most headers an Envelope carries.
	MaxHeaders = 64
	// MaxHeaderNameLen is the longest header name, in bytes: the longest
	// field name AMQP carries, so that every header can reach every
	// broker under its own name.
	MaxHeaderNameLen = 255
	// MaxHeadersSize is the most bytes an Envelope's header names and
	// values take together (64 KiB): headers are metadata — a trace
	// context, a correlation id — stored in every row and sent with every
	// message; data belongs in the payload (MaxPayloadSize).
	MaxHeadersSize = 64 << 10
	// MaxOrderingKeyLen is the longest ordering key (see WithOrderingKey).
	MaxOrderingKeyLen = 255
	// MaxSchemaVersion is the highest schema version (the column is a
	// 32-bit integer on every database).
	MaxSchemaVersion = 1<<31 - 1
)

// GlobalAggregate is the aggregate type of events that do not name one.
const GlobalAggregate = AggregateName("__GLOBAL__")

// EventType names a kind of event. Any type with a Name method qualifies, so
// an application can declare its events as constants of its own string type;
// EventName adapts a plain string.
type EventType interface{ Name() string }

// AggregateType names the kind of entity an event is about. Any type with a
// Name method qualifies; AggregateName adapts a plain string.
type AggregateType interface{ Name() string }

// EventName is an EventType given by its name, for dynamic event types.
type EventName string

// Name returns the event type's name.
func (n EventName) Name() string { return string(n) }

// AggregateName is an AggregateType given by its name, for dynamic aggregate types.
type AggregateName string

// Name returns the aggregate type's name.
func (n AggregateName) Name() string { return string(n) }

// PayloadKind tells how an envelope's payload is encoded.
type PayloadKind uint8

const (
	// PayloadJSON is a UTF-8 JSON document, stored so that it stays readable in SQL.
	PayloadJSON PayloadKind = iota + 1
	// PayloadBytes is an opaque byte string (protobuf, Avro, ...).
	PayloadBytes
)

// String returns "json" or "bytes".
func (k PayloadKind) String() string {
	switch k {
	case PayloadJSON:
		return "json"
	case PayloadBytes:
		return "bytes"
	}
	return fmt.Sprintf("PayloadKind(%d)", uint8(k))
}

// Envelope is one immutable event: what happened, to which aggregate, when,
// and its payload. Build one with NewEnvelope; the zero Envelope is invalid.
// An Envelope shares nothing mutable with its caller: payload bytes and
// headers are copied in and out.
type Envelope struct {
	id            string
	eventType     string
	aggregateType string
	aggregateID   string
	tenantID      string
	schemaVersion int // 0: unset, read as 1
	occurredAt    time.Time
	availableAt   time.Time
	headers       map[string]string
	payload       string // strings are immutable: no copy needed to hand it out
	kind          PayloadKind
	// orderKey is the ordering key WithOrderingKey set (orderKeySet), or
	// the one read back from the table; ordered says that a store keeps
	// it (see Ordered).
	orderKey    string
	orderKeySet bool
	ordered     bool
	// checked says that checkWritable passed on this value (NewEnvelope,
	// WithAddedHeaders): a write need not check it again. An Envelope's
	// tenant and headers change only through those, which check again.
	checked bool
}

// ID is the event id: a monotonic ULID unless WithID set another.
func (e Envelope) ID() string { return e.id }

// Type is the event type's name.
func (e Envelope) Type() string { return e.eventType }

// AggregateType is the aggregate type's name (GlobalAggregate when unset).
func (e Envelope) AggregateType() string { return e.aggregateType }

// AggregateID is the id of the aggregate instance, or "".
func (e Envelope) AggregateID() string { return e.aggregateID }

// TenantID is the tenant the event belongs to, or "". The framework carries
// it through and never filters on it.
func (e Envelope) TenantID() string { return e.tenantID }

// SchemaVersion is the version of the payload's schema for its event type:
// the one WithSchemaVersion set, else 1. The outbox stores it and hands it
// to listeners and relays unchanged; what a version means is the event
// type's business.
func (e Envelope) SchemaVersion() int { return max(e.schemaVersion, 1) }

// OccurredAt is when the event happened (UTC).
func (e Envelope) OccurredAt() time.Time { return e.occurredAt }

// AvailableAt is the earliest time the event may be delivered; the zero time
// means "as soon as it is committed". Delayed events bypass the hot path and
// are delivered by the poller.
func (e Envelope) AvailableAt() time.Time { return e.availableAt }

// Delayed reports whether the event carries an AvailableAt. Delayed events
// are never claimed at insert and never take the hot path: the poller
// delivers them once due.
func (e Envelope) Delayed() bool { return !e.availableAt.IsZero() }

// OrderingKey is the key that orders the event among the other events of
// its key when a Client with Config.Ordered writes it: the key
// WithOrderingKey set, else its aggregate type and aggregate id joined by
// a slash ("Order/o-1"), or "" for an event without an aggregate id, which
// is delivered unordered.
func (e Envelope) OrderingKey() string {
	switch {
	case e.orderKeySet:
		return e.orderKey
	case e.aggregateID != "":
		return e.aggregateType + "/" + e.aggregateID
	}
	return ""
}

// Ordered reports whether the event is stored with its OrderingKey and so
// delivered in order with the other events of that key: the writer of a
// Client with Config.Ordered marks the events it writes that have a key
// (the writer of a Client without it unmarks them), WithOrderingKey marks
// its event, and an event read back from the table is ordered if it was
// stored so. Stores keep the key of ordered events only.
func (e Envelope) Ordered() bool { return e.ordered && e.OrderingKey() != "" }

// inOrder returns e marked as ordered (or not) by the writing Client. An
// event written unordered keeps the key WithOrderingKey set in its header
// HeaderOrderingKey (stores keep the key of ordered events only), so that
// it has the same OrderingKey — a broker's message key, a partition —
// when it is read back for a retry as when it was written.
func (e Envelope) inOrder(ordered bool) Envelope {
	e.ordered = ordered && e.OrderingKey() != ""
	if !e.ordered && e.orderKeySet {
		if v, ok := e.headers[HeaderOrderingKey]; !ok || v != e.orderKey {
			e.headers = maps.Clone(e.headers)
			if e.headers == nil {
				e.headers = make(map[string]string, 1)
			}
			e.headers[HeaderOrderingKey] = e.orderKey
		}
	}
	return e
}

// Headers the outbox keeps in an event's headers (the relay package
// reserves every name that starts with "Outbox-": it sends none of them
// as they are).
const (
	// HeaderOrderingKey holds the key WithOrderingKey set on an event
	// written unordered (see Envelope.OrderingKey).
	HeaderOrderingKey = "Outbox-Ordering-Key"
	// HeaderExpiresAt holds the time after which the event is not
	// delivered (see WithExpiresAt), in RFC 3339 with nanoseconds, UTC.
	HeaderExpiresAt = "Outbox-Expires-At"
)

// ExpiresAt is the time after which the event is never delivered
// (WithExpiresAt, WithTTL), or the zero time if it does not expire. A
// malformed HeaderExpiresAt (written by another program) reads as none.
func (e Envelope) ExpiresAt() time.Time {
	v, ok := e.headers[HeaderExpiresAt]
	if !ok {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// Expired reports whether the event expired at now (see ExpiresAt).
func (e Envelope) Expired(now time.Time) bool {
	at := e.ExpiresAt()
	return !at.IsZero() && !now.Before(at)
}

// Header returns the value of header key and whether it is set.
func (e Envelope) Header(key string) (string, bool) {
	v, ok := e.headers[key]
	return v, ok
}

// Headers returns a copy of the headers (never nil).
func (e Envelope) Headers() map[string]string {
	if len(e.headers) == 0 {
		return map[string]string{}
	}
	return maps.Clone(e.headers)
}

// NumHeaders returns how many headers the envelope carries.
func (e Envelope) NumHeaders() int { return len(e.headers) }

// RangeHeaders calls fn for each header without copying the map.
func (e Envelope) RangeHeaders(fn func(key, value string)) {
	for k, v := range e.headers {
		fn(k, v)
	}
}

// PayloadKind tells whether the payload is JSON or opaque bytes.
func (e Envelope) PayloadKind() PayloadKind { return e.kind }

// Payload returns a copy of the payload bytes.
func (e Envelope) Payload() []byte { return []byte(e.payload) }

// PayloadString returns the payload without copying it.
func (e Envelope) PayloadString() string { return e.payload }

// DecodeJSON unmarshals a JSON payload into v.
func (e Envelope) DecodeJSON(v any) error {
	if e.kind != PayloadJSON {
		return fmt.Errorf("%w: payload of event %s is %s, not json", ErrInvalidEnvelope, e.id, e.kind)
	}
	return json.Unmarshal([]byte(e.payload), v)
}

// IsZero reports whether e is the zero Envelope.
func (e Envelope) IsZero() bool { return e.id == "" }

// EnvelopeOption sets an optional field of an Envelope under construction.
type EnvelopeOption func(*envelopeBuilder)

type envelopeBuilder struct {
	env      Envelope
	payloads int
	jsonVal  any
	hasVal   bool
	ttl      time.Duration // WithTTL: set HeaderExpiresAt once occurredAt is known
	err      error
}

func (b *envelopeBuilder) fail(format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("%w: "+format, append([]any{ErrInvalidEnvelope}, args...)...)
	}
}

// WithID sets the event id (at most 36 characters) instead of a generated ULID.
func WithID(id string) EnvelopeOption {
	return func(b *envelopeBuilder) {
		if id == "" || len(id) > MaxEventIDLen {
			b.fail("event id must be 1..%d characters, got %d", MaxEventIDLen, len(id))
		}
		b.env.id = id
	}
}

// WithAggregate sets the aggregate type and the aggregate instance id.
func WithAggregate(t AggregateType, id string) EnvelopeOption {
	return func(b *envelopeBuilder) {
		if t == nil {
			b.fail("aggregate type is nil")
			return
		}
		b.env.aggregateType = t.Name()
		b.env.aggregateID = id
	}
}

// WithOrderingKey sets the key that orders the event (at most
// MaxOrderingKeyLen characters) instead of its aggregate type and id, for
// example to order the events of several aggregates as one, or "" to
// deliver an event of an aggregate unordered. It takes effect when a Client
// with Config.Ordered writes the event (see Envelope.Ordered).
func WithOrderingKey(key string) EnvelopeOption {
	return func(b *envelopeBuilder) {
		if len(key) > MaxOrderingKeyLen {
			b.fail("ordering key longer than %d characters", MaxOrderingKeyLen)
		}
		b.env.orderKey, b.env.orderKeySet, b.env.ordered = key, true, key != ""
	}
}

// WithTenant sets the tenant id: at most MaxTenantIDLen bytes of UTF-8
// text without control characters or white space at either end.
func WithTenant(tenantID string) EnvelopeOption {
	return func(b *envelopeBuilder) { b.env.tenantID = tenantID }
}

// WithSchemaVersion sets the version of the payload's schema (at least 1;
// default 1), so that consumers can tell old payloads of an event type from
// new ones while both are in flight. Raise it when the payload changes in a
// way its readers must know about.
func WithSchemaVersion(v int) EnvelopeOption {
	return func(b *envelopeBuilder) {
		if v < 1 || v > MaxSchemaVersion {
			b.fail("schema version must be 1..%d, got %d", MaxSchemaVersion, v)
		}
		b.env.schemaVersion = v
	}
}

// WithOccurredAt sets when the event happened (default: now).
func WithOccurredAt(t time.Time) EnvelopeOption {
	return func(b *envelopeBuilder) { b.env.occurredAt = t.UTC() }
}

// WithAvailableAt delays delivery until t.
func WithAvailableAt(t time.Time) EnvelopeOption {
	return func(b *envelopeBuilder) { b.env.availableAt = t.UTC() }
}

// WithExpiresAt makes the event expire at t: from then on it is never
// delivered, and a Client that claims it moves it to DEAD with ErrExpired,
// using no attempt. The time is kept in the header HeaderExpiresAt.
func WithExpiresAt(t time.Time) EnvelopeOption {
	return func(b *envelopeBuilder) {
		if t.IsZero() {
			b.fail("expiry time is zero")
			return
		}
		WithHeader(HeaderExpiresAt, t.UTC().Format(time.RFC3339Nano))(b)
	}
}

// WithTTL makes the event expire ttl after it occurred (WithOccurredAt,
// else when NewEnvelope builds it); see WithExpiresAt. ttl must be
// positive.
func WithTTL(ttl time.Duration) EnvelopeOption {
	return func(b *envelopeBuilder) {
		if ttl <= 0 {
			b.fail("time to live must be positive, got %s", ttl)
			return
		}
		b.ttl = ttl
	}
}

// WithHeader adds one header; the key must not be empty. An envelope
// carries at most MaxHeaders headers, with names of at most
// MaxHeaderNameLen bytes, taking at most MaxHeadersSize bytes in all.
func WithHeader(key, value string) EnvelopeOption {
	return func(b *envelopeBuilder) {
		if key == "" {
			b.fail("header key is empty")
			return
		}
		if b.env.headers == nil {
			b.env.headers = make(map[string]string)
		}
		b.env.headers[key] = value
	}
}

// WithHeaders adds every entry of h (copied); no key may be empty.
func WithHeaders(h map[string]string) EnvelopeOption {
	return func(b *envelopeBuilder) {
		for k, v := range h {
			WithHeader(k, v)(b)
		}
	}
}

// WithJSON sets a JSON payload given as raw JSON text (validated).
func WithJSON(raw []byte) EnvelopeOption {
	return func(b *envelopeBuilder) {
		b.payloads++
		b.env.kind = PayloadJSON
		b.env.payload = string(raw)
	}
}

// WithJSONValue sets a JSON payload by marshalling v with encoding/json.
func WithJSONValue(v any) EnvelopeOption {
	return func(b *envelopeBuilder) {
		b.payloads++
		b.env.kind = PayloadJSON
		b.jsonVal, b.hasVal = v, true
	}
}

// WithBytes sets an opaque binary payload (copied).
func WithBytes(p []byte) EnvelopeOption {
	return func(b *envelopeBuilder) {
		b.payloads++
		b.env.kind = PayloadBytes
		b.env.payload = string(p)
	}
}

// NewEnvelope builds an Envelope of the given type. Exactly one payload
// option (WithJSON, WithJSONValue or WithBytes) is required; a JSON payload
// must be valid UTF-8 JSON. Text fields and headers must be valid UTF-8
// without NUL characters, so every database stores them unchanged. Errors
// wrap ErrInvalidEnvelope, or ErrPayloadTooLarge for payloads over
// MaxPayloadSize.
func NewEnvelope(t EventType, opts ...EnvelopeOption) (Envelope, error) {
	if t == nil {
		return Envelope{}, fmt.Errorf("%w: event type is nil", ErrInvalidEnvelope)
	}
	b := envelopeBuilder{env: Envelope{eventType: t.Name(), aggregateType: string(GlobalAggregate)}}
	for _, o := range opts {
		o(&b)
	}
	if b.err != nil {
		return Envelope{}, b.err
	}
	e := &b.env
	switch {
	case e.eventType == "" || len(e.eventType) > MaxEventTypeLen:
		return Envelope{}, fmt.Errorf("%w: event type must be 1..%d characters, got %q", ErrInvalidEnvelope, MaxEventTypeLen, e.eventType)
	case e.aggregateType == "" || len(e.aggregateType) > MaxAggregateTypeLen:
		return Envelope{}, fmt.Errorf("%w: aggregate type must be 1..%d characters, got %q", ErrInvalidEnvelope, MaxAggregateTypeLen, e.aggregateType)
	case len(e.aggregateID) > MaxAggregateIDLen:
		return Envelope{}, fmt.Errorf("%w: aggregate id longer than %d characters", ErrInvalidEnvelope, MaxAggregateIDLen)
	case b.payloads == 0:
		return Envelope{}, fmt.Errorf("%w: event %q has no payload: use WithJSON, WithJSONValue or WithBytes", ErrInvalidEnvelope, e.eventType)
	case b.payloads > 1:
		return Envelope{}, fmt.Errorf("%w: event %q has %d payloads, exactly one is allowed", ErrInvalidEnvelope, e.eventType, b.payloads)
	}
	if b.hasVal {
		raw, err := json.Marshal(b.jsonVal)
		if err != nil {
			return Envelope{}, fmt.Errorf("%w: marshal payload of %q: %w", ErrInvalidEnvelope, e.eventType, err)
		}
		e.payload = string(raw)
	}
	for _, f := range [...][2]string{{"event type", e.eventType}, {"aggregate type", e.aggregateType},
		{"aggregate id", e.aggregateID}, {"event id", e.id}, {"ordering key", e.orderKey}} {
		if !validText(f[1]) {
			return Envelope{}, fmt.Errorf("%w: %s of %q is not valid UTF-8 text (or contains NUL)", ErrInvalidEnvelope, f[0], e.eventType)
		}
	}
	if err := e.checkWritable(); err != nil {
		return Envelope{}, err
	}
	if len(e.payload) > MaxPayloadSize {
		return Envelope{}, fmt.Errorf("%w: event %q payload is %d bytes, the limit is %d", ErrPayloadTooLarge, e.eventType, len(e.payload), MaxPayloadSize)
	}
	if e.kind == PayloadJSON && (!utf8.ValidString(e.payload) || !json.Valid([]byte(e.payload))) {
		return Envelope{}, fmt.Errorf("%w: event %q payload is not valid JSON", ErrInvalidEnvelope, e.eventType)
	}
	if e.id == "" {
		e.id = NewULID()
	}
	if e.occurredAt.IsZero() {
		e.occurredAt = time.Now().UTC()
	}
	if b.ttl > 0 {
		WithExpiresAt(e.occurredAt.Add(b.ttl))(&b)
		if err := e.checkWritable(); err != nil {
			return Envelope{}, err
		}
	}
	e.checked = true
	return *e, nil
}

// NewJSON builds an Envelope of type t with the JSON payload v in one
// call: v is marshalled with encoding/json, unless it is a
// json.RawMessage, which is taken as the JSON text it is (validated).
// opts set the other fields, as for NewEnvelope.
func NewJSON(t EventType, v any, opts ...EnvelopeOption) (Envelope, error) {
	payload := WithJSONValue(v)
	if raw, ok := v.(json.RawMessage); ok {
		payload = WithJSON(raw)
	}
	return NewEnvelope(t, append(opts[:len(opts):len(opts)], payload)...)
}

// checkWritable checks what a write must refuse in an Envelope however
// it was made (NewEnvelope, WithAddedHeaders, or RestoreEnvelope in a
// hook): its tenant id (see MaxTenantIDLen) and its headers — each name
// not empty and at most MaxHeaderNameLen bytes, names and values valid
// UTF-8 text without NUL, at most MaxHeaders of them taking at most
// MaxHeadersSize bytes. Errors wrap ErrInvalidEnvelope and name the limit
// and the value.
func (e Envelope) checkWritable() error {
	if err := checkTenant(e.tenantID); err != nil {
		return fmt.Errorf("%w: event %q: %w", ErrInvalidEnvelope, e.eventType, err)
	}
	if len(e.headers) > MaxHeaders {
		return fmt.Errorf("%w: event %q has %d headers; the limit is MaxHeaders (%d)", ErrInvalidEnvelope, e.eventType, len(e.headers), MaxHeaders)
	}
	size := 0
	for k, v := range e.headers {
		switch {
		case k == "":
			return fmt.Errorf("%w: event %q has a header with an empty name", ErrInvalidEnvelope, e.eventType)
		case len(k) > MaxHeaderNameLen:
			return fmt.Errorf("%w: event %q has a header name of %d bytes (%s); the limit is MaxHeaderNameLen (%d)",
				ErrInvalidEnvelope, e.eventType, len(k), clip(k), MaxHeaderNameLen)
		case !validText(k) || !validText(v):
			return fmt.Errorf("%w: header %s of %q is not valid UTF-8 text (or contains NUL)", ErrInvalidEnvelope, clip(k), e.eventType)
		}
		size += len(k) + len(v)
	}
	if size > MaxHeadersSize {
		return fmt.Errorf("%w: the headers of event %q take %d bytes (names and values); the limit is MaxHeadersSize (%d)",
			ErrInvalidEnvelope, e.eventType, size, MaxHeadersSize)
	}
	return nil
}

// checkTenant reports why id cannot be a tenant id, or nil: longer than
// MaxTenantIDLen, not valid UTF-8, a control character, or white space at
// either end.
func checkTenant(id string) error {
	if id == "" {
		return nil
	}
	switch first, _ := utf8.DecodeRuneInString(id); {
	case len(id) > MaxTenantIDLen:
		return fmt.Errorf("tenant id is %d bytes long; the limit is MaxTenantIDLen (%d)", len(id), MaxTenantIDLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("tenant id %s is not valid UTF-8", clip(id))
	case strings.IndexFunc(id, unicode.IsControl) >= 0:
		return fmt.Errorf("tenant id %s contains a control character", clip(id))
	case unicode.IsSpace(first) || unicode.IsSpace(lastRune(id)):
		return fmt.Errorf("tenant id %s starts or ends with white space", clip(id))
	}
	return nil
}

func lastRune(s string) rune {
	r, _ := utf8.DecodeLastRuneInString(s)
	return r
}

// clip quotes s for an error message, cut to its first 64 bytes: the
// value that broke a limit may be megabytes long.
func clip(s string) string {
	const keep = 64
	if len(s) <= keep {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:keep]) + "…"
}

// validText reports whether s can be stored in any text column: valid UTF-8
// without NUL characters (PostgreSQL rejects both).
func validText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// MustEnvelope is NewEnvelope that panics on error, for tests and constants.
func MustEnvelope(t EventType, opts ...EnvelopeOption) Envelope {
	e, err := NewEnvelope(t, opts...)
	if err != nil {
		panic(err)
	}
	return e
}

// EnvelopeFields are the stored parts of an Envelope. Store implementations
// use them with RestoreEnvelope to turn a row back into an Envelope.
type EnvelopeFields struct {
	ID            string
	Type          string
	AggregateType string
	AggregateID   string
	TenantID      string
	// SchemaVersion is the stored schema version (0 reads as 1).
	SchemaVersion int
	OccurredAt    time.Time
	AvailableAt   time.Time
	Headers       map[string]string // taken over, not copied: do not modify it afterwards
	Payload       string
	Kind          PayloadKind
	// OrderingKey is the stored ordering key of an ordered event, "" for
	// an event stored without one (see Envelope.Ordered).
	OrderingKey string
}

// RestoreEnvelope rebuilds a stored Envelope. It checks the fields a
// dispatcher relies on (id, type, payload kind) but, unlike NewEnvelope, does
// not generate anything. Errors wrap ErrInvalidEnvelope.
func RestoreEnvelope(f EnvelopeFields) (Envelope, error) {
	switch {
	case f.ID == "":
		return Envelope{}, fmt.Errorf("%w: stored event has no id", ErrInvalidEnvelope)
	case f.Type == "":
		return Envelope{}, fmt.Errorf("%w: stored event %s has no type", ErrInvalidEnvelope, f.ID)
	case f.Kind != PayloadJSON && f.Kind != PayloadBytes:
		return Envelope{}, fmt.Errorf("%w: stored event %s has no payload", ErrInvalidEnvelope, f.ID)
	}
	if f.AggregateType == "" {
		f.AggregateType = string(GlobalAggregate)
	}
	if len(f.Headers) == 0 {
		f.Headers = nil
	}
	ordered := f.OrderingKey != ""
	key, keySet := f.OrderingKey, ordered
	if !ordered {
		key, keySet = f.Headers[HeaderOrderingKey] // written unordered, see Envelope.inOrder
	}
	return Envelope{
		id: f.ID, eventType: f.Type, aggregateType: f.AggregateType, aggregateID: f.AggregateID,
		tenantID: f.TenantID, schemaVersion: max(f.SchemaVersion, 0), occurredAt: f.OccurredAt.UTC(), availableAt: f.AvailableAt.UTC(),
		headers: f.Headers, payload: f.Payload, kind: f.Kind,
		orderKey: key, orderKeySet: keySet, ordered: ordered,
	}, nil
}
