package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// An event past its expiry is never delivered: the hot path, a queued
// event and a claimed one all end DEAD with ErrExpired's text, using no
// attempt, counted by Metrics.Expired.
func TestExpiredEventsAreNeverDelivered(t *testing.T) {
	h := newHarness(t, nil)
	var calls atomic.Int32
	if err := h.reg.Handle(EventName("E"), func(context.Context, Envelope) error { calls.Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	h.start(t)
	now := h.clk.Now()
	past := MustEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithExpiresAt(now.Add(-time.Second)))
	live := MustEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithExpiresAt(now.Add(time.Hour)))
	ids := h.commit(t, past, live)

	r := h.waitStatus(t, ids[0], StatusDead)
	if r.Attempts != 0 || !strings.Contains(r.LastError, ErrExpired.Error()) {
		t.Errorf("expired event = %d attempts, error %q; want 0 attempts and %q", r.Attempts, r.LastError, ErrExpired)
	}
	h.waitStatus(t, ids[1], StatusDone)
	if n := calls.Load(); n != 1 {
		t.Errorf("listener ran %d times; want once (the live event only)", n)
	}
	if n := h.metrics.get("Expired"); n != 1 {
		t.Errorf("Metrics.Expired counted %d; want 1", n)
	}

	// A stored event that expired while it waited for a poller is settled
	// by the claim, before any worker sees it.
	soon := MustEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithTTL(time.Minute), WithOccurredAt(now))
	_, tx := withTx(context.Background())
	if err := h.st.Insert(context.Background(), tx, now, "", []Envelope{soon}); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	h.clk.Advance(2 * time.Minute)
	got, err := h.d.claims.claim(context.Background(), h.clk.Now(), 10, 0, true, claimFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.recs) != 0 || got.rows != 1 {
		t.Fatalf("claim = %d rows, %d to deliver; want the expired row claimed and settled, none delivered", got.rows, len(got.recs))
	}
	if r := h.st.get(soon.ID()); r.Status != StatusDead || r.Attempts != 0 || !strings.Contains(r.LastError, "expired at 2024-06-01T12:01:00Z") {
		t.Errorf("claimed expired event = %+v; want DEAD, 0 attempts, its expiry in the error", r)
	}
}

func TestEnvelopeExpiry(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))
	e := MustEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithExpiresAt(at))
	if got := e.ExpiresAt(); !got.Equal(at) || got.Location() != time.UTC {
		t.Errorf("ExpiresAt = %v; want %v in UTC", got, at)
	}
	if !e.Expired(at) || e.Expired(at.Add(-time.Nanosecond)) {
		t.Error("Expired must turn true exactly at ExpiresAt")
	}
	occurred := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ttl := MustEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithTTL(time.Hour), WithOccurredAt(occurred))
	if got := ttl.ExpiresAt(); !got.Equal(occurred.Add(time.Hour)) {
		t.Errorf("WithTTL: ExpiresAt = %v; want occurred + 1h", got)
	}
	if evt("E").ExpiresAt() != (time.Time{}) || evt("E").Expired(at) {
		t.Error("an event without expiry must never expire")
	}
	bad := MustEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithHeader(HeaderExpiresAt, "tomorrow"))
	if !bad.ExpiresAt().IsZero() {
		t.Error("a malformed expiry header must read as none")
	}
	for _, opt := range []EnvelopeOption{WithTTL(0), WithTTL(-time.Second), WithExpiresAt(time.Time{})} {
		if _, err := NewEnvelope(EventName("E"), WithJSON([]byte(`{}`)), opt); !errors.Is(err, ErrInvalidEnvelope) {
			t.Errorf("bad expiry: err = %v; want ErrInvalidEnvelope", err)
		}
	}
}

func TestNewJSON(t *testing.T) {
	type placed struct {
		Order string `json:"order"`
	}
	e, err := NewJSON(EventName("OrderPlaced"), placed{"o-1"}, WithAggregate(AggregateName("Order"), "o-1"))
	if err != nil {
		t.Fatal(err)
	}
	if e.PayloadString() != `{"order":"o-1"}` || e.AggregateID() != "o-1" || e.PayloadKind() != PayloadJSON {
		t.Errorf("NewJSON(value) = %q, aggregate %q", e.PayloadString(), e.AggregateID())
	}
	raw, err := NewJSON(EventName("OrderPlaced"), json.RawMessage(`{"raw": true}`))
	if err != nil || raw.PayloadString() != `{"raw": true}` {
		t.Errorf("NewJSON(raw) = %q, %v; want the text as it is", raw.PayloadString(), err)
	}
	if _, err := NewJSON(EventName("OrderPlaced"), json.RawMessage(`{bad`)); !errors.Is(err, ErrInvalidEnvelope) {
		t.Errorf("NewJSON(invalid raw) err = %v; want ErrInvalidEnvelope", err)
	}
	if _, err := NewJSON(EventName("OrderPlaced"), func() {}); !errors.Is(err, ErrInvalidEnvelope) {
		t.Errorf("NewJSON(unmarshalable) err = %v; want ErrInvalidEnvelope", err)
	}
}

