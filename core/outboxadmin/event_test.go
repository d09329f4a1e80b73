package outboxadmin_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxadmin"
)

var (
	occurred = time.Date(2026, 3, 1, 9, 59, 0, 0, time.UTC)
	created  = time.Date(2026, 3, 1, 10, 0, 0, 123000000, time.FixedZone("CET", 3600))
)

// record returns a DEAD record of env with every field of the row set.
func record(env outbox.Envelope) outbox.Record {
	return outbox.Record{
		ID: env.ID(), Envelope: env, Status: outbox.StatusDead, Attempts: 3,
		CreatedAt: created, AvailableAt: created.Add(time.Minute), DoneAt: created.Add(2 * time.Minute),
		LastError: "smtp 550: <mailbox> unavailable", LockedBy: "worker-1", LockedAt: created.Add(time.Minute),
	}
}

func restore(t *testing.T, f outbox.EnvelopeFields) outbox.Envelope {
	t.Helper()
	env, err := outbox.RestoreEnvelope(f)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// indent encodes v as outboxhttp does: indented, HTML characters escaped.
func indent(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEventJSON checks the whole document of one event, field by field and
// in order, with each option.
func TestEventJSON(t *testing.T) {
	env := restore(t, outbox.EnvelopeFields{
		ID: "01J0000000000000000000000A", Type: "InvoiceSent", AggregateType: "Invoice", AggregateID: "inv-1",
		TenantID: "acme", OccurredAt: occurred, Headers: map[string]string{"traceparent": "00-ab-cd-01"},
		Payload: `{"to": "a&b@example.com"}`, Kind: outbox.PayloadJSON,
	})
	rec := record(env)
	const head = `{
  "id": "01J0000000000000000000000A",
  "type": "InvoiceSent",
  "aggregate_type": "Invoice",
  "aggregate_id": "inv-1",
  "tenant_id": "acme",
  "schema_version": 1,
  "status": "DEAD",
  "attempts": 3,
  "occurred_at": "2026-03-01T09:59:00Z",
  "created_at": "2026-03-01T09:00:00.123Z",
  "available_at": "2026-03-01T09:01:00.123Z",
  "done_at": "2026-03-01T09:02:00.123Z",
  "last_error": "smtp 550: \u003cmailbox\u003e unavailable",
  "locked_by": "worker-1",
  "locked_at": "2026-03-01T09:01:00.123Z",
`
	for _, tc := range []struct {
		name string
		opts outboxadmin.EventOptions
		tail string
	}{
		{"list", outboxadmin.EventOptions{}, `  "payload_kind": "json"
}`},
		{"list with size", outboxadmin.EventOptions{PayloadSize: true}, `  "payload_kind": "json",
  "payload_size": 25
}`},
		{"one event", outboxadmin.EventOptions{Payload: true}, `  "headers": {
    "traceparent": "00-ab-cd-01"
  },
  "payload_kind": "json",
  "payload": {
    "to": "a\u0026b@example.com"
  }
}`},
		{"one event with size", outboxadmin.EventOptions{Payload: true, PayloadSize: true}, `  "headers": {
    "traceparent": "00-ab-cd-01"
  },
  "payload_kind": "json",
  "payload_size": 25,
  "payload": {
    "to": "a\u0026b@example.com"
  }
}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := indent(t, outboxadmin.NewEvent(rec, tc.opts)), head+tc.tail; got != want {
				t.Errorf("JSON:\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestEventJSONFollowsTheEncoder: characters such as '<' are escaped by
// json.Marshal and kept by an Encoder told not to escape them, in the
// event as in the document around it.
func TestEventJSONFollowsTheEncoder(t *testing.T) {
	env := outbox.MustEnvelope(outbox.EventName("Note"), outbox.WithJSON([]byte(`"<b>&"`)))
	doc := map[string]any{"title": "<events>", "events": []outboxadmin.Event{
		outboxadmin.NewEvent(record(env), outboxadmin.EventOptions{Payload: true}),
		outboxadmin.NewEvent(record(env), outboxadmin.EventOptions{PayloadSize: true}),
	}}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		t.Fatal(err)
	}
	plain := buf.String()
	escaped, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"title":"<events>"`, `"last_error":"smtp 550: <mailbox> unavailable"`, `"payload":"<b>&"`} {
		if !strings.Contains(plain, s) {
			t.Errorf("without escaping, %s has no %s", plain, s)
		}
		if esc := strings.NewReplacer("<", `\u003c`, ">", `\u003e`, "&", `\u0026`).Replace(s); !strings.Contains(string(escaped), esc) {
			t.Errorf("json.Marshal: %s has no %s", escaped, esc)
		}
	}
	if n := strings.Count(plain, `"payload_size":6`); n != 1 {
		t.Errorf("payload_size %d times, want once (the event that asked for it): %s", n, plain)
	}
}

// TestEventPayloads: bytes are base64, stored JSON that does not parse is a
// string, an empty payload still has its size, and an envelope without
// headers has an empty object.
func TestEventPayloads(t *testing.T) {
	all := outboxadmin.EventOptions{Payload: true, PayloadSize: true}
	for _, tc := range []struct {
		name              string
		env               outbox.Envelope
		kind, payload     string
		size              int
		wantSizeInTheJSON bool
	}{
		{"bytes", outbox.MustEnvelope(outbox.EventName("Pdf"), outbox.WithBytes([]byte{0, 1, 0xfe, 0xff})), "bytes", `"AAH+/w=="`, 4, true},
		{"empty bytes", outbox.MustEnvelope(outbox.EventName("Ping"), outbox.WithBytes(nil)), "bytes", `""`, 0, true},
		{"JSON that does not parse", restore(t, outbox.EnvelopeFields{ID: "x", Type: "Broken", Payload: `{"a":`, Kind: outbox.PayloadJSON}),
			"json", `"{\"a\":"`, 5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := outboxadmin.NewEvent(record(tc.env), all)
			if e.PayloadKind != tc.kind || string(e.Payload) != tc.payload || e.PayloadSize != tc.size || e.Headers == nil || len(e.Headers) != 0 {
				t.Errorf("%+v, want kind %s, payload %s, size %d, no headers", e, tc.kind, tc.payload, tc.size)
			}
			b, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]json.RawMessage
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			if _, ok := doc["payload_size"]; !ok || string(doc["headers"]) != "{}" {
				t.Errorf("JSON %s: want payload_size and \"headers\": {}", b)
			}
		})
	}
}

// TestEventOfAnUndecodableRow: the row's fields and the decode error, no
// envelope fields; payload_size 0 when asked for, no headers.
func TestEventOfAnUndecodableRow(t *testing.T) {
	rec := outbox.Record{ID: "01J0000000000000000000000B", Status: outbox.StatusDead, Attempts: 1, CreatedAt: created,
		Err: errors.New("outbox: stored event 01J0000000000000000000000B cannot be decoded: headers: invalid JSON")}
	want := map[outboxadmin.EventOptions]string{
		{Payload: true}: `{"id":"01J0000000000000000000000B","status":"DEAD","attempts":1,"created_at":"2026-03-01T09:00:00.123Z",` +
			`"decode_error":"outbox: stored event 01J0000000000000000000000B cannot be decoded: headers: invalid JSON"}`,
		{Payload: true, PayloadSize: true}: `{"id":"01J0000000000000000000000B","status":"DEAD","attempts":1,"created_at":"2026-03-01T09:00:00.123Z",` +
			`"payload_size":0,"decode_error":"outbox: stored event 01J0000000000000000000000B cannot be decoded: headers: invalid JSON"}`,
	}
	for opts, w := range want {
		b, err := json.Marshal(outboxadmin.NewEvent(rec, opts))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != w {
			t.Errorf("%+v:\n%s\nwant\n%s", opts, b, w)
		}
	}
}

// TestEventDecodes: what an Event encodes decodes into an Event, refusing
// unknown fields — the shape clients of the tools rely on.
func TestEventDecodes(t *testing.T) {
	env := outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithAggregate(outbox.AggregateName("Order"), "o-1"),
		outbox.WithJSON([]byte(`{"n":1}`)), outbox.WithHeader("k", "v"))
	in := outboxadmin.NewEvent(record(env), outboxadmin.EventOptions{Payload: true, PayloadSize: true})
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var out outboxadmin.Event
	if err := dec.Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.ID != env.ID() || out.AggregateID != "o-1" || out.Headers["k"] != "v" || string(out.Payload) != `{"n":1}` ||
		out.PayloadSize != 7 || !out.DoneAt.Equal(created.Add(2*time.Minute)) || out.DoneAt.Location() != time.UTC {
		t.Errorf("decoded %+v from %s", out, b)
	}
}

func TestPayloadText(t *testing.T) {
	for _, tc := range []struct {
		env        outbox.Envelope
		kind, text string
	}{
		{outbox.MustEnvelope(outbox.EventName("A"), outbox.WithJSON([]byte(` {"a": 1}`))), "json", ` {"a": 1}`},
		{outbox.MustEnvelope(outbox.EventName("B"), outbox.WithBytes([]byte("pdf"))), "bytes", "cGRm"},
		{outbox.Envelope{}, "", ""},
	} {
		if kind, text := outboxadmin.PayloadText(tc.env); kind != tc.kind || text != tc.text {
			t.Errorf("PayloadText(%s) = %q, %q; want %q, %q", tc.env.Type(), kind, text, tc.kind, tc.text)
		}
	}
}
