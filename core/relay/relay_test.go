package relay_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
	"github.com/go-outbox/outbox/core/outboxtest"
	"github.com/go-outbox/outbox/core/relay"
	"github.com/go-outbox/outbox/core/relay/relaytest"
)

func TestNewMessage(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6007, time.FixedZone("x", 3600))
	e, err := outbox.NewEnvelope(outbox.EventName("OrderPlaced"),
		outbox.WithID("01J0000000000000000000000A"),
		outbox.WithAggregate(outbox.AggregateName("Order"), "o-1"),
		outbox.WithTenant("acme"), outbox.WithOccurredAt(at), outbox.WithSchemaVersion(3),
		outbox.WithHeader("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
		outbox.WithJSON([]byte(`{"total":12}`)))
	if err != nil {
		t.Fatal(err)
	}
	m := message(t, relay.Broker{}, e, relay.Prefixed("orders."))
	want := map[string]string{
		relay.HeaderEventID:       "01J0000000000000000000000A",
		relay.HeaderEventType:     "OrderPlaced",
		relay.HeaderAggregateType: "Order",
		relay.HeaderAggregateID:   "o-1",
		relay.HeaderTenantID:      "acme",
		relay.HeaderSchemaVersion: "3",
		relay.HeaderOccurredAt:    "2026-01-02T02:04:05.000006Z",
		relay.HeaderContentType:   "application/json",
		"traceparent":             "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	}
	if len(m.Headers) != len(want) {
		t.Errorf("headers = %v, want %v", m.Headers, want)
	}
	for k, v := range want {
		if m.Headers[k] != v {
			t.Errorf("header %s = %q, want %q", k, m.Headers[k], v)
		}
	}
	if m.ID != e.ID() || m.Topic != "orders.OrderPlaced" || m.Key != "Order/o-1" || string(m.Payload) != `{"total":12}` {
		t.Errorf("message = %+v", m)
	}

	bin, err := outbox.NewEnvelope(outbox.EventName("Blob"), outbox.WithBytes([]byte{0, 1, 2}))
	if err != nil {
		t.Fatal(err)
	}
	m = message(t, relay.Broker{}, bin, nil)
	if m.Topic != "Blob" || m.Key != "" || string(m.Payload) != "\x00\x01\x02" || m.Headers[relay.HeaderSchemaVersion] != "1" {
		t.Errorf("binary message = %+v", m)
	}
	for _, k := range []string{relay.HeaderAggregateID, relay.HeaderTenantID, relay.HeaderContentType} {
		if _, ok := m.Headers[k]; ok {
			t.Errorf("binary global event has header %s", k)
		}
	}
}

func message(t *testing.T, b relay.Broker, e outbox.Envelope, topic relay.Topic) relay.Message {
	t.Helper()
	m, err := b.Message(e, topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRangeHeaders: each header of the message comes once; the metadata
// replaces an own header of its name, an own Content-Type is kept, and an
// own header in the library's namespace never reaches the message, even
// where the event has no metadata of its name (an event without a tenant
// cannot name one).
func TestRangeHeaders(t *testing.T) {
	e, err := outbox.NewEnvelope(outbox.EventName("OrderPlaced"),
		outbox.WithAggregate(outbox.AggregateName("Order"), "o-1"),
		outbox.WithHeader(relay.HeaderEventID, "forged"),
		outbox.WithHeader(relay.HeaderAggregateID, "forged"),
		outbox.WithHeader(relay.HeaderTenantID, "own-tenant"),
		outbox.WithHeader("outbox-tenant-id", "own-tenant"),
		outbox.WithHeader(relay.HeaderSignature, "v1=forged"),
		outbox.WithHeader("Outbox-Anything", "forged"),
		outbox.WithHeader(relay.HeaderContentType, "application/cloudevents+json"),
		outbox.WithJSON([]byte(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	relay.Broker{}.RangeHeaders(e, "", func(k, v string) {
		if _, dup := seen[k]; dup {
			t.Errorf("header %s visited twice", k)
		}
		seen[k] = v
	})
	want := map[string]string{
		relay.HeaderEventID: e.ID(), relay.HeaderEventType: "OrderPlaced", relay.HeaderAggregateType: "Order",
		relay.HeaderAggregateID: "o-1", relay.HeaderSchemaVersion: "1", relay.HeaderOccurredAt: seen[relay.HeaderOccurredAt],
		relay.HeaderContentType: "application/cloudevents+json",
	}
	if !maps.Equal(seen, want) {
		t.Errorf("headers %v, want %v", seen, want)
	}
	if m := message(t, relay.Broker{}, e, nil); !maps.Equal(m.Headers, seen) {
		t.Errorf("NewMessage's headers %v differ from RangeHeaders' %v", m.Headers, seen)
	}
}

// TestRedeliveredMessageIsTheSame: the hot path hands a sink the envelope as
// written, a redelivery the one read back from the store; both become the
// same message.
func TestRedeliveredMessageIsTheSame(t *testing.T) {
	ctx := context.Background()
	store := outboxmem.New()
	e := outbox.MustEnvelope(outbox.EventName("OrderPlaced"),
		outbox.WithAggregate(outbox.AggregateName("Order"), "o-1"),
		outbox.WithOccurredAt(time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)),
		outbox.WithJSON([]byte(`{}`)))
	client, err := outbox.New(outbox.Config{Store: store, TxContext: store, Mode: outbox.ModeWriterOnly})
	if err != nil {
		t.Fatal(err)
	}
	err = store.InTx(ctx, func(ctx context.Context) error {
		_, err := client.Write(ctx, e)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := client.Get(ctx, e.ID())
	if err != nil {
		t.Fatal(err)
	}
	key := []byte(strings.Repeat("k", relay.MinKeyLen))
	written, err := relay.NATS.Message(e, nil, key)
	if err != nil {
		t.Fatal(err)
	}
	read, err := relay.NATS.Message(r.Envelope, nil, key)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(written.Headers, read.Headers) || written.DedupID() != read.DedupID() {
		t.Errorf("headers as written %v, as read back %v", written.Headers, read.Headers)
	}
}

func ExampleBroker_Message() {
	e, _ := outbox.NewEnvelope(outbox.EventName("OrderPlaced"),
		outbox.WithID("01J0000000000000000000000A"),
		outbox.WithAggregate(outbox.AggregateName("Order"), "o-1"),
		outbox.WithJSON([]byte(`{"total":12}`)))
	m, _ := relay.NATS.Message(e, relay.Prefixed("orders."), nil)
	fmt.Println(m.Topic, m.Key, m.Headers[relay.HeaderEventID], string(m.Payload))
	// Output: orders.OrderPlaced Order/o-1 01J0000000000000000000000A {"total":12}
}

func TestPerTenant(t *testing.T) {
	acme := outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithTenant("acme"), outbox.WithJSON([]byte(`{}`)))
	none := outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithJSON([]byte(`{}`)))
	for _, tc := range []struct {
		topic relay.Topic
		e     outbox.Envelope
		want  string
	}{
		{relay.PerTenant(nil), acme, "acme.OrderPlaced"},
		{relay.PerTenant(nil), none, "OrderPlaced"},
		{relay.PerTenant(relay.Prefixed("orders.")), acme, "acme.orders.OrderPlaced"},
		{relay.PerTenant(relay.Prefixed("orders.")), none, "orders.OrderPlaced"},
	} {
		if got := message(t, relay.NATS, tc.e, tc.topic).Topic; got != tc.want {
			t.Errorf("topic of %q's event = %q, want %q", tc.e.TenantID(), got, tc.want)
		}
	}
}

// TestPerTenantRefusesWhatIsNotOnePart: a tenant id that is not one topic
// part (a dot, a wildcard, a space, …) fails its own event with
// ErrInvalidMessage on every broker, rather than reaching another
// tenant's topics.
func TestPerTenantRefusesWhatIsNotOnePart(t *testing.T) {
	for _, tenant := range relaytest.HostileTenants() {
		e := outboxtest.Stored(t, outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithJSON([]byte(`{}`))), tenant, nil)
		for _, b := range []relay.Broker{relay.NATS, relay.AMQP, relay.Kafka, {}} {
			m, err := b.Message(e, relay.PerTenant(nil), nil)
			if !errors.Is(err, relay.ErrInvalidMessage) {
				t.Errorf("tenant %q: topic %q, error %v; want ErrInvalidMessage", tenant, m.Topic, err)
			}
		}
	}
	for _, tenant := range []string{"acme", "ACME_2", "a-b", strings.Repeat("t", relay.MaxPartLen)} {
		e := outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithTenant(tenant), outbox.WithJSON([]byte(`{}`)))
		if m := message(t, relay.Kafka, e, relay.PerTenant(nil)); m.Topic != tenant+".OrderPlaced" {
			t.Errorf("tenant %q: topic %q", tenant, m.Topic)
		}
	}
}

// TestCheckTopic: each broker refuses the topics outside its syntax.
func TestCheckTopic(t *testing.T) {
	for _, tc := range []struct {
		b         relay.Broker
		good, bad []string
	}{
		{relay.NATS, []string{"a", "orders.acme.OrderPlaced", "a-b_c.ü"},
			[]string{"", ".a", "a.", "a..b", "a.*", "a.>", "*", ">", "a b", "a\tb", "a\nb", "a\x7f", "a*b", strings.Repeat("a", relay.MaxNATSSubjectLen+1), "\xff"}},
		{relay.AMQP, []string{"a", "orders.acme.OrderPlaced", "a b#*"},
			[]string{"", strings.Repeat("k", 256), "\xff"}},
		{relay.Kafka, []string{"a", "orders.acme.OrderPlaced", "a-b_c"},
			[]string{"", ".", "..", "a b", "a/b", "a*", "a#", "ü", strings.Repeat("t", 250)}},
	} {
		for _, s := range tc.good {
			if err := tc.b.CheckTopic(s); err != nil {
				t.Errorf("%q: %v", s, err)
			}
		}
		for _, s := range tc.bad {
			if err := tc.b.CheckTopic(s); !errors.Is(err, relay.ErrInvalidMessage) {
				t.Errorf("%q: %v, want ErrInvalidMessage", s, err)
			}
		}
	}
}

// TestReserved: each broker's control namespace and the library's are
// left out of its messages, and nothing else is.
func TestReserved(t *testing.T) {
	for _, tc := range []struct {
		b        relay.Broker
		reserved []string
		carried  []string
	}{
		{relay.NATS, []string{"Nats-Rollup", "nats-expected-stream", "NATS-MSG-ID", "Outbox-Tenant-Id", "outbox-x"}, []string{"X-Nats", "Natsy", "CC", "x-delay", "traceparent"}},
		{relay.AMQP, []string{"x-delay", "x-death", "CC", "BCC", "OUTBOX-EVENT-ID"}, []string{"X-Request-Id", "cc", "Nats-Rollup", "traceparent"}},
		{relay.Kafka, []string{"Outbox-Signature", "outbox-"}, []string{"Nats-Rollup", "x-delay", "CC", "Outbox"}},
	} {
		for _, h := range tc.reserved {
			if !tc.b.Reserved(h) {
				t.Errorf("%s is carried", h)
			}
		}
		for _, h := range tc.carried {
			if tc.b.Reserved(h) {
				t.Errorf("%s is reserved", h)
			}
		}
	}
}

// TestSign: a signature binds the id to the content under the key; a
// forged or changed message, or another key, fails Verify.
func TestSign(t *testing.T) {
	key := []byte(strings.Repeat("k", relay.MinKeyLen))
	other := []byte(strings.Repeat("o", relay.MinKeyLen))
	e := outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithAggregate(outbox.AggregateName("Order"), "o-1"),
		outbox.WithTenant("acme"), outbox.WithJSON([]byte(`{"total":12}`)))
	m, err := relay.NATS.Message(e, nil, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := relay.Verify([][]byte{other, key}, m.Headers, m.Payload); err != nil {
		t.Fatalf("the real message: %v", err)
	}
	if !strings.HasPrefix(m.DedupID(), e.ID()+".") || m.DedupID() == e.ID() {
		t.Errorf("DedupID %q", m.DedupID())
	}
	for name, change := range map[string]func(h map[string]string, p *[]byte){
		"no signature":        func(h map[string]string, _ *[]byte) { delete(h, relay.HeaderSignature) },
		"malformed signature": func(h map[string]string, _ *[]byte) { h[relay.HeaderSignature] = "v1=" },
		"other payload":       func(_ map[string]string, p *[]byte) { *p = []byte(`{"total":0}`) },
		"other id":            func(h map[string]string, _ *[]byte) { h[relay.HeaderEventID] = "01J0000000000000000000000B" },
		"other tenant":        func(h map[string]string, _ *[]byte) { h[relay.HeaderTenantID] = "globex" },
		"tenant dropped":      func(h map[string]string, _ *[]byte) { delete(h, relay.HeaderTenantID) },
		"other type":          func(h map[string]string, _ *[]byte) { h[relay.HeaderEventType] = "OrderCancelled" },
		"other aggregate":     func(h map[string]string, _ *[]byte) { h[relay.HeaderAggregateID] = "o-2" },
		"other version":       func(h map[string]string, _ *[]byte) { h[relay.HeaderSchemaVersion] = "2" },
		"other time":          func(h map[string]string, _ *[]byte) { h[relay.HeaderOccurredAt] = "2000-01-01T00:00:00Z" },
		"field boundary": func(h map[string]string, _ *[]byte) {
			h[relay.HeaderAggregateType] += "o-1"
			h[relay.HeaderAggregateID] = ""
		},
	} {
		h, p := maps.Clone(m.Headers), m.Payload
		change(h, &p)
		if err := relay.Verify([][]byte{key}, h, p); !errors.Is(err, relay.ErrSignature) {
			t.Errorf("%s: %v, want ErrSignature", name, err)
		}
	}
	if err := relay.Verify([][]byte{other}, m.Headers, m.Payload); !errors.Is(err, relay.ErrSignature) {
		t.Errorf("another key: %v, want ErrSignature", err)
	}
	if err := relay.CheckKey("SigningKey", key[:relay.MinKeyLen-1]); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Errorf("a short key: %v, want ErrInvalidConfig", err)
	}
}

// TestRedactURL: no user, password or token of a URL (or of a list of
// them) survives, in the URL or in an error quoting it; the error still
// wraps its cause.
func TestRedactURL(t *testing.T) {
	for _, tc := range []struct {
		raw, want string
		secrets   []string
	}{
		{"nats://alice:pa%2Fss@h:1", "nats://redacted@h:1", []string{"pa%2Fss", "pa/ss"}},
		{"nats://tok3n@h:1,nats://h:2", "nats://redacted@h:1,nats://h:2", []string{"tok3n"}},
		{"amqp://u:p@ss@h/vhost", "amqp://redacted@h/vhost", []string{"p@ss"}},
		{"nats://h:1", "nats://h:1", nil},
		{"nats://alice:pa%2Fss@[::1,nats://x@y:", "nats://redacted@[::1,nats://redacted@y:", []string{"pa%2Fss", "pa/ss"}},
	} {
		r := relay.RedactURL(tc.raw)
		if r.URL != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.raw, r.URL, tc.want)
		}
		// A client error that quotes the URL, raw and decoded.
		cause := fmt.Errorf("parse %q: %s", tc.raw, strings.ReplaceAll(tc.raw, "%2F", "/"))
		err := r.Errorf("connect to %s: %w", cause)
		if !errors.Is(err, cause) || strings.Contains(err.Error(), "%!") || !strings.HasPrefix(err.Error(), "connect to "+tc.want+": ") {
			t.Errorf("RedactURL(%q).Errorf = %v", tc.raw, err)
		}
		for _, secret := range tc.secrets {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("RedactURL(%q).Errorf shows %q: %v", tc.raw, secret, err)
			}
		}
	}
}
