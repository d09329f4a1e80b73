package outbox

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// orderEvent is an application-defined event type: constants of a string
// type with a Name method.
type orderEvent string

func (e orderEvent) Name() string { return string(e) }

const orderPlaced orderEvent = "OrderPlaced"

type aggregate string

func (a aggregate) Name() string { return string(a) }

const orderAggregate aggregate = "Order"

func TestNewEnvelopeDefaults(t *testing.T) {
	before := time.Now()
	e, err := NewEnvelope(EventName("UserRegistered"), WithJSON([]byte(`{"id":1}`)))
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if _, ok := ULIDTime(e.ID()); !ok {
		t.Errorf("ID %q is not a ULID", e.ID())
	}
	if e.Type() != "UserRegistered" {
		t.Errorf("Type = %q", e.Type())
	}
	if e.AggregateType() != "__GLOBAL__" || e.AggregateType() != GlobalAggregate.Name() {
		t.Errorf("AggregateType = %q, want __GLOBAL__", e.AggregateType())
	}
	if e.AggregateID() != "" || e.TenantID() != "" {
		t.Errorf("AggregateID/TenantID = %q/%q, want empty", e.AggregateID(), e.TenantID())
	}
	if e.SchemaVersion() != 1 {
		t.Errorf("SchemaVersion = %d, want 1", e.SchemaVersion())
	}
	if e.OccurredAt().Location() != time.UTC {
		t.Errorf("OccurredAt location = %v, want UTC", e.OccurredAt().Location())
	}
	if e.OccurredAt().Before(before.Truncate(time.Microsecond).Add(-time.Millisecond)) || e.OccurredAt().After(after.Add(time.Millisecond)) {
		t.Errorf("OccurredAt = %v, not between %v and %v", e.OccurredAt(), before, after)
	}
	if !e.AvailableAt().IsZero() || e.Delayed() {
		t.Errorf("AvailableAt = %v, Delayed = %v; want zero, false", e.AvailableAt(), e.Delayed())
	}
	if e.PayloadKind() != PayloadJSON || e.PayloadKind().String() != "json" {
		t.Errorf("PayloadKind = %v", e.PayloadKind())
	}
	if e.PayloadString() != `{"id":1}` {
		t.Errorf("payload = %q", e.PayloadString())
	}
	if h := e.Headers(); h == nil || len(h) != 0 || e.NumHeaders() != 0 {
		t.Errorf("Headers = %#v, want empty non-nil map", h)
	}
	if e.IsZero() {
		t.Error("IsZero on a built envelope")
	}
	if !(Envelope{}).IsZero() {
		t.Error("zero Envelope is not IsZero")
	}
	e2 := MustEnvelope(EventName("UserRegistered"), WithJSON([]byte(`{}`)))
	if e2.ID() <= e.ID() {
		t.Errorf("second ID %q not after first %q", e2.ID(), e.ID())
	}
}

func TestNewEnvelopeAllOptions(t *testing.T) {
	tokyo := time.FixedZone("JST", 9*3600)
	occ := time.Date(2024, 3, 1, 9, 0, 0, 0, tokyo)
	avail := occ.Add(time.Hour)
	e, err := NewEnvelope(orderPlaced,
		WithID("custom-id"),
		WithAggregate(orderAggregate, "order-42"),
		WithTenant("acme"),
		WithSchemaVersion(4),
		WithOccurredAt(occ),
		WithAvailableAt(avail),
		WithHeader("trace", "abc"),
		WithHeaders(map[string]string{"a": "1", "b": "2"}),
		WithBytes([]byte{0, 1, 2, 0xff}),
	)
	if err != nil {
		t.Fatal(err)
	}
	if e.ID() != "custom-id" || e.Type() != "OrderPlaced" || e.AggregateType() != "Order" ||
		e.AggregateID() != "order-42" || e.TenantID() != "acme" || e.SchemaVersion() != 4 {
		t.Errorf("fields = %q %q %q %q %q v%d", e.ID(), e.Type(), e.AggregateType(), e.AggregateID(), e.TenantID(), e.SchemaVersion())
	}
	if !e.OccurredAt().Equal(occ) || e.OccurredAt().Location() != time.UTC {
		t.Errorf("OccurredAt = %v, want %v in UTC", e.OccurredAt(), occ)
	}
	if !e.AvailableAt().Equal(avail) || e.AvailableAt().Location() != time.UTC || !e.Delayed() {
		t.Errorf("AvailableAt = %v, Delayed = %v", e.AvailableAt(), e.Delayed())
	}
	if v, ok := e.Header("trace"); !ok || v != "abc" {
		t.Errorf("Header(trace) = %q, %v", v, ok)
	}
	if _, ok := e.Header("missing"); ok {
		t.Error("Header(missing) reported set")
	}
	if e.NumHeaders() != 3 {
		t.Errorf("NumHeaders = %d, want 3", e.NumHeaders())
	}
	seen := map[string]string{}
	e.RangeHeaders(func(k, v string) { seen[k] = v })
	if len(seen) != 3 || seen["a"] != "1" || seen["b"] != "2" || seen["trace"] != "abc" {
		t.Errorf("RangeHeaders saw %v", seen)
	}
	if e.PayloadKind() != PayloadBytes || e.PayloadKind().String() != "bytes" {
		t.Errorf("PayloadKind = %v", e.PayloadKind())
	}
	if !bytes.Equal(e.Payload(), []byte{0, 1, 2, 0xff}) {
		t.Errorf("Payload = %v", e.Payload())
	}
	if err := e.DecodeJSON(new(any)); !errors.Is(err, ErrInvalidEnvelope) {
		t.Errorf("DecodeJSON of bytes payload: err = %v, want ErrInvalidEnvelope", err)
	}
}

