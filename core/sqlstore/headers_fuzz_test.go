package sqlstore

import (
	"maps"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
)

// FuzzHeaderCodec checks that every header set an envelope accepts survives
// the stored encoding unchanged, and that decoding arbitrary column text
// never panics.
func FuzzHeaderCodec(f *testing.F) {
	f.Add("trace", "abc", "b", "", `{"a":"b"}`)
	f.Add("é", "\u2028", "x\"y", "\\", `{"a":1}`)
	f.Add("k", "<script>&", "z", "\t\n", `[`)
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, raw string) {
		if _, err := decodeHeaders(raw); err != nil {
			_ = err // corrupt text is an error, never a panic
		}
		e, err := outbox.NewEnvelope(outbox.EventName("T"), outbox.WithBytes(nil),
			outbox.WithHeader(k1, v1), outbox.WithHeader(k2, v2))
		if err != nil {
			return
		}
		enc, err := encodeHeaders(e)
		if err != nil {
			t.Fatalf("encode %v: %v", e.Headers(), err)
		}
		got, err := decodeHeaders(enc.(string))
		if err != nil {
			t.Fatalf("decode %q: %v", enc, err)
		}
		if !maps.Equal(got, e.Headers()) {
			t.Fatalf("round trip changed headers: %q -> %q -> %q", e.Headers(), enc, got)
		}
	})
}
