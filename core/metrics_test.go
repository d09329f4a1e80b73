package outbox_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
	"github.com/go-outbox/outbox/core/outboxtest"
)

// recordingMetrics records every call, by method and event type.
type recordingMetrics struct {
	outbox.NopMetrics
	mu       sync.Mutex
	counts   map[string]int
	backlogs []outbox.Backlog
}

func (m *recordingMetrics) add(key string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counts == nil {
		m.counts = map[string]int{}
	}
	m.counts[key] += n
}

func (m *recordingMetrics) get(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[key]
}

// key names a counter of l: its type, then "@tenant" for an event with a
// tenant.
func key(l outbox.EventLabels) string {
	if l.Tenant != "" {
		return l.Type + "@" + l.Tenant
	}
	return l.Type
}

func (m *recordingMetrics) EventsWritten(l outbox.EventLabels, n int) { m.add("written/"+key(l), n) }
func (m *recordingMetrics) EventEnqueued(l outbox.EventLabels, p outbox.Path) {
	m.add("enqueued/"+p.String()+"/"+key(l), 1)
}
func (m *recordingMetrics) EventDropped(l outbox.EventLabels) { m.add("dropped/"+key(l), 1) }
func (m *recordingMetrics) Delivered(l outbox.EventLabels)    { m.add("delivered/"+key(l), 1) }
func (m *recordingMetrics) Failed(l outbox.EventLabels)       { m.add("failed/"+key(l), 1) }
func (m *recordingMetrics) Dead(l outbox.EventLabels)         { m.add("dead/"+key(l), 1) }
func (m *recordingMetrics) ListenerDuration(l outbox.EventLabels, d time.Duration) {
	if d >= 0 {
		m.add("duration/"+key(l), 1)
	}
}
func (m *recordingMetrics) CommitToDelivery(l outbox.EventLabels, d time.Duration) {
	if d >= 0 {
		m.add("latency/"+key(l), 1)
	}
}
func (m *recordingMetrics) Claimed(_ time.Duration, n int) { m.add("claims", 1); m.add("claimed", n) }
func (m *recordingMetrics) AckBatch(n int)                 { m.add("acked", n) }
func (m *recordingMetrics) Backlog(b outbox.Backlog) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.backlogs = append(m.backlogs, b)
}

func (m *recordingMetrics) lastBacklog() (outbox.Backlog, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.backlogs) == 0 {
		return outbox.Backlog{}, 0
	}
	return m.backlogs[len(m.backlogs)-1], len(m.backlogs)
}

