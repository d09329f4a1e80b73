package outboxprom_test

import (
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	outboxprom "github.com/go-outbox/outbox/metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// placed labels the benchmarks' event.
var placed = outbox.EventLabels{Type: "OrderPlaced"}

// BenchmarkMetricsPerEvent is the CPU cost of the Metrics calls one event
// makes on the hot path: written, enqueued, latency, duration, delivered,
// and its share of an ack batch.
func BenchmarkMetricsPerEvent(b *testing.B) {
	m, err := outboxprom.New(outboxprom.Options{Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		m.EventsWritten(placed, 1)
		m.EventEnqueued(placed, outbox.PathHot)
		m.CommitToDelivery(placed, 3*time.Millisecond)
		m.DeliveryDuration(placed, "done", time.Millisecond)
		m.Delivered(placed)
		m.AckBatch(1)
	}
}
