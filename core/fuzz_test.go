package outbox_test

import (
	"bytes"
	"errors"
	"testing"
	"unicode/utf8"

	outbox "github.com/go-outbox/outbox/core"
)

// FuzzNewEnvelope checks that envelope construction never panics, that every
// failure is a classified error, and that an accepted envelope holds exactly
// what it was given.
func FuzzNewEnvelope(f *testing.F) {
	f.Add("OrderPlaced", "Order", "o-1", "trace", "abc", []byte(`{"id":1}`), true)
	f.Add("", "", "", "", "", []byte(nil), false)
	f.Add("T", "A", "\x00", "k\xff", "v", []byte{0, 1, 2, 255}, false)
	f.Add("T", "A", "é", "", "v", []byte(`{"s":"\u0000"}`), true)
	f.Fuzz(func(t *testing.T, typ, agg, aggID, key, value string, payload []byte, asJSON bool) {
		opts := []outbox.EnvelopeOption{outbox.WithAggregate(outbox.AggregateName(agg), aggID), outbox.WithHeader(key, value)}
		if asJSON {
			opts = append(opts, outbox.WithJSON(payload))
		} else {
			opts = append(opts, outbox.WithBytes(payload))
		}
		e, err := outbox.NewEnvelope(outbox.EventName(typ), opts...)
		if err != nil {
			if !errors.Is(err, outbox.ErrInvalidEnvelope) && !errors.Is(err, outbox.ErrPayloadTooLarge) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		if e.Type() != typ || e.AggregateType() != agg || e.AggregateID() != aggID {
			t.Fatalf("fields changed: %q %q %q", e.Type(), e.AggregateType(), e.AggregateID())
		}
		if v, ok := e.Header(key); !ok || v != value || key == "" {
			t.Fatalf("header %q=%q lost (got %q, %v)", key, value, v, ok)
		}
		if !bytes.Equal(e.Payload(), payload) && !(len(payload) == 0 && len(e.Payload()) == 0) {
			t.Fatalf("payload changed")
		}
		for _, s := range []string{typ, agg, aggID, key, value} {
			if !utf8.ValidString(s) {
				t.Fatalf("accepted invalid UTF-8 %q", s)
			}
		}
		payload = append(payload, 'x') // the envelope keeps its own copy
		if len(e.Payload()) == len(payload) {
			t.Fatal("envelope shares the caller's payload buffer")
		}
	})
}