// A key set with WithOrderingKey on an event written unordered is stored
// (in HeaderOrderingKey), so that the event read back for a retry has the
// key it was written with, not its aggregate's.
func TestOrderingKeyKeptWhenUnordered(t *testing.T) {
	h := newHarness(t, nil) // not Ordered
	e := MustEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithAggregate(AggregateName("Order"), "o-1"), WithOrderingKey("customer-7"))
	ids := h.commit(t, e)
	r := h.st.get(ids[0])
	if got := r.Envelope.OrderingKey(); got != "customer-7" || r.Envelope.Ordered() {
		t.Errorf("stored event: key %q, ordered %v; want customer-7, unordered", got, r.Envelope.Ordered())
	}
	back, err := RestoreEnvelope(EnvelopeFields{ID: "x", Type: "E", AggregateType: "Order", AggregateID: "o-1", Kind: PayloadJSON, Payload: "{}",
		Headers: map[string]string{HeaderOrderingKey: "customer-7"}})
	if err != nil {
		t.Fatal(err)
	}
	if back.OrderingKey() != "customer-7" || back.Ordered() {
		t.Errorf("restored: key %q, ordered %v; want customer-7, unordered", back.OrderingKey(), back.Ordered())
	}
	if _, ok := e.Header(HeaderOrderingKey); ok {
		t.Error("the caller's envelope must not change")
	}
	plain := h.commit(t, MustEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithAggregate(AggregateName("Order"), "o-2")))
	if r := h.st.get(plain[0]); r.Envelope.NumHeaders() != 0 {
		t.Errorf("an event without its own key got headers %v; want none", r.Envelope.Headers())
	}
}

// RoutePolicy.TTL is a time-to-live per type, set by the writer on the
// events that carry no expiry of their own.
func TestRouteTTL(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Routes = map[string]RoutePolicy{"E": {TTL: time.Minute}} })
	if err := h.reg.Handle(EventName("E"), func(context.Context, Envelope) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := h.reg.Handle(EventName("F"), func(context.Context, Envelope) error { return nil }); err != nil {
		t.Fatal(err)
	}
	h.start(t)
	now := h.clk.Now()
	own := now.Add(time.Hour)
	ids := h.commit(t,
		MustEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithOccurredAt(now.Add(-2*time.Minute))), // past its TTL
		MustEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithOccurredAt(now)),
		MustEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithOccurredAt(now.Add(-2*time.Minute)), WithExpiresAt(own)), // its own expiry wins
		MustEnvelope(EventName("F"), WithJSON([]byte(`{}`)), WithOccurredAt(now.Add(-2*time.Minute))),                     // no TTL
	)
	if r := h.waitStatus(t, ids[0], StatusDead); !strings.Contains(r.LastError, ErrExpired.Error()) {
		t.Errorf("event past its type's TTL: error %q; want ErrExpired", r.LastError)
	}
	r := h.waitStatus(t, ids[1], StatusDone)
	if got := r.Envelope.ExpiresAt(); !got.Equal(now.Add(time.Minute)) {
		t.Errorf("ExpiresAt = %v; want occurred + TTL (%v)", got, now.Add(time.Minute))
	}
	if r := h.waitStatus(t, ids[2], StatusDone); !r.Envelope.ExpiresAt().Equal(own) {
		t.Errorf("an event's own expiry = %v; want %v kept", r.Envelope.ExpiresAt(), own)
	}
	if r := h.waitStatus(t, ids[3], StatusDone); !r.Envelope.ExpiresAt().IsZero() {
		t.Error("a type without a TTL got an expiry")
	}
	for _, p := range []RoutePolicy{{TTL: -time.Second}, {TTL: 20 * 365 * 24 * time.Hour}, {}} {
		cfg := Config{Store: h.st, TxContext: fakeTxContext{}, Routes: map[string]RoutePolicy{"E": p}}
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Routes[E] = %+v: Validate = %v; want ErrInvalidConfig", p, err)
		}
	}
}
