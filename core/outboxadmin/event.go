package outboxadmin

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// Event is the JSON view of one stored event (an outbox.Record): the row's
// delivery state and, when the row could be decoded, its envelope. NewEvent
// fills it; fields without a value are left out of the JSON, times are UTC.
type Event struct {
	ID            string     `json:"id"`
	Type          string     `json:"type,omitempty"`
	AggregateType string     `json:"aggregate_type,omitempty"`
	AggregateID   string     `json:"aggregate_id,omitempty"`
	TenantID      string     `json:"tenant_id,omitempty"`
	SchemaVersion int        `json:"schema_version,omitempty"`
	Status        string     `json:"status"`
	Attempts      int        `json:"attempts"`
	OccurredAt    *time.Time `json:"occurred_at,omitempty"`
	CreatedAt     *time.Time `json:"created_at,omitempty"`
	AvailableAt   *time.Time `json:"available_at,omitempty"`
	// DoneAt is when the event went DONE or DEAD.
	DoneAt    *time.Time `json:"done_at,omitempty"`
	LastError string     `json:"last_error,omitempty"`
	LockedBy  string     `json:"locked_by,omitempty"`
	LockedAt  *time.Time `json:"locked_at,omitempty"`
	// Subscribers are the subscribers the event still owes
	// (outbox.Record.Subscribers); left out when it owes every listener.
	Subscribers []string `json:"subscribers,omitempty"`
	// Headers is set, an empty object at least, with EventOptions.Payload
	// for a decoded event; nil (left out) otherwise.
	Headers map[string]string `json:"headers,omitzero"`
	// PayloadKind is "json" or "bytes" (see PayloadText).
	PayloadKind string `json:"payload_kind,omitempty"`
	// PayloadSize counts the payload's bytes. It is in the JSON only with
	// EventOptions.PayloadSize, and then always (0 for a row that cannot
	// be decoded).
	PayloadSize int `json:"payload_size"`
	// Payload is set with EventOptions.Payload: the JSON document itself,
	// or a JSON string — the bytes in standard base64, or stored JSON text
	// that does not parse.
	Payload json.RawMessage `json:"payload,omitempty"`
	// DecodeError is set when the stored row cannot be decoded; the
	// envelope's fields are then missing.
	DecodeError string `json:"decode_error,omitempty"`

	// sized says whether the JSON has payload_size.
	sized bool
}

// EventOptions chooses what an Event shows beyond the row's state and the
// envelope's type, aggregate, tenant and times. The zero value shows the
// least, as a list of events does.
type EventOptions struct {
	// Payload adds the headers and the payload, as the view of one event
	// does.
	Payload bool
	// PayloadSize adds payload_size, the payload's length in bytes.
	PayloadSize bool
}

// NewEvent returns the view of r.
func NewEvent(r outbox.Record, opts EventOptions) Event {
	e := Event{
		ID: r.ID, Status: r.Status.String(), Attempts: r.Attempts,
		CreatedAt: timePtr(r.CreatedAt), AvailableAt: timePtr(r.AvailableAt), DoneAt: timePtr(r.DoneAt),
		LastError: r.LastError, LockedBy: r.LockedBy, LockedAt: timePtr(r.LockedAt),
		Subscribers: r.Subscribers, sized: opts.PayloadSize,
	}
	if r.Err != nil {
		e.DecodeError = r.Err.Error()
		return e
	}
	env := r.Envelope
	e.Type, e.AggregateType, e.AggregateID, e.TenantID = env.Type(), env.AggregateType(), env.AggregateID(), env.TenantID()
	e.SchemaVersion = env.SchemaVersion()
	e.OccurredAt = timePtr(env.OccurredAt())
	kind, text := PayloadText(env)
	e.PayloadKind = kind
	e.PayloadSize = len(env.PayloadString())
	if !opts.Payload {
		return e
	}
	e.Headers = env.Headers()
	if e.Headers == nil {
		e.Headers = map[string]string{}
	}
	switch {
	case kind == "json" && json.Valid([]byte(text)):
		e.Payload = json.RawMessage(text)
	case kind != "":
		e.Payload, _ = json.Marshal(text) // base64 text, or JSON that does not parse
	}
	return e
}

// PayloadText returns the kind of env's payload and its text: "json" and
// the JSON document as stored, or "bytes" and the bytes in standard base64.
// Both are empty for an envelope without a payload.
func PayloadText(env outbox.Envelope) (kind, text string) {
	switch env.PayloadKind() {
	case outbox.PayloadJSON:
		return "json", env.PayloadString()
	case outbox.PayloadBytes:
		return "bytes", base64.StdEncoding.EncodeToString(env.Payload())
	}
	return "", ""
}

// MarshalJSON encodes e by its fields' tags, leaving payload_size out
// unless NewEvent was asked for it (EventOptions.PayloadSize). Characters
// such as '<' are escaped or not as the encoder of the whole document says
// (json.Encoder.SetEscapeHTML).
func (e Event) MarshalJSON() ([]byte, error) {
	type fields Event // Event's fields, without this method
	if e.sized {
		return marshal(fields(e))
	}
	return marshal(struct {
		fields
		// PayloadSize hides the field of the same name of fields: being
		// always empty, it is always left out.
		PayloadSize struct{} `json:"payload_size,omitzero"`
	}{fields: fields(e)})
}

// marshal encodes v as compact JSON without escaping HTML characters: the
// encoder that asked for it escapes them if it is set to.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// timePtr is nil for the zero time, so that JSON leaves it out, and the
// time in UTC otherwise.
func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
