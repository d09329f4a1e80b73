package outbox

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func newTestPoller(t *testing.T, h *harness, mut func(*Config)) *poller {
	t.Helper()
	cfg := h.cfg
	cfg.PollBatchSize = 10
	if mut != nil {
		mut(&cfg)
	}
	return newPoller(cfg, h.d.claims, h.d)
}

func TestPollOnce(t *testing.T) {
	h := newHarness(t, nil)
	delivered := make(chan string, 10)
	_ = h.reg.Handle(EventName("E"), func(_ context.Context, e Envelope) error { delivered <- e.ID(); return nil })
	p := newTestPoller(t, h, nil)

	// Before the dispatcher runs there is no capacity: nothing is claimed.
	if n, more, err := p.PollOnce(context.Background()); n != 0 || more || err != nil || h.st.callCount("Claim") != 0 {
		t.Fatalf("PollOnce before Start = %d, %v, %v (claims %d)", n, more, err, h.st.callCount("Claim"))
	}
	h.start(t)

	now := h.clk.Now()
	due, retry, future := evt("E"), evt("E"), evt("E")
	h.st.put(Record{ID: due.ID(), Envelope: due, Status: StatusNew, CreatedAt: now.Add(-time.Minute), AvailableAt: now.Add(-time.Minute)})
	h.st.put(Record{ID: retry.ID(), Envelope: retry, Status: StatusRetry, Attempts: 1, CreatedAt: now.Add(-time.Hour), AvailableAt: now})
	h.st.put(Record{ID: future.ID(), Envelope: future, Status: StatusNew, CreatedAt: now, AvailableAt: now.Add(time.Hour)})
	h.st.put(Record{ID: "corrupt", Err: errors.New("bad headers"), Status: StatusNew, CreatedAt: now, AvailableAt: now})

	n, more, err := p.PollOnce(context.Background())
	if err != nil || n != 2 || more {
		t.Fatalf("PollOnce = %d, %v, %v; want 2, false, nil", n, more, err)
	}
	h.waitStatus(t, due.ID(), StatusDone)
	h.waitStatus(t, retry.ID(), StatusDone)
	if r := h.st.get(future.ID()); r.Status != StatusNew || r.LockedBy != "" {
		t.Errorf("future event touched: %+v", r)
	}
	if r := h.st.get("corrupt"); r.Status != StatusDead || !strings.Contains(r.LastError, "bad headers") {
		t.Errorf("undecodable row = %+v, want DEAD with the decode error", r)
	}
	if h.metrics.get("ColdEnqueued") != 2 || h.metrics.get("DispatchDead") != 1 {
		t.Errorf("metrics = %v", h.metrics.counts)
	}

	h.st.setFail("Claim", errors.New("db down"))
	if _, _, err := p.PollOnce(context.Background()); err == nil || !strings.Contains(err.Error(), "db down") {
		t.Errorf("claim failure: err = %v", err)
	}
}

// TestPollOnceClaimsGrowAndAskForMore: a claim takes what the queue has
// room for, up to maxClaimGrowth batches; a full claim asks for another.
func TestPollOnceClaimsGrowAndAskForMore(t *testing.T) {
	h := newHarness(t, nil)
	_ = h.reg.Handle(EventName("E"), func(context.Context, Envelope) error { return nil })
	h.start(t)
	p := newTestPoller(t, h, func(c *Config) { c.PollBatchSize = 2 })
	for range 2*maxClaimGrowth + 3 {
		e := evt("E")
		h.st.put(Record{ID: e.ID(), Envelope: e, Status: StatusNew, CreatedAt: h.clk.Now(), AvailableAt: h.clk.Now()})
	}
	if n, more, err := p.PollOnce(context.Background()); n != 2*maxClaimGrowth || !more || err != nil {
		t.Errorf("first PollOnce = %d, %v, %v; want %d, true, nil", n, more, err, 2*maxClaimGrowth)
	}
	if n, more, err := p.PollOnce(context.Background()); n != 3 || more || err != nil {
		t.Errorf("second PollOnce = %d, %v, %v; want 3, false, nil", n, more, err)
	}
}

