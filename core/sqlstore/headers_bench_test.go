package sqlstore

import (
	"strconv"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
)

// BenchmarkHeaderCodec measures the stored form of headers: encodeHeaders
// as Insert calls it, and the decoding recordScan does.
func BenchmarkHeaderCodec(b *testing.B) {
	for _, n := range []int{1, 8} {
		opts := []outbox.EnvelopeOption{outbox.WithJSON([]byte(`{}`))}
		for i := range n {
			opts = append(opts, outbox.WithHeader("header-"+strconv.Itoa(i), "4bf92f3577b34da6a3ce929d0e0e4736"))
		}
		e := outbox.MustEnvelope(outbox.EventName("OrderPlaced"), opts...)
		stored := encodeHeaders(e).(string)
		b.Run("encode/headers="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if encodeHeaders(e) == nil {
					b.Fatal("no headers encoded")
				}
			}
		})
		b.Run("decode/headers="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if h, err := decodeHeaders(stored); err != nil || len(h) != n {
					b.Fatal(err)
				}
			}
		})
	}
}
