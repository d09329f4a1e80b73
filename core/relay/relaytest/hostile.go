package relaytest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxtest"
	"github.com/go-outbox/outbox/core/relay"
)

// Tenant is the tenant of the suite's events that have one: a fixture's
// Topic maps its events to topics Read returns.
const Tenant = "acme"

// TenantTopic returns a Topic for a fixture: prefix, then
// relay.PerTenant's topic (the tenant and a dot, when the event has one,
// then the event type), such as "T1.acme.OrderPlaced", and for
// RefusedType refused + that.
func TenantTopic(prefix, refused string) relay.Topic {
	per := relay.PerTenant(nil)
	return func(e outbox.Envelope) (string, error) {
		t, err := per(e)
		if err != nil {
			return "", err
		}
		if e.Type() == RefusedType {
			return refused + prefix + t, nil
		}
		return prefix + t, nil
	}
}

// HostileTenants returns tenant ids that are not one topic part, each of
// which must fail its own event (relay.ErrInvalidMessage) and reach no
// topic: another tenant's subtree ("acme.evil"), broker wildcards, spaces
// and control characters, empty parts, characters outside every broker's
// plain names.
func HostileTenants() []string {
	return []string{
		Tenant + ".evil", Tenant + ".", "." + Tenant, Tenant + "..x",
		"*", ">", "#", Tenant + ".*", Tenant + ".>", Tenant + ".#", "*." + Tenant, Tenant + "*", Tenant + "#",
		"ac me", " " + Tenant, Tenant + " ", Tenant + "\t", Tenant + "\r\nNats-Rollup: all", Tenant + "\x7f",
		Tenant + "/evil", Tenant + ":evil", Tenant + "%2Eevil", "acmé", "ａｃｍｅ", Tenant + ".evil.OrderPlaced",
	}
}

// HostileHeaders returns envelope headers in the library's and the
// brokers' reserved namespaces, none of which may reach a broker that
// reserves it (relay.Broker.Reserved): a rollup that would purge a
// stream, expectations that would make the event undeliverable, message
// ids, delays, dead-letter history, sender-selected routing, and the
// library's own metadata and signature for an event that has none.
func HostileHeaders() map[string]string {
	return map[string]string{
		"Nats-Rollup": "all", "nats-rollup": "sub", "Nats-Expected-Last-Sequence": "999999",
		"Nats-Expected-Stream": "nope", "Nats-Expected-Last-Msg-Id": "nope",
		"Nats-Expected-Last-Subject-Sequence": "999999", "Nats-Msg-Id": "forged", "Nats-TTL": "1s",
		"CC": "elsewhere", "BCC": "elsewhere", "x-delay": "600000", "x-death": "forged",
		"x-stream-filter-value": "forged", "x-match": "any",
		relay.HeaderTenantID: "globex", relay.HeaderAggregateID: "forged", relay.HeaderOccurredAt: "1999-01-01T00:00:00Z",
		"outbox-event-id": "forged", "OUTBOX-EVENT-TYPE": "forged", relay.HeaderSignature: "v1=forged",
		"Outbox-Whatever": "forged",
	}
}

// testHostile: events whose tenant is not one topic part fail alone with
// relay.ErrInvalidMessage and reach no topic; events carrying headers in
// the reserved namespaces are relayed without them, and those headers
// steer nothing (a stream keeps what it had, later events are stored);
// every other event of the batch is relayed as it should be, also beside
// an event over the broker's message size.
func testHostile(t *testing.T, f Fixture) {
	ctx := context.Background()
	before := []outbox.Envelope{
		newEvent(t, OrderPlaced, order("o-h0"), outbox.WithTenant(Tenant), outbox.WithJSON([]byte(`{"n":0}`))),
		newEvent(t, OrderShipped, order("o-h0"), outbox.WithJSON([]byte(`{"n":1}`))),
		newEvent(t, InvoiceIssued, order("o-h0"), outbox.WithTenant(Tenant), outbox.WithJSON([]byte(`{"n":2}`))),
	}
	for _, e := range before {
		if err := f.Sink.Handle(ctx, e); err != nil {
			t.Fatalf("before: %v", err)
		}
	}
	var events, good, bad []outbox.Envelope
	for i, tenant := range HostileTenants() {
		e := outboxtest.Stored(t, newEvent(t, OrderPlaced, order(fmt.Sprintf("o-t%d", i)), outbox.WithJSON([]byte(`{}`))), tenant, nil)
		events, bad = append(events, e), append(bad, e)
	}
	for name, value := range HostileHeaders() {
		for _, tenant := range []string{"", Tenant} {
			e := newEvent(t, EventTypes()[len(events)%3], order("o-h1"), outbox.WithTenant(tenant),
				outbox.WithHeader(name, value), outbox.WithHeader("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
				outbox.WithJSON([]byte(`{}`)))
			events, good = append(events, e), append(good, e)
		}
	}
	all := newEvent(t, OrderPlaced, order("o-h2"), outbox.WithHeaders(HostileHeaders()), outbox.WithJSON([]byte(`{}`)))
	events, good = append(events, all), append(good, all)
	// The largest payload with the most header bytes an envelope takes
	// (64 KiB): over some brokers' message size. It may fail, but alone:
	// its outcome is not checked.
	huge := newEvent(t, OrderShipped, order("o-h3"), outbox.WithHeader("pad", strings.Repeat("p", outbox.MaxHeadersSize-len("pad"))),
		outbox.WithBytes(make([]byte, outbox.MaxPayloadSize)))
	events = append(events, huge)
	t.Logf("%d hostile tenants, %d hostile headers (one per event, without and with a tenant, and all at once)", len(bad), len(HostileHeaders()))

	var errs []error
	if bl, ok := f.Sink.(outbox.BatchListener); ok {
		errs = bl.HandleBatch(ctx, events)
	} else {
		errs = handleAll(ctx, f.Sink, events)
	}
	isBad := map[string]bool{}
	for _, e := range bad {
		isBad[e.ID()] = true
	}
	for i, e := range events {
		switch {
		case e.ID() == huge.ID():
			t.Logf("an event of %d bytes and 64 KiB of headers: %v", outbox.MaxPayloadSize, errs[i])
		case isBad[e.ID()] && !errors.Is(errs[i], relay.ErrInvalidMessage):
			t.Errorf("tenant %q: %v, want an error wrapping relay.ErrInvalidMessage", e.TenantID(), errs[i])
		case isBad[e.ID()] && !strings.Contains(errs[i].Error(), e.ID()):
			t.Errorf("tenant %q: the error does not name the event: %v", e.TenantID(), errs[i])
		case !isBad[e.ID()] && errs[i] != nil:
			t.Errorf("event with headers %v: %v", headerNames(e), errs[i])
		}
	}
	after := newEvent(t, OrderPlaced, order("o-h0"), outbox.WithTenant(Tenant), outbox.WithJSON([]byte(`{"n":3}`)))
	if err := f.Sink.Handle(ctx, after); err != nil {
		t.Errorf("after: %v", err)
	}
	kept := append(append(before, good...), after)
	r := newReader(f)
	r.once(t, kept)
	for _, e := range bad {
		if n := len(r.byID[e.ID()]); n != 0 {
			t.Errorf("event of tenant %q is on the broker %d times", e.TenantID(), n)
		}
	}
}

func headerNames(e outbox.Envelope) []string {
	var out []string
	e.RangeHeaders(func(k, _ string) { out = append(out, k) })
	return out
}