func TestPollerLoop(t *testing.T) {
	h := newHarness(t, nil)
	_ = h.reg.Handle(EventName("E"), func(context.Context, Envelope) error { return nil })
	h.start(t)
	p := newTestPoller(t, h, func(c *Config) { c.PollInterval = 5 * time.Millisecond })
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("second Start: err = %v", err)
	}
	e := evt("E")
	h.st.put(Record{ID: e.ID(), Envelope: e, Status: StatusNew, CreatedAt: h.clk.Now(), AvailableAt: h.clk.Now()})
	h.waitStatus(t, e.ID(), StatusDone)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := p.Start(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: err = %v, want ErrClosed", err)
	}
}

func TestPollWaitsForRoomForAFullBatch(t *testing.T) {
	release := make(chan struct{})
	h := newHarness(t, func(c *Config) { c.Workers, c.ColdQueueSize = 1, 4 })
	_ = h.reg.Handle(EventName("E"), func(context.Context, Envelope) error { <-release; return nil })
	h.start(t)
	defer close(release)
	p := newTestPoller(t, h, func(c *Config) { c.PollBatchSize = 3 })
	for range 10 {
		e := evt("E")
		h.st.put(Record{ID: e.ID(), Envelope: e, Status: StatusNew, CreatedAt: h.clk.Now(), AvailableAt: h.clk.Now()})
	}
	if n, _, busy, err := p.poll(context.Background()); n != 4 || busy || err != nil {
		t.Fatalf("first poll = %d, busy %v, %v; want 4 queued (the room in the queue)", n, busy, err)
	}
	// One event is with the blocked worker, three wait in the queue: room
	// for one, not for a batch of three. The poller claims nothing and asks
	// to be called again soon.
	deadline := time.Now().Add(5 * time.Second)
	for free, _ := h.d.room(); free != 1 && time.Now().Before(deadline); free, _ = h.d.room() {
		time.Sleep(time.Millisecond)
	}
	claims := h.st.callCount("Claim")
	if n, more, busy, err := p.poll(context.Background()); n != 0 || more || !busy || err != nil || h.st.callCount("Claim") != claims {
		t.Errorf("poll with room for 1 of 3 = %d, %v, busy %v, %v (claims %d -> %d); want nothing claimed, busy",
			n, more, busy, err, claims, h.st.callCount("Claim"))
	}
}

// TestRetryReclaimedAtOnceIsDelivered: a claim that takes a failed event
// back the moment its RETRY is stored (its retry is due at once) must
// deliver it, not turn it away as still held by the failed delivery —
// which would leave it claimed, undelivered, until its lease ran out.
func TestRetryReclaimedAtOnceIsDelivered(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.RetryPolicy = RetryPolicyFunc(func(int) time.Duration { return 0 })
	})
	var calls int
	delivered := make(chan struct{})
	_ = h.reg.Handle(EventName("E"), func(context.Context, Envelope) error {
		calls++ // the harness's workers run one delivery of this event at a time
		if calls == 1 {
			return errors.New("first attempt fails")
		}
		close(delivered)
		return nil
	})
	h.start(t)
	p := newTestPoller(t, h, nil)
	polled := make(chan int, 1)
	h.st.setAfter("MarkRetry", func() {
		n, _, err := p.PollOnce(context.Background())
		if err != nil {
			t.Errorf("PollOnce: %v", err)
		}
		polled <- n
	})
	e := evt("E")
	h.commit(t, e)
	if n := <-polled; n != 1 {
		t.Fatalf("the claim right after the RETRY queued %d events, want 1", n)
	}
	select {
	case <-delivered:
	case <-time.After(5 * time.Second):
		t.Fatalf("the re-claimed event was not delivered: %+v", h.st.get(e.ID()))
	}
	h.waitStatus(t, e.ID(), StatusDone)
}

// TestPollerReservesRoomForClaimsInFlight: claims in flight never take
// more than the cold queue has room for, together.
func TestPollerReservesRoomForClaimsInFlight(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ColdQueueSize = 5000 })
	h.start(t)
	p := newTestPoller(t, h, func(c *Config) { c.PollBatchSize = 50 })
	var got []int
	for {
		n, _, ok := p.reserve()
		if !ok {
			break
		}
		got = append(got, n)
	}
	if want := []int{2000, 2000, 1000}; !slices.Equal(got, want) {
		t.Fatalf("reservations %v, want %v", got, want)
	}
	p.unreserve(2000)
	if n, concurrent, ok := p.reserve(); !ok || n != 2000 || !concurrent {
		t.Fatalf("after a claim ended: %d, %v; want 2000", n, ok)
	}
}
