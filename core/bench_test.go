package outbox_test

import (
	"context"
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

func BenchmarkRegistryLookup(b *testing.B) {
	r := outbox.NewRegistry()
	for _, n := range []string{"A", "B", "C", "D", "E", "F", "G", "H"} {
		if err := r.Handle(outbox.EventName(n), nil); err == nil {
			b.Fatal("nil listener accepted")
		}
		if err := r.Handle(outbox.EventName(n), func(context.Context, outbox.Envelope) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if r.ListenerFor("__GLOBAL__", "E") == nil {
			b.Fatal("no listener")
		}
	}
}
