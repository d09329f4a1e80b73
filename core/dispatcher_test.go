package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

type harness struct {
	st      *memStore
	reg     *Registry
	clk     *stepClock
	metrics *countingMetrics
	cfg     Config // the dispatcher's and the writer's, defaults applied
	d       *dispatcher
	w       *writer
	log     *syncBuffer
}

func newHarness(t testing.TB, mut func(*Config)) *harness {
	t.Helper()
	logger, buf := bufferLogger()
	h := &harness{st: newMemStore(), reg: &Registry{}, clk: newStepClock(), metrics: &countingMetrics{}, log: buf}
	cfg := Config{
		Store: h.st, TxContext: fakeTxContext{}, Workers: 2, MaxAttempts: 3,
		RetryPolicy: RetryPolicyFunc(func(int) time.Duration { return time.Minute }),
		AckInterval: time.Millisecond, DrainTimeout: time.Second,
		Metrics: h.metrics, Logger: logger, Clock: h.clk,
	}
	if mut != nil {
		mut(&cfg)
	}
	h.cfg = cfg.WithDefaults()
	h.d = newDispatcher(h.cfg, h.reg, newClaims(h.cfg, ackRoom(h.cfg)))
	var err error
	if h.w, err = newWriter(h.cfg, h.d.claims, h.d); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) start(t testing.TB) {
	t.Helper()
	if err := h.d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.d.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

// commit writes events in a fresh transaction and commits it.
func (h *harness) commit(t *testing.T, events ...Envelope) []string {
	t.Helper()
	ctx, tx := withTx(context.Background())
	ids, err := h.w.Write(ctx, events...)
	if err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	return ids
}

func (h *harness) waitStatus(t *testing.T, id string, s Status) Record {
	t.Helper()
	waitFor(t, "event "+id+" to be "+s.String(), func() bool {
		r := h.st.get(id)
		return r.Status == s && r.LockedBy == ""
	})
	return h.st.get(id)
}

// closeReleases closes the dispatcher and checks that it gave ids back:
// NEW, unclaimed, no attempt used.
func (h *harness) closeReleases(t *testing.T, ids []string) {
	t.Helper()
	if err := h.d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if r := h.st.get(id); r.Status != StatusNew || r.LockedBy != "" || r.Attempts != 0 {
			t.Errorf("after Close, %s = %+v; want NEW, unclaimed, no attempt used", id, r)
		}
	}
}

func evt(typ string) Envelope {
	return MustEnvelope(EventName(typ), WithJSON([]byte(`{}`)))
}