func TestNewEnvelopeValidation(t *testing.T) {
	js := WithJSON([]byte(`{}`))
	tests := []struct {
		name string
		t    EventType
		opts []EnvelopeOption
	}{
		{"nil event type", nil, []EnvelopeOption{js}},
		{"no payload", EventName("E"), nil},
		{"two payloads", EventName("E"), []EnvelopeOption{js, WithBytes([]byte("x"))}},
		{"two JSON payloads", EventName("E"), []EnvelopeOption{js, WithJSONValue(1)}},
		{"empty event type", EventName(""), []EnvelopeOption{js}},
		{"event type too long", EventName(strings.Repeat("e", MaxEventTypeLen+1)), []EnvelopeOption{js}},
		{"empty header key", EventName("E"), []EnvelopeOption{js, WithHeader("", "v")}},
		{"empty header key in map", EventName("E"), []EnvelopeOption{js, WithHeaders(map[string]string{"ok": "1", "": "v"})}},
		{"empty id", EventName("E"), []EnvelopeOption{js, WithID("")}},
		{"id too long", EventName("E"), []EnvelopeOption{js, WithID(strings.Repeat("i", MaxEventIDLen+1))}},
		{"nil aggregate type", EventName("E"), []EnvelopeOption{js, WithAggregate(nil, "1")}},
		{"empty aggregate type", EventName("E"), []EnvelopeOption{js, WithAggregate(AggregateName(""), "1")}},
		{"aggregate type too long", EventName("E"), []EnvelopeOption{js, WithAggregate(AggregateName(strings.Repeat("a", MaxAggregateTypeLen+1)), "1")}},
		{"aggregate id too long", EventName("E"), []EnvelopeOption{js, WithAggregate(orderAggregate, strings.Repeat("a", MaxAggregateIDLen+1))}},
		{"tenant id too long", EventName("E"), []EnvelopeOption{js, WithTenant(strings.Repeat("t", MaxTenantIDLen+1))}},
		{"schema version 0", EventName("E"), []EnvelopeOption{js, WithSchemaVersion(0)}},
		{"negative schema version", EventName("E"), []EnvelopeOption{js, WithSchemaVersion(-1)}},
		{"invalid JSON", EventName("E"), []EnvelopeOption{WithJSON([]byte(`{"a":`))}},
		{"empty JSON", EventName("E"), []EnvelopeOption{WithJSON(nil)}},
		{"unmarshalable JSON value", EventName("E"), []EnvelopeOption{WithJSONValue(make(chan int))}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewEnvelope(tc.t, tc.opts...)
			if !errors.Is(err, ErrInvalidEnvelope) {
				t.Fatalf("err = %v, want ErrInvalidEnvelope", err)
			}
			if !e.IsZero() {
				t.Errorf("returned a non-zero envelope with an error: %+v", e)
			}
		})
	}
}

func TestNewEnvelopeLimitsInclusive(t *testing.T) {
	_, err := NewEnvelope(EventName(strings.Repeat("e", MaxEventTypeLen)),
		WithJSON([]byte(`1`)),
		WithID(strings.Repeat("i", MaxEventIDLen)),
		WithAggregate(AggregateName(strings.Repeat("a", MaxAggregateTypeLen)), strings.Repeat("a", MaxAggregateIDLen)),
		WithTenant(strings.Repeat("t", MaxTenantIDLen)),
	)
	if err != nil {
		t.Fatalf("maximum lengths rejected: %v", err)
	}
}

