package sqlstore

import (
	"encoding/json"
	"maps"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
)

// FuzzHeaderCodec checks that every header set an envelope accepts survives
// the stored encoding unchanged, byte for byte what encoding/json writes,
// and that arbitrary column text decodes as encoding/json decodes it, or
// fails where it fails.
func FuzzHeaderCodec(f *testing.F) {
	f.Add("trace", "abc", "b", "", `{"a":"b"}`)
	f.Add("é", "\u2028", "x\"y", "\\", `{"a":1}`)
	f.Add("k", "<script>&", "z", "\t\n", `[`)
	f.Add("a", "b", "c", "d", ` { "a" : "b" , "a":"c"} `)
	f.Add("a", "b", "c", "d", `{"a":"\u00e9","b":null}`)
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, raw string) {
		got, err := decodeHeaders(raw)
		var want map[string]string
		if wantErr := json.Unmarshal([]byte(raw), &want); (err == nil) != (wantErr == nil) || err == nil && !maps.Equal(got, want) {
			t.Fatalf("decode %q = %q, %v; encoding/json: %q, %v", raw, got, err, want, wantErr)
		}
		e, err := outbox.NewEnvelope(outbox.EventName("T"), outbox.WithBytes(nil),
			outbox.WithHeader(k1, v1), outbox.WithHeader(k2, v2))
		if err != nil {
			return
		}
		enc := encodeHeaders(e)
		if std, _ := json.Marshal(e.Headers()); string(std) != enc.(string) {
			t.Fatalf("encode %q = %s, encoding/json writes %s", e.Headers(), enc, std)
		}
		got, err = decodeHeaders(enc.(string))
		if err != nil {
			t.Fatalf("decode %q: %v", enc, err)
		}
		if !maps.Equal(got, e.Headers()) {
			t.Fatalf("round trip changed headers: %q -> %q -> %q", e.Headers(), enc, got)
		}
	})
}