func TestDispatcherOutcomes(t *testing.T) {
	tests := []struct {
		name         string
		listener     func(context.Context, Envelope) error
		routed       bool
		wantStatus   Status
		wantAttempts int
		wantDelay    time.Duration // AvailableAt - now for RETRY
		wantErr      string
		wantMetric   string
		mut          func(*Config)
	}{
		{"success", func(context.Context, Envelope) error { return nil }, true, StatusDone, 0, 0, "", "DispatchSuccess", nil},
		{"failure", func(context.Context, Envelope) error { return errors.New("boom") }, true, StatusRetry, 1, time.Minute, "boom", "DispatchFailure", nil},
		{"panic", func(context.Context, Envelope) error { panic("kaboom") }, true, StatusRetry, 1, time.Minute, "panic: kaboom", "DispatchFailure", nil},
		{"retry after", func(context.Context, Envelope) error { return RetryAfter(10*time.Second, "busy") }, true, StatusRetry, 0, 10 * time.Second, "busy", "", nil},
		{"permanent", func(context.Context, Envelope) error { return Permanent(errors.New("refused for good")) }, true, StatusDead, 1, 0, "refused for good", "DispatchDead", nil},
		{"wraps ErrPermanent", func(context.Context, Envelope) error { return fmt.Errorf("sink: %w", ErrPermanent) }, true, StatusDead, 1, 0, "sink: outbox: permanent failure", "DispatchDead", nil},
		{"permanent around a retry after", func(context.Context, Envelope) error { return Permanent(RetryAfter(time.Second, "never mind")) }, true, StatusDead, 1, 0, "never mind", "DispatchDead", nil},
		{"permanent panic value is no permanent failure", func(context.Context, Envelope) error { panic(ErrPermanent) }, true, StatusRetry, 1, time.Minute, "panic", "DispatchFailure", nil},
		{"unroutable", nil, false, StatusRetry, 0, DefaultUnroutedRetry, "no listener", "", nil},
		{"unroutable with UnroutedRetry negative", nil, false, StatusDead, 0, 0, "no listener", "DispatchDead",
			func(c *Config) { c.UnroutedRetry = -1 }},
		{"unroutable with UnroutedRetry", nil, false, StatusRetry, 0, 2 * time.Minute, "no listener", "",
			func(c *Config) { c.UnroutedRetry = 2 * time.Minute }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.mut)
			if tc.routed {
				if err := h.reg.Handle(EventName("E"), tc.listener); err != nil {
					t.Fatal(err)
				}
			}
			h.start(t)
			ids := h.commit(t, evt("E"))
			r := h.waitStatus(t, ids[0], tc.wantStatus)
			if r.Attempts != tc.wantAttempts {
				t.Errorf("attempts = %d, want %d", r.Attempts, tc.wantAttempts)
			}
			if !strings.Contains(r.LastError, tc.wantErr) {
				t.Errorf("last error = %q, want it to contain %q", r.LastError, tc.wantErr)
			}
			if tc.wantStatus == StatusRetry {
				if got := r.AvailableAt.Sub(h.clk.Now()); got != tc.wantDelay {
					t.Errorf("retry scheduled in %v, want %v", got, tc.wantDelay)
				}
			}
			if tc.wantMetric != "" && h.metrics.get(tc.wantMetric) != 1 {
				t.Errorf("metric %s = %d, want 1", tc.wantMetric, h.metrics.get(tc.wantMetric))
			}
			if h.metrics.get("HotEnqueued") != 1 {
				t.Errorf("HotEnqueued = %d, want 1", h.metrics.get("HotEnqueued"))
			}
			// The event is no longer held in this process.
			waitFor(t, "hold release", func() bool { return h.d.claims.held.len() == 0 })
		})
	}
}

func TestDispatcherLastAttemptGoesDead(t *testing.T) {
	h := newHarness(t, nil)
	attempts := make(chan int, 1)
	_ = h.reg.Handle(EventName("E"), func(ctx context.Context, _ Envelope) error {
		attempts <- DeliveryAttempt(ctx)
		return errors.New("still failing")
	})
	h.start(t)
	e := evt("E")
	h.st.put(Record{ID: e.ID(), Envelope: e, Status: StatusRetry, Attempts: 2, LockedBy: h.d.Owner(), LockedAt: h.clk.Now()})
	if !h.d.enqueueClaimed([]Record{{Envelope: e, Attempts: 2}}, nil) {
		t.Fatal("enqueueClaimed refused")
	}
	r := h.waitStatus(t, e.ID(), StatusDead)
	if r.Attempts != 3 || !strings.Contains(r.LastError, "still failing") {
		t.Errorf("dead record = attempts %d, error %q", r.Attempts, r.LastError)
	}
	if got := <-attempts; got != 3 {
		t.Errorf("DeliveryAttempt = %d, want 3", got)
	}
	if h.metrics.get("DispatchDead") != 1 || h.metrics.get("ColdEnqueued") != 1 {
		t.Errorf("metrics = %v", h.metrics.counts)
	}
}

func TestDispatcherInterceptors(t *testing.T) {
	var mu sync.Mutex
	var trace []string
	add := func(s string) { mu.Lock(); trace = append(trace, s); mu.Unlock() }
	ic := func(name string, beforeErr error) Interceptor {
		return Interceptor{
			Before: func(context.Context, Envelope) error { add("before " + name); return beforeErr },
			After: func(_ context.Context, _ Envelope, err error) {
				add("after " + name + " err=" + map[bool]string{true: "nil", false: "set"}[err == nil])
			},
		}
	}
	tests := []struct {
		name string
		ics  []Interceptor
		want string
		st   Status
	}{
		{"order", []Interceptor{ic("1", nil), ic("2", nil), {}}, "before 1,before 2,listener,after 2 err=nil,after 1 err=nil", StatusDone},
		{"short circuit", []Interceptor{ic("1", nil), ic("2", errors.New("deny")), ic("3", nil)}, "before 1,before 2,after 2 err=set,after 1 err=set", StatusRetry},
		{"after panics", []Interceptor{{After: func(context.Context, Envelope, error) { panic("after boom") }}, ic("1", nil)}, "before 1,listener,after 1 err=nil", StatusDone},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			trace = nil
			h := newHarness(t, func(c *Config) { c.Interceptors = tc.ics; c.Workers = 1 })
			_ = h.reg.Handle(EventName("E"), func(context.Context, Envelope) error { add("listener"); return nil })
			h.start(t)
			ids := h.commit(t, evt("E"))
			h.waitStatus(t, ids[0], tc.st)
			mu.Lock()
			got := strings.Join(trace, ",")
			mu.Unlock()
			if got != tc.want {
				t.Errorf("trace = %s\nwant    %s", got, tc.want)
			}
		})
	}
}

