package outbox

import (
	"context"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
)

// BenchmarkColdDelivery measures the dispatcher's own cost per event on
// the cold path, as a drain pays it: a claimed record is queued, delivered
// to a listener that does nothing and acknowledged (in an in-memory store,
// so the cost is the dispatcher's, not a database's).
func BenchmarkColdDelivery(b *testing.B) {
	h := newHarness(b, func(c *Config) { c.Workers, c.Logger = DefaultWorkers, slog.New(slog.DiscardHandler) })
	var delivered atomic.Int64
	if err := h.reg.Handle(EventName("Bench"), ListenerFunc(func(context.Context, Envelope) error {
		delivered.Add(1)
		return nil
	})); err != nil {
		b.Fatal(err)
	}
	h.start(b)
	events := make([]Envelope, b.N)
	for i := range events {
		events[i] = MustEnvelope(EventName("Bench"), WithJSON([]byte(`{"n":1}`)), WithHeader("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
	}
	_, tx := withTx(context.Background())
	if err := h.st.Insert(context.Background(), tx, h.clk.Now(), h.d.owner, events); err != nil {
		b.Fatal(err)
	}
	recs := make([]Record, b.N)
	for i, e := range events {
		recs[i] = h.st.get(e.ID())
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, r := range recs {
		for !h.d.enqueueClaimed([]Record{r}, nil) {
			runtime.Gosched() // the queue is full: the workers free room
		}
	}
	for delivered.Load() < int64(b.N) {
		runtime.Gosched()
	}
	// The last listener returned; its ack follows.
	last := events[b.N-1].ID()
	for h.st.get(last).Status != StatusDone {
		h.d.claims.flushAcksNow()
	}
	b.StopTimer()
}