func TestMetricsCountWritesDeliveriesFailuresAndDead(t *testing.T) {
	store := outboxmem.New()
	m := &recordingMetrics{}
	c := newClient(t, store, outbox.Config{Metrics: m, MaxAttempts: 2, PollInterval: 10 * time.Millisecond,
		RetryPolicy:     outbox.RetryPolicyFunc(func(int) time.Duration { return time.Millisecond }),
		MetricsInterval: 20 * time.Millisecond})
	if err := c.Handle(outbox.EventName("Ping"), func(context.Context, outbox.Envelope) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := c.Handle(outbox.EventName("Bad"), func(context.Context, outbox.Envelope) error { return errors.New("boom") }); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The failing event has a tenant: every counter of it carries it.
	bad := outbox.MustEnvelope(outbox.EventName("Bad"), outbox.WithJSON([]byte(`{}`)), outbox.WithTenant("acme"))
	if _, err := writeIn(store, c, ping(), ping(), bad, ping()); err != nil {
		t.Fatal(err)
	}
	// A rolled-back write is not counted.
	_ = store.InTx(context.Background(), func(ctx context.Context) error {
		if _, err := c.Write(ctx, ping()); err != nil {
			return err
		}
		return errors.New("roll back")
	})
	outboxtest.Eventually(t, 5*time.Second, "3 delivered, 1 dead", func() bool {
		return m.get("delivered/Ping") == 3 && m.get("dead/Bad@acme") == 1 && m.get("acked") == 3
	})
	for key, want := range map[string]int{
		"written/Ping": 3, "written/Bad@acme": 1, "written/Bad": 0,
		"enqueued/hot/Ping": 3, "enqueued/hot/Bad@acme": 1, "enqueued/cold/Bad@acme": 1, // its retry came from the poller
		"failed/Bad@acme": 1, "dead/Bad@acme": 1, "delivered/Bad@acme": 0, "failed/Ping": 0, "dropped/Ping": 0,
		"duration/Ping": 3, "duration/Bad@acme": 2, "latency/Ping": 3, "latency/Bad@acme": 2, "dead/Bad": 0,
	} {
		if got := m.get(key); got != want {
			t.Errorf("%s = %d, want %d", key, got, want)
		}
	}
	if m.get("claims") == 0 || m.get("claimed") != 1 {
		t.Errorf("claims %d claimed %d; want some claims, 1 event claimed", m.get("claims"), m.get("claimed"))
	}
	outboxtest.Eventually(t, 5*time.Second, "a backlog sample with the DEAD event", func() bool {
		b, _ := m.lastBacklog()
		return b.Dead == 1 && b.Pending == 0 && b.OldestPending == 0
	})
}

func TestBacklogSampling(t *testing.T) {
	store := outboxmem.New()
	m := &recordingMetrics{}
	// Writer only: nothing delivers, the events stay pending.
	c := newClient(t, store, outbox.Config{Metrics: m, Mode: outbox.ModeWriterOnly, MetricsInterval: 10 * time.Millisecond})
	if _, err := writeIn(store, c, ping(), ping()); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	outboxtest.Eventually(t, 5*time.Second, "two samples of 2 pending", func() bool {
		b, n := m.lastBacklog()
		return n >= 2 && b.Pending == 2 && b.OldestPending >= 0
	})
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, n := m.lastBacklog()
	time.Sleep(30 * time.Millisecond)
	if _, after := m.lastBacklog(); after != n {
		t.Errorf("%d samples after Close", after-n)
	}

	// Negative: never sampled.
	off := &recordingMetrics{}
	c = newClient(t, store, outbox.Config{Metrics: off, Mode: outbox.ModeWriterOnly, MetricsInterval: -1})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	if _, n := off.lastBacklog(); n != 0 {
		t.Errorf("%d samples with MetricsInterval < 0", n)
	}
}

type ctxKey struct{}

func TestInterceptorAroundPassesItsContext(t *testing.T) {
	store := outboxmem.New()
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	wrap := func(name string) outbox.Interceptor {
		return outbox.Interceptor{
			Before: func(context.Context, outbox.Envelope) error { note("before " + name); return nil },
			Around: func(ctx context.Context, _ outbox.Envelope, next func(context.Context) error) error {
				note("around " + name)
				err := next(context.WithValue(ctx, ctxKey{}, name))
				note("around " + name + " done")
				return err
			},
			After: func(ctx context.Context, _ outbox.Envelope, err error) {
				if ctx.Value(ctxKey{}) != nil {
					t.Error("After saw the context an Around passed on")
				}
				note("after " + name)
			},
		}
	}
	got := make(chan any, 1)
	c := newClient(t, store, outbox.Config{Interceptors: []outbox.Interceptor{wrap("a"), {}, wrap("b")}})
	if err := c.Handle(outbox.EventName("Ping"), func(ctx context.Context, _ outbox.Envelope) error {
		note("listener")
		got <- ctx.Value(ctxKey{})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := writeIn(store, c, ping()); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-got:
		if v != "b" {
			t.Errorf("listener saw %v, want the innermost Around's value b", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not delivered")
	}
	outboxtest.Eventually(t, 5*time.Second, "every hook ran", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 9
	})
	want := []string{"before a", "before b", "around a", "around b", "listener", "around b done", "around a done", "after b", "after a"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
}

func TestInterceptorAroundFailsAndPanics(t *testing.T) {
	store := outboxmem.New()
	m := &recordingMetrics{}
	calls := atomic.Int32{}
	c := newClient(t, store, outbox.Config{Metrics: m, MaxAttempts: 1, Interceptors: []outbox.Interceptor{{
		Around: func(_ context.Context, e outbox.Envelope, _ func(context.Context) error) error {
			calls.Add(1)
			if e.Type() == "Panic" {
				panic("around")
			}
			return errors.New("refused") // next is not called: the listener does not run
		},
	}}})
	for _, et := range []string{"Ping", "Panic"} {
		if err := c.Handle(outbox.EventName(et), func(context.Context, outbox.Envelope) error {
			t.Error("listener ran")
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := writeIn(store, c, ping(), outbox.MustEnvelope(outbox.EventName("Panic"), outbox.WithJSON([]byte(`{}`)))); err != nil {
		t.Fatal(err)
	}
	outboxtest.Eventually(t, 5*time.Second, "both DEAD", func() bool { return m.get("dead/Ping") == 1 && m.get("dead/Panic") == 1 })
	if calls.Load() != 2 {
		t.Errorf("Around ran %d times, want 2", calls.Load())
	}
}

func TestWithAddedHeaders(t *testing.T) {
	e := outbox.MustEnvelope(outbox.EventName("Ping"), outbox.WithJSON([]byte(`{}`)), outbox.WithHeader("a", "1"),
		outbox.WithAggregate(outbox.AggregateName("Order"), "o-1"), outbox.WithOrderingKey(""))
	got, err := e.WithAddedHeaders(map[string]string{"a": "2", "b": "3"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := got.Header("a"); v != "1" || got.NumHeaders() != 2 {
		t.Errorf("headers %v", got.Headers())
	}
	if v, _ := e.Header("b"); v != "" || e.NumHeaders() != 1 {
		t.Errorf("the original changed: %v", e.Headers())
	}
	if got.ID() != e.ID() || got.OrderingKey() != "" || got.PayloadString() != "{}" {
		t.Errorf("copy differs: %v %q", got.ID(), got.OrderingKey())
	}
	if got, _ = e.WithAddedHeaders(map[string]string{"a": "2"}, true); got.Headers()["a"] != "2" {
		t.Errorf("replace: %v", got.Headers())
	}
	for _, h := range []map[string]string{{"": "x"}, {"k": "a\x00b"}, {"k": "\xff"}} {
		if _, err := e.WithAddedHeaders(h, false); !errors.Is(err, outbox.ErrInvalidEnvelope) {
			t.Errorf("%q: %v", h, err)
		}
	}
}
