package outbox_test

import (
	"testing"

	outbox "github.com/go-outbox/outbox/core"
)

var sinkEnv outbox.Envelope

func BenchmarkNewEnvelope(b *testing.B) {
	payload := []byte(`{"order":"o-1","amount":1200,"currency":"EUR","lines":[{"sku":"A","qty":2}]}`)
	b.ReportAllocs()
	for b.Loop() {
		e, err := outbox.NewEnvelope(outbox.EventName("OrderPlaced"),
			outbox.WithAggregate(outbox.AggregateName("Order"), "o-1"),
			outbox.WithHeader("trace-id", "abc"), outbox.WithJSON(payload))
		if err != nil {
			b.Fatal(err)
		}
		sinkEnv = e
	}
}

func BenchmarkULID(b *testing.B) {
	b.ReportAllocs()
	var s string
	for b.Loop() {
		s = outbox.NewULID()
	}
	_ = s
}

func BenchmarkULIDParallel(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = outbox.NewULID()
		}
	})
}