func TestNewEnvelopePayloadSize(t *testing.T) {
	jsonOfSize := func(n int) []byte { // a JSON string literal of exactly n bytes
		return []byte(`"` + strings.Repeat("x", n-2) + `"`)
	}
	tests := []struct {
		name    string
		opt     EnvelopeOption
		wantErr bool
	}{
		{"json exactly max", WithJSON(jsonOfSize(MaxPayloadSize)), false},
		{"json one over", WithJSON(jsonOfSize(MaxPayloadSize + 1)), true},
		{"bytes exactly max", WithBytes(make([]byte, MaxPayloadSize)), false},
		{"bytes one over", WithBytes(make([]byte, MaxPayloadSize+1)), true},
		{"json value exactly max", WithJSONValue(strings.Repeat("x", MaxPayloadSize-2)), false},
		{"json value one over", WithJSONValue(strings.Repeat("x", MaxPayloadSize-1)), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewEnvelope(EventName("Big"), tc.opt)
			if !tc.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				if len(e.Payload()) != MaxPayloadSize {
					t.Errorf("payload is %d bytes, want %d", len(e.Payload()), MaxPayloadSize)
				}
				return
			}
			if !errors.Is(err, ErrPayloadTooLarge) {
				t.Errorf("err = %v, want ErrPayloadTooLarge", err)
			}
		})
	}
}

func TestEnvelopeImmutability(t *testing.T) {
	raw := []byte(`{"n":1}`)
	bin := []byte{1, 2, 3}
	hdr := map[string]string{"k": "v"}
	ej, err := NewEnvelope(EventName("E"), WithJSON(raw), WithHeaders(hdr))
	if err != nil {
		t.Fatal(err)
	}
	eb, err := NewEnvelope(EventName("E"), WithBytes(bin))
	if err != nil {
		t.Fatal(err)
	}

	// Mutate the inputs after construction.
	raw[5] = '9'
	bin[0] = 99
	hdr["k"] = "changed"
	hdr["new"] = "x"
	if got := ej.PayloadString(); got != `{"n":1}` {
		t.Errorf("JSON payload changed with its input: %q", got)
	}
	if got := eb.Payload(); !bytes.Equal(got, []byte{1, 2, 3}) {
		t.Errorf("bytes payload changed with its input: %v", got)
	}
	if v, _ := ej.Header("k"); v != "v" || ej.NumHeaders() != 1 {
		t.Errorf("headers changed with the input map: k=%q n=%d", v, ej.NumHeaders())
	}

	// Mutate what the accessors return.
	p := ej.Payload()
	p[0] = 'X'
	h := ej.Headers()
	h["k"] = "changed"
	h["other"] = "y"
	if got := ej.PayloadString(); got != `{"n":1}` {
		t.Errorf("payload changed through Payload(): %q", got)
	}
	if v, _ := ej.Header("k"); v != "v" || ej.NumHeaders() != 1 {
		t.Errorf("headers changed through Headers(): k=%q n=%d", v, ej.NumHeaders())
	}
	// An empty Headers() result must not alias anything either.
	h2 := eb.Headers()
	h2["x"] = "y"
	if eb.NumHeaders() != 0 {
		t.Error("headers of a header-less envelope changed through Headers()")
	}
}

func TestWithJSONValueAndDecodeJSON(t *testing.T) {
	type payload struct {
		OrderID string  `json:"orderId"`
		Total   float64 `json:"total"`
	}
	e, err := NewEnvelope(orderPlaced, WithJSONValue(payload{OrderID: "o-1", Total: 9.5}))
	if err != nil {
		t.Fatal(err)
	}
	if e.PayloadKind() != PayloadJSON {
		t.Errorf("PayloadKind = %v", e.PayloadKind())
	}
	if got, want := e.PayloadString(), `{"orderId":"o-1","total":9.5}`; got != want {
		t.Errorf("payload = %s, want %s", got, want)
	}
	var back payload
	if err := e.DecodeJSON(&back); err != nil {
		t.Fatal(err)
	}
	if back != (payload{OrderID: "o-1", Total: 9.5}) {
		t.Errorf("decoded %+v", back)
	}
	var wrong []int
	if err := e.DecodeJSON(&wrong); err == nil {
		t.Error("DecodeJSON into a mismatched type succeeded")
	}
}

