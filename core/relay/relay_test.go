package relay_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
	"github.com/go-outbox/outbox/core/relay"
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
	m := relay.NewMessage(e, relay.Prefixed("orders."))
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
	m = relay.NewMessage(bin, nil)
	if m.Topic != "Blob" || m.Key != "" || string(m.Payload) != "\x00\x01\x02" || m.Headers[relay.HeaderSchemaVersion] != "1" {
		t.Errorf("binary message = %+v", m)
	}
	for _, k := range []string{relay.HeaderAggregateID, relay.HeaderTenantID, relay.HeaderContentType} {
		if _, ok := m.Headers[k]; ok {
			t.Errorf("binary global event has header %s", k)
		}
	}
}

// TestRangeHeaders: each header of the message comes once; the metadata
// replaces an own header of its name, except an own Content-Type, and an
// own metadata header the event has no value for stays.
func TestRangeHeaders(t *testing.T) {
	e, err := outbox.NewEnvelope(outbox.EventName("OrderPlaced"),
		outbox.WithAggregate(outbox.AggregateName("Order"), "o-1"),
		outbox.WithHeader(relay.HeaderEventID, "forged"),
		outbox.WithHeader(relay.HeaderAggregateID, "forged"),
		outbox.WithHeader(relay.HeaderTenantID, "own-tenant"),
		outbox.WithHeader(relay.HeaderContentType, "application/cloudevents+json"),
		outbox.WithJSON([]byte(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	relay.RangeHeaders(e, func(k, v string) {
		if _, dup := seen[k]; dup {
			t.Errorf("header %s visited twice", k)
		}
		seen[k] = v
	})
	want := map[string]string{
		relay.HeaderEventID: e.ID(), relay.HeaderAggregateID: "o-1", relay.HeaderTenantID: "own-tenant",
		relay.HeaderContentType: "application/cloudevents+json",
	}
	for k, v := range want {
		if seen[k] != v {
			t.Errorf("header %s = %q, want %q", k, seen[k], v)
		}
	}
	if m := relay.NewMessage(e, nil); !maps.Equal(m.Headers, seen) {
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
	written, read := relay.NewMessage(e, nil), relay.NewMessage(r.Envelope, nil)
	if !maps.Equal(written.Headers, read.Headers) {
		t.Errorf("headers as written %v, as read back %v", written.Headers, read.Headers)
	}
}

func ExampleNewMessage() {
	e, _ := outbox.NewEnvelope(outbox.EventName("OrderPlaced"),
		outbox.WithID("01J0000000000000000000000A"),
		outbox.WithAggregate(outbox.AggregateName("Order"), "o-1"),
		outbox.WithJSON([]byte(`{"total":12}`)))
	m := relay.NewMessage(e, relay.Prefixed("orders."))
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
		if got := relay.NewMessage(tc.e, tc.topic).Topic; got != tc.want {
			t.Errorf("topic of %q's event = %q, want %q", tc.e.TenantID(), got, tc.want)
		}
	}
}