func TestDispatcherStaleOutcomeIsCounted(t *testing.T) {
	h := newHarness(t, nil)
	taken := make(chan struct{})
	_ = h.reg.Handle(EventName("E"), func(_ context.Context, e Envelope) error {
		// Meanwhile another instance took the claim over.
		h.st.mu.Lock()
		h.st.rows[e.ID()].LockedBy = "other-owner"
		h.st.mu.Unlock()
		close(taken)
		return nil
	})
	h.start(t)
	ids := h.commit(t, evt("E"))
	<-taken
	waitFor(t, "stale update", func() bool { return h.metrics.get("StaleUpdates") == 1 })
	if r := h.st.get(ids[0]); r.Status != StatusNew || r.LockedBy != "other-owner" {
		t.Errorf("fenced row changed: %+v", r)
	}
}

func TestDispatcherHotQueueFull(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Workers = 1; c.HotQueueSize = 1 })
	started, unblock := make(chan struct{}, 10), make(chan struct{})
	_ = h.reg.Handle(EventName("E"), func(context.Context, Envelope) error {
		started <- struct{}{}
		<-unblock
		return nil
	})

	// Not started: nothing is queued and the writer does not claim.
	if h.d.enqueueHot(evt("E"), time.Time{}) {
		t.Error("enqueueHot accepted before Start")
	}
	if free, _ := h.d.room(); free != 0 {
		t.Error("cold queue room > 0 before Start")
	}
	if h.d.takesHot(nil) {
		t.Error("dispatcher takes hot events before Start")
	}
	ctx, tx := withTx(context.Background())
	early, _ := h.w.Write(ctx, evt("E"))
	if r := h.st.get(early[0]); r.LockedBy != "" {
		t.Errorf("row written before Start is claimed by %q", r.LockedBy)
	}
	tx.Rollback()
	if r := h.st.get(early[0]); r.ID != "" {
		t.Errorf("rolled back row still stored: %+v", r)
	}

	h.start(t)
	if !h.d.takesHot(nil) {
		t.Error("running dispatcher does not take hot events")
	}
	a := h.commit(t, evt("E"))
	<-started // the worker holds a; the queue is empty again
	b := h.commit(t, evt("E"))
	c := h.commit(t, evt("E")) // queue full: left to the poller
	if h.metrics.get("HotDropped") != 1 {
		t.Errorf("HotDropped = %d, want 1", h.metrics.get("HotDropped"))
	}
	// The drop is a warning, at most one a minute, with how many events
	// were dropped since the last one.
	const full = "outbox: hot queue full"
	if n := strings.Count(h.log.String(), full); n != 1 || !strings.Contains(h.log.String(), "dropped=1 hot_queue_size=1") {
		t.Errorf("after the first drop, %d warnings, want 1 with dropped=1:\n%s", n, h.log.String())
	}
	d, e := h.commit(t, evt("E")), h.commit(t, evt("E"))
	if n := strings.Count(h.log.String(), full); n != 1 {
		t.Errorf("two more drops within a minute: %d warnings, want still 1:\n%s", n, h.log.String())
	}
	// A minute later (the warning's time moved back: the harness's clock
	// also drives the leases of the events in flight).
	h.d.hotFull.mu.Lock()
	h.d.hotFull.last = h.d.hotFull.last.Add(-hotFullWarnEvery)
	h.d.hotFull.mu.Unlock()
	f := h.commit(t, evt("E"))
	if n := strings.Count(h.log.String(), full); n != 2 || !strings.Contains(h.log.String(), "dropped=3 hot_queue_size=1") {
		t.Errorf("a drop a minute after the first warning: %d warnings, want 2, the second with dropped=3:\n%s", n, h.log.String())
	}
	if hot, _ := h.d.depths(); hot != 1 {
		t.Errorf("hot depth = %d, want 1", hot)
	}
	if r := h.st.get(c[0]); r.Status != StatusNew || r.LockedBy != "" {
		t.Errorf("row written while the hot queue was full = %+v, want NEW and unclaimed", r)
	}
	if n := h.st.callCount("Release"); n != 0 {
		t.Errorf("a row written while the queue was full needed a release (%d calls): it should be inserted unclaimed", n)
	}
	// A delayed event never takes the hot path.
	delayed := MustEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithAvailableAt(h.clk.Now().Add(time.Hour)))
	h.commit(t, delayed)
	if r := h.st.get(delayed.ID()); r.LockedBy != "" || !r.AvailableAt.Equal(h.clk.Now().Add(time.Hour)) {
		t.Errorf("delayed row = %+v", r)
	}
	if h.metrics.get("HotDropped") != 4 {
		t.Error("a delayed event was offered to the hot queue")
	}
	// The same event cannot be queued twice.
	if h.d.enqueueHot(h.st.get(a[0]).Envelope, time.Time{}) {
		t.Error("an event held in flight was queued again")
	}
	close(unblock)
	h.waitStatus(t, a[0], StatusDone)
	h.waitStatus(t, b[0], StatusDone)
	for _, ids := range [][]string{d, e, f} {
		if r := h.st.get(ids[0]); r.Status != StatusNew || r.LockedBy != "" {
			t.Errorf("row dropped from the hot path = %+v, want NEW and unclaimed for the poller", r)
		}
	}
}