func TestDynamicNameAndMustEnvelope(t *testing.T) {
	e, err := NewEnvelope(EventName("Dyn"), WithJSON([]byte(`[1,2]`)), WithTenant("t1"))
	if err != nil {
		t.Fatal(err)
	}
	if e.Type() != "Dyn" || e.TenantID() != "t1" || e.PayloadString() != `[1,2]` {
		t.Errorf("built %q %q %q", e.Type(), e.TenantID(), e.PayloadString())
	}
	if _, err := NewEnvelope(EventName("Dyn"), WithJSON([]byte(`nope`))); !errors.Is(err, ErrInvalidEnvelope) {
		t.Errorf("invalid JSON: err = %v", err)
	}
	defer func() {
		r := recover()
		err, ok := r.(error)
		if !ok || !errors.Is(err, ErrInvalidEnvelope) {
			t.Errorf("MustEnvelope panicked with %v, want an ErrInvalidEnvelope error", r)
		}
	}()
	MustEnvelope(EventName("E"))
	t.Error("MustEnvelope without payload did not panic")
}

func TestTypedNames(t *testing.T) {
	var et EventType = orderPlaced
	var at AggregateType = orderAggregate
	if et.Name() != "OrderPlaced" || at.Name() != "Order" {
		t.Errorf("names = %q, %q", et.Name(), at.Name())
	}
	if EventName("x").Name() != "x" || AggregateName("y").Name() != "y" {
		t.Error("string helpers do not return their name")
	}
	e := MustEnvelope(orderPlaced, WithAggregate(orderAggregate, "7"), WithJSON([]byte(`{}`)))
	if e.Type() != string(orderPlaced) || e.AggregateType() != string(orderAggregate) {
		t.Errorf("envelope names = %q, %q", e.Type(), e.AggregateType())
	}
}

func TestPayloadKindString(t *testing.T) {
	for k, want := range map[PayloadKind]string{PayloadJSON: "json", PayloadBytes: "bytes", 0: "PayloadKind(0)", 9: "PayloadKind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("PayloadKind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}

func TestRestoreEnvelope(t *testing.T) {
	occ := time.Date(2024, 1, 2, 3, 4, 5, 0, time.FixedZone("X", -5*3600))
	valid := EnvelopeFields{ID: "01H", Type: "T", Payload: `{}`, Kind: PayloadJSON, OccurredAt: occ}

	e, err := RestoreEnvelope(valid)
	if err != nil {
		t.Fatal(err)
	}
	if e.ID() != "01H" || e.Type() != "T" || e.AggregateType() != "__GLOBAL__" || e.PayloadString() != `{}` {
		t.Errorf("restored %q %q %q %q", e.ID(), e.Type(), e.AggregateType(), e.PayloadString())
	}
	if !e.OccurredAt().Equal(occ) || e.OccurredAt().Location() != time.UTC {
		t.Errorf("OccurredAt = %v", e.OccurredAt())
	}
	if e.Delayed() || !e.AvailableAt().IsZero() {
		t.Errorf("zero AvailableAt restored as %v", e.AvailableAt())
	}
	if h := e.Headers(); h == nil || len(h) != 0 {
		t.Errorf("Headers = %#v", h)
	}

	full := valid
	full.AggregateType, full.AggregateID, full.TenantID, full.SchemaVersion = "Order", "1", "acme", 5
	full.AvailableAt = occ.Add(time.Minute)
	full.Headers = map[string]string{"h": "v"}
	full.Kind, full.Payload = PayloadBytes, "\x00\x01"
	e, err = RestoreEnvelope(full)
	if err != nil {
		t.Fatal(err)
	}
	if e.AggregateType() != "Order" || e.AggregateID() != "1" || e.TenantID() != "acme" || e.SchemaVersion() != 5 || !e.Delayed() ||
		e.PayloadKind() != PayloadBytes || !bytes.Equal(e.Payload(), []byte{0, 1}) {
		t.Errorf("restored %+v", e)
	}
	if v, ok := e.Header("h"); !ok || v != "v" {
		t.Errorf("Header(h) = %q, %v", v, ok)
	}

	for name, mutate := range map[string]func(*EnvelopeFields){
		"no id":    func(f *EnvelopeFields) { f.ID = "" },
		"no type":  func(f *EnvelopeFields) { f.Type = "" },
		"no kind":  func(f *EnvelopeFields) { f.Kind = 0 },
		"bad kind": func(f *EnvelopeFields) { f.Kind = 7 },
	} {
		t.Run(name, func(t *testing.T) {
			f := valid
			mutate(&f)
			if _, err := RestoreEnvelope(f); !errors.Is(err, ErrInvalidEnvelope) {
				t.Errorf("err = %v, want ErrInvalidEnvelope", err)
			}
		})
	}
}