func TestDispatcherCloseReleasesQueued(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Workers = 1; c.DrainTimeout = 20 * time.Millisecond })
	started := make(chan struct{}, 10)
	_ = h.reg.Handle(EventName("E"), func(ctx context.Context, _ Envelope) error {
		started <- struct{}{}
		<-ctx.Done() // stuck until Close cancels
		return ctx.Err()
	})
	if err := h.d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.d.Start(context.Background()); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("second Start: err = %v", err)
	}
	ids := h.commit(t, evt("E"), evt("E"), evt("E"))
	<-started
	h.closeReleases(t, ids)
	if err := h.d.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := h.d.Start(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: err = %v, want ErrClosed", err)
	}
	if h.d.enqueueHot(evt("E"), time.Time{}) || h.d.enqueueClaimed([]Record{{Envelope: evt("E")}}, nil) {
		t.Error("closed dispatcher accepted an event")
	}
	if h.d.takesHot(nil) {
		t.Error("closed dispatcher still takes hot events")
	}
}

func TestDispatcherCloseDrains(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Workers = 1; c.AckInterval = time.Hour; c.AckBatchSize = 1000 })
	_ = h.reg.Handle(EventName("E"), func(context.Context, Envelope) error { time.Sleep(time.Millisecond); return nil })
	if err := h.d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ids := h.commit(t, evt("E"), evt("E"), evt("E"), evt("E"))
	if err := h.d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Everything queued was delivered and the pending acks were flushed on Close.
	for _, id := range ids {
		if r := h.st.get(id); r.Status != StatusDone {
			t.Errorf("%s = %v after Close, want DONE", id, r.Status)
		}
	}
	if n := h.st.callCount("MarkDone"); n != 1 {
		t.Errorf("MarkDone called %d times, want one batched call", n)
	}
}

func TestDispatcherAckFailureLogged(t *testing.T) {
	h := newHarness(t, nil)
	h.st.setFail("MarkDone", errors.New("db down"))
	_ = h.reg.Handle(EventName("E"), func(context.Context, Envelope) error { return nil })
	h.start(t)
	ids := h.commit(t, evt("E"))
	waitFor(t, "ack retries", func() bool { return h.st.callCount("MarkDone") == storeAttempts })
	waitFor(t, "ack failure log", func() bool { return strings.Contains(h.log.String(), "could not mark events DONE") })
	if r := h.st.get(ids[0]); r.Status != StatusNew || r.LockedBy != h.d.Owner() {
		t.Errorf("row = %+v, want still NEW and owned for redelivery", r)
	}
}
