package outbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gateClient is a started Client on a memStore, which keeps the control
// tables, with a step clock and quick polls.
type gateClient struct {
	*Client
	st  *memStore
	clk *stepClock
	log *syncBuffer
}

func newGateClient(t *testing.T, st *memStore, mut func(*Config)) *gateClient {
	t.Helper()
	logger, buf := bufferLogger()
	g := &gateClient{st: st, clk: newStepClock(), log: buf}
	cfg := Config{
		Store: st, TxContext: fakeTxContext{}, Workers: 1, PollInterval: 2 * time.Millisecond, ControlInterval: 10 * time.Millisecond,
		RetryPolicy: RetryPolicyFunc(func(int) time.Duration { return time.Millisecond }),
		AckInterval: time.Millisecond, DrainTimeout: time.Second, Lease: time.Hour, Logger: logger, Clock: g.clk,
	}
	if mut != nil {
		mut(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g.Client = c
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return g
}

func (g *gateClient) start(t *testing.T) {
	t.Helper()
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (g *gateClient) write(t *testing.T, events ...Envelope) []string {
	t.Helper()
	ctx, tx := withTx(context.Background())
	ids, err := g.Write(ctx, events...)
	if err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	return ids
}

// counter is a listener that counts its calls per event id.
type counter struct {
	mu    sync.Mutex
	calls map[string]int
	fail  atomic.Bool
}

func newCounter() *counter { return &counter{calls: map[string]int{}} }

func (c *counter) handle(_ context.Context, e Envelope) error {
	c.mu.Lock()
	c.calls[e.ID()]++
	c.mu.Unlock()
	if c.fail.Load() {
		return errors.New("downstream down")
	}
	return nil
}

func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.calls {
		n += v
	}
	return n
}

func (c *counter) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[id]
}

// A Client claims only the types it routes: another type's event is
// never claimed (not even by the hot path), stays NEW with no attempt
// used, and shows in Stats.Unrouted; a route added after Start takes
// effect.
func TestClientClaimsOnlyRoutedTypes(t *testing.T) {
	g := newGateClient(t, newMemStore(), nil)
	l := newCounter()
	if err := g.Handle(EventName("A"), l.handle); err != nil {
		t.Fatal(err)
	}
	g.start(t)
	a := g.write(t, evt("A"))[0]
	b := g.write(t, evt("B"))[0]
	waitFor(t, "A delivered", func() bool { return g.st.get(a).Status == StatusDone })
	time.Sleep(20 * time.Millisecond) // several polls
	if r := g.st.get(b); r.Status != StatusNew || r.LockedBy != "" || r.Attempts != 0 || r.LastError != "" {
		t.Fatalf("unrouted B = %+v; want NEW, never claimed", r)
	}
	st, err := g.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Unrouted) != 1 || st.Unrouted[0].Type != "B" || st.Unrouted[0].Pending != 1 {
		t.Fatalf("Stats.Unrouted = %+v; want B, 1 pending", st.Unrouted)
	}
	if err := g.Handle(EventName("B"), l.handle); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B delivered once routed", func() bool { return g.st.get(b).Status == StatusDone })
	if st, _ = g.Stats(context.Background()); len(st.Unrouted) != 0 {
		t.Fatalf("Stats.Unrouted = %+v once B is routed; want none", st.Unrouted)
	}
}

// ClaimAll keeps the behaviour of a Client that claims every type: an
// unrouted event is claimed and offered again after UnroutedRetry.
func TestClaimAllClaimsUnroutedTypes(t *testing.T) {
	g := newGateClient(t, newMemStore(), func(c *Config) { c.ClaimAll = true })
	if err := g.Handle(EventName("A"), newCounter().handle); err != nil {
		t.Fatal(err)
	}
	g.start(t)
	b := g.write(t, evt("B"))[0]
	waitFor(t, "B left for UnroutedRetry", func() bool {
		r := g.st.get(b)
		return r.Status == StatusRetry && r.LockedBy == ""
	})
	if r := g.st.get(b); r.Attempts != 0 || !r.AvailableAt.Equal(g.clk.Now().Add(DefaultUnroutedRetry)) {
		t.Fatalf("B = %+v; want due after UnroutedRetry, no attempt used", r)
	}
}

// A stored pause holds a type back: new events are not claimed, queued
// ones are given back unstarted with no attempt used, other types go on,
// and Resume delivers them. Health shows the pause.
func TestPauseHoldsBackQueuedAndNewEvents(t *testing.T) {
	g := newGateClient(t, newMemStore(), nil)
	l := newCounter()
	block := make(chan struct{})
	started := make(chan struct{}, 1)
	if err := g.Handle(EventName("A"), func(ctx context.Context, e Envelope) error {
		if l.total() == 0 {
			started <- struct{}{}
			<-block
		}
		return l.handle(ctx, e)
	}); err != nil {
		t.Fatal(err)
	}
	other := newCounter()
	if err := g.Handle(EventName("O"), other.handle); err != nil {
		t.Fatal(err)
	}
	g.start(t)
	first := g.write(t, evt("A"))[0]
	<-started // the only worker is busy: what follows is queued
	queued := g.write(t, evt("A"), evt("A"), evt("A"))
	if err := g.Pause(context.Background(), "A", "downstream maintenance"); err != nil {
		t.Fatal(err)
	}
	close(block)
	waitFor(t, "the first A delivered", func() bool { return g.st.get(first).Status == StatusDone })
	for _, id := range queued {
		waitFor(t, "queued A given back", func() bool { r := g.st.get(id); return r.LockedBy == "" })
	}
	later := g.write(t, evt("A"))[0]
	o := g.write(t, evt("O"))[0]
	waitFor(t, "another type delivered", func() bool { return g.st.get(o).Status == StatusDone })
	time.Sleep(20 * time.Millisecond)
	for _, id := range append(queued, later) {
		if r := g.st.get(id); r.Status != StatusNew || r.Attempts != 0 || r.LockedBy != "" || l.count(id) != 0 {
			t.Fatalf("paused %s = %+v, delivered %d times; want NEW, unclaimed, untouched", id, r, l.count(id))
		}
	}
	h, err := g.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Paused) != 1 || h.Paused[0].Scope != "A" || h.Paused[0].Reason != "downstream maintenance" ||
		!slices.ContainsFunc(h.Routes, func(r RouteState) bool { return r.Type == "A" && r.Paused }) {
		t.Fatalf("Health = %+v; want A paused", h)
	}
	if err := g.Resume(context.Background(), "A"); err != nil {
		t.Fatal(err)
	}
	for _, id := range append(queued, later) {
		waitFor(t, "resumed A delivered", func() bool { return g.st.get(id).Status == StatusDone })
	}
	if a := g.st.get(later).Attempts; a != 0 {
		t.Fatalf("a resumed event used %d attempts", a)
	}
}

// PauseAll stops every claim, and the hot path: nothing is delivered until
// Resume.
func TestPauseAllClaimsNothing(t *testing.T) {
	g := newGateClient(t, newMemStore(), nil)
	l := newCounter()
	if err := g.Handle(EventName("A"), l.handle); err != nil {
		t.Fatal(err)
	}
	g.start(t)
	if err := g.Pause(context.Background(), PauseAll, ""); err != nil {
		t.Fatal(err)
	}
	id := g.write(t, evt("A"))[0]
	time.Sleep(20 * time.Millisecond)
	if r := g.st.get(id); r.LockedBy != "" || l.total() != 0 {
		t.Fatalf("under PauseAll: %+v, %d deliveries; want nothing claimed", r, l.total())
	}
	if err := g.Resume(context.Background(), PauseAll); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "delivered after Resume", func() bool { return g.st.get(id).Status == StatusDone })
}

// A pause stored by another instance is obeyed after the refresh.
func TestPauseOfAnotherInstanceIsObeyed(t *testing.T) {
	st := newMemStore()
	g := newGateClient(t, st, nil)
	l := newCounter()
	if err := g.Handle(EventName("A"), l.handle); err != nil {
		t.Fatal(err)
	}
	g.start(t)
	if err := st.SetPause(context.Background(), Pause{Scope: "A", By: "other"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refresh to see the pause", func() bool {
		h, _ := g.Health(context.Background())
		return len(h.Paused) == 1
	})
	id := g.write(t, evt("A"))[0]
	time.Sleep(20 * time.Millisecond)
	if l.total() != 0 || g.st.get(id).LockedBy != "" {
		t.Fatal("a paused event was claimed")
	}
}

// A route's circuit breaker opens after BreakerFailures failures in a
// row: its other events are left pending with no attempt used, one probe
// runs per BreakerInterval, a failed probe reopens it and a successful
// one closes it; then everything is delivered, none DEAD.
func TestCircuitBreakerOpensProbesAndCloses(t *testing.T) {
	metrics := &breakerMetrics{}
	g := newGateClient(t, newMemStore(), func(c *Config) {
		c.BreakerFailures, c.BreakerInterval, c.MaxAttempts, c.Metrics = 3, time.Minute, 5, metrics
	})
	l := newCounter()
	l.fail.Store(true)
	if err := g.Handle(EventName("A"), l.handle); err != nil {
		t.Fatal(err)
	}
	g.start(t)
	var ids []string
	for range 20 {
		ids = append(ids, g.write(t, evt("A"))...)
	}
	waitFor(t, "the breaker to open", func() bool { return routeState(g, "A").Breaker == BreakerOpen })
	waitFor(t, "the queue given back", func() bool {
		for _, id := range ids {
			if g.st.get(id).LockedBy != "" {
				return false
			}
		}
		return true
	})
	if n := l.total(); n != 3 {
		t.Fatalf("%d deliveries before the breaker opened; want 3", n)
	}
	time.Sleep(20 * time.Millisecond)
	if n := l.total(); n != 3 {
		t.Fatalf("%d deliveries while open; want none after the 3", n)
	}
	g.clk.Advance(time.Minute) // a probe, which fails
	waitFor(t, "a failed probe", func() bool { return l.total() == 4 && routeState(g, "A").Breaker == BreakerOpen })
	time.Sleep(20 * time.Millisecond)
	if n := l.total(); n != 4 {
		t.Fatalf("%d deliveries after one probe; want 4", n)
	}
	l.fail.Store(false)
	g.clk.Advance(time.Minute)
	for _, id := range ids {
		waitFor(t, "delivery after recovery", func() bool { return g.st.get(id).Status == StatusDone })
	}
	rs := routeState(g, "A")
	if rs.Breaker != BreakerClosed || rs.Opens != 1 {
		t.Fatalf("route = %+v; want closed, opened once", rs)
	}
	for _, id := range ids {
		if n := g.st.get(id).Attempts; n > 1 {
			t.Errorf("%s used %d attempts; want at most 1", id, n)
		}
	}
	if got := metrics.states(); !slices.Equal(got, []string{BreakerOpen, BreakerHalfOpen, BreakerOpen, BreakerHalfOpen, BreakerClosed}) {
		t.Errorf("breaker transitions %v", got)
	}
}

// RetryAfter and permanent failures do not count against the route.
func TestBreakerIgnoresRetryAfterAndPermanent(t *testing.T) {
	g := newGateClient(t, newMemStore(), func(c *Config) { c.BreakerFailures = 2 })
	var n atomic.Int32
	if err := g.Handle(EventName("A"), func(context.Context, Envelope) error {
		if n.Add(1)%2 == 0 {
			return RetryAfter(time.Hour, "later")
		}
		return Permanent(errors.New("bad event"))
	}); err != nil {
		t.Fatal(err)
	}
	g.start(t)
	for range 6 {
		g.write(t, evt("A"))
	}
	waitFor(t, "six deliveries", func() bool { return n.Load() >= 6 })
	if rs := routeState(g, "A"); rs.Breaker != BreakerClosed || rs.Opens != 0 {
		t.Fatalf("route = %+v; want closed", rs)
	}
}

func routeState(g *gateClient, typ string) RouteState {
	h, _ := g.Health(context.Background())
	for _, r := range h.Routes {
		if r.Type == typ {
			return r
		}
	}
	return RouteState{Breaker: BreakerClosed}
}

type breakerMetrics struct {
	NopMetrics
	mu sync.Mutex
	s  []string
}

func (m *breakerMetrics) BreakerState(_, state string) {
	m.mu.Lock()
	m.s = append(m.s, state)
	m.mu.Unlock()
}

func (m *breakerMetrics) states() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.s)
}

// The limits of a route are shared among the live nodes that route it;
// the remainder of a concurrency goes to the first owners by name, and a
// node whose share is 0 claims none of the type.
func TestRouteLimitsAreSharedAmongLiveNodes(t *testing.T) {
	nodes := []Node{{Owner: "a"}, {Owner: "b"}, {Owner: "c", Types: []string{"A"}}, {Owner: "d", Types: []string{"X"}}}
	for _, tc := range []struct {
		owner     string
		alone     bool
		rate      float64
		conc      int
		sideClaim bool
	}{
		{owner: "b", alone: true, rate: 30, conc: 2, sideClaim: true},
		{owner: "a", rate: 10, conc: 1, sideClaim: true},
		{owner: "b", rate: 10, conc: 1, sideClaim: true},
		{owner: "c", rate: 10, conc: 0},
	} {
		cfg := Config{Store: newMemStore(), Owner: tc.owner, Routes: map[string]RoutePolicy{"A": {Rate: 30, Burst: 9, Concurrency: 2}}}.WithDefaults()
		reg := &Registry{}
		if err := reg.Handle(EventName("A"), newCounter().handle); err != nil {
			t.Fatal(err)
		}
		g := newGate(cfg, reg)
		if !tc.alone {
			g.setNodes(nodes)
		}
		h := Health{}
		g.health(&h)
		if r := h.Routes[0]; r.Rate != tc.rate || r.Concurrency != tc.conc {
			t.Errorf("%s (alone %v): rate %v, concurrency %d; want %v and %d", tc.owner, tc.alone, r.Rate, r.Concurrency, tc.rate, tc.conc)
		}
		if got := len(g.sideClaims(time.Now(), 100)) == 1; got != tc.sideClaim {
			t.Errorf("%s (alone %v): claims A: %v; want %v", tc.owner, tc.alone, got, tc.sideClaim)
		}
		if _, skip, _ := g.request(); !slices.Contains(skip, "A") {
			t.Errorf("%s: the main claim does not leave the limited A out: %v", tc.owner, skip)
		}
		// The others' nodes age out (they died): this one takes the whole.
		g.setNodes([]Node{{Owner: tc.owner}})
		h = Health{}
		g.health(&h)
		if r := h.Routes[0]; r.Rate != 30 || r.Concurrency != 2 {
			t.Errorf("%s alone again: rate %v, concurrency %d; want the whole limits", tc.owner, r.Rate, r.Concurrency)
		}
	}
}

// A limited route's claims take tokens: at most the burst at once, then
// about Rate a second; its events never take the hot path.
func TestRouteRateLimitTakesTokens(t *testing.T) {
	cfg := Config{Store: newMemStore(), Routes: map[string]RoutePolicy{"A": {Rate: 1, Burst: 3}}}.WithDefaults()
	g := newGate(cfg, &Registry{})
	s := g.sideClaims(time.Now(), 100)
	if len(s) != 1 || s[0].limit != 3 {
		t.Fatalf("first claim %+v; want A, limit 3 (the burst)", s)
	}
	g.claimedSide(s[0], []Record{{ID: "1"}})
	if s = g.sideClaims(time.Now(), 100); len(s) != 1 || s[0].limit != 2 {
		t.Fatalf("after one used: %+v; want the 2 tokens left", s)
	}
	g.claimedSide(s[0], []Record{{ID: "2"}, {ID: "3"}})
	if s = g.sideClaims(time.Now(), 100); len(s) != 0 {
		t.Fatalf("no token left, yet %+v", s)
	}
	if w := g.wait(time.Hour); w <= 0 || w > time.Second+time.Millisecond {
		t.Fatalf("wait for the next token %v; want up to a second", w)
	}
	if g.hot([]Envelope{evt("A")}) {
		t.Fatal("a limited event took the hot path")
	}
}

// Without a poller (ModeHotPathOnly), an open breaker probes with an
// event of the hot path once its interval has passed.
func TestBreakerProbesThroughTheHotPathWithoutAPoller(t *testing.T) {
	g := newGateClient(t, newMemStore(), func(c *Config) {
		c.Mode, c.BreakerFailures, c.BreakerInterval = ModeHotPathOnly, 2, time.Minute
	})
	l := newCounter()
	l.fail.Store(true)
	if err := g.Handle(EventName("A"), l.handle); err != nil {
		t.Fatal(err)
	}
	g.start(t)
	g.write(t, evt("A"))
	g.write(t, evt("A"))
	waitFor(t, "the breaker to open", func() bool { return routeState(g, "A").Breaker == BreakerOpen })
	held := g.write(t, evt("A"))[0]
	if r := g.st.get(held); r.LockedBy != "" {
		t.Fatalf("an event of an open route took the hot path: %+v", r)
	}
	l.fail.Store(false)
	g.clk.Advance(time.Minute)
	probe := g.write(t, evt("A"))[0]
	waitFor(t, "the hot probe delivered", func() bool { return g.st.get(probe).Status == StatusDone })
	waitFor(t, "the breaker closed", func() bool { return routeState(g, "A").Breaker == BreakerClosed })
	if r := g.st.get(held); r.Status != StatusNew || r.Attempts != 0 {
		t.Fatalf("the held event = %+v; want NEW for a poller, no attempt used", r)
	}
}

// Health reports the poller's last claim and the last database error,
// the live nodes (this Client's own heartbeat), and Close leaves.
func TestHealthReportsPollsErrorsAndNodes(t *testing.T) {
	st := newMemStore()
	g := newGateClient(t, st, func(c *Config) { c.MaxPollBackoff = 10 * time.Millisecond })
	if err := g.Handle(EventName("A"), newCounter().handle); err != nil {
		t.Fatal(err)
	}
	g.start(t)
	waitFor(t, "a poll", func() bool { h, _ := g.Health(context.Background()); return !h.LastPoll.IsZero() })
	h, err := g.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !h.Started || h.Nodes != 1 || h.LastError != "" || h.Mode != "full" {
		t.Fatalf("Health = %+v; want started, one node, no error", h)
	}
	nodes, _ := st.Nodes(context.Background(), time.Time{})
	if len(nodes) != 1 || nodes[0].Owner != g.Owner() || !slices.Equal(nodes[0].Types, []string{"A"}) {
		t.Fatalf("nodes %+v; want this Client, routing A", nodes)
	}
	st.setFail("Claim", errors.New("connection refused"))
	waitFor(t, "the error in Health", func() bool {
		h, _ := g.Health(context.Background())
		return h.LastError != "" && !h.LastErrorAt.IsZero()
	})
	st.setFail("Claim", nil)
	waitFor(t, "the error cleared by a good poll", func() bool { h, _ := g.Health(context.Background()); return h.LastError == "" })
	if err := g.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if nodes, _ := st.Nodes(context.Background(), time.Time{}); len(nodes) != 0 {
		t.Fatalf("nodes %+v after Close; want none", nodes)
	}
}

// The delivery's duration is reported with its result, and the backlog
// sample carries the retrying and in-flight gauges.
func TestDeliveryDurationResultAndBacklogGauges(t *testing.T) {
	m := &resultMetrics{results: map[string]int{}}
	g := newGateClient(t, newMemStore(), func(c *Config) { c.Metrics = m })
	if err := g.Handle(EventName("A"), func(_ context.Context, e Envelope) error {
		if string(e.Payload()) == `{"fail":true}` {
			return errors.New("no")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	g.start(t)
	g.write(t, evt("A"))
	g.write(t, MustEnvelope(EventName("A"), WithJSON([]byte(`{"fail":true}`))))
	waitFor(t, "a done and a retry", func() bool { return m.get("done") >= 1 && m.get("retry") >= 1 })
	b := backlogOf(Stats{ByStatus: map[Status]int64{StatusNew: 2, StatusRetry: 3}, Claimed: 4}, time.Now())
	if b.Retrying != 3 || b.InFlight != 4 || b.Pending != 5 {
		t.Fatalf("backlog %+v; want 3 retrying, 4 in flight of 5 pending", b)
	}
}

type resultMetrics struct {
	NopMetrics
	mu      sync.Mutex
	results map[string]int
}

func (m *resultMetrics) DeliveryDuration(_ EventLabels, result string, _ time.Duration) {
	m.mu.Lock()
	m.results[result]++
	m.mu.Unlock()
}

func (m *resultMetrics) get(r string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.results[r]
}

// Config.Validate checks Routes.
func TestValidateRoutes(t *testing.T) {
	for _, tc := range []struct {
		routes map[string]RoutePolicy
		want   string
	}{
		{map[string]RoutePolicy{"A": {Rate: 10}, "B": {Concurrency: 2}}, ""},
		{map[string]RoutePolicy{"A": {}}, "sets nothing"},
		{map[string]RoutePolicy{"A": {Rate: -1}}, "Rate is -1"},
		{map[string]RoutePolicy{"A": {Concurrency: -1}}, "Concurrency is -1"},
		{map[string]RoutePolicy{"A": {Rate: 1, Burst: -1}}, "Burst is -1"},
		{map[string]RoutePolicy{"": {Rate: 1}}, "event type"},
	} {
		err := Config{Store: newMemStore(), TxContext: fakeTxContext{}, Routes: tc.routes}.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.routes, err)
		case tc.want != "" && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: %v; want an ErrInvalidConfig saying %q", tc.routes, err, tc.want)
		}
	}
}

// A control refresh that keeps failing (control tables not migrated, say)
// warns once, shows in Health, and pauses keep their last state.
func TestControlRefreshFailureWarnsOnce(t *testing.T) {
	st := newMemStore()
	g := newGateClient(t, st, nil)
	if err := g.Handle(EventName("A"), newCounter().handle); err != nil {
		t.Fatal(err)
	}
	g.start(t)
	st.setFail("Pauses", errors.New("no such table: outbox_pauses"))
	waitFor(t, "several failed refreshes", func() bool { return st.callCount("Pauses") >= 5 })
	if n := strings.Count(g.log.String(), "level=WARN msg=\"outbox: control refresh failed"); n != 1 {
		t.Fatalf("%d warnings for a refresh that keeps failing; want 1\n%s", n, g.log.String())
	}
	if h, _ := g.Health(context.Background()); !strings.Contains(h.LastError, "no such table") {
		t.Fatalf("Health.LastError = %q", h.LastError)
	}
	st.setFail("Pauses", nil)
	waitFor(t, "the refresh to work again", func() bool { return strings.Contains(g.log.String(), "control refresh works again") })
}

// The main claim's filters stay within MaxClaimTypes however many types a
// Client routes or holds back, so that a SQL store never refuses a poll.
func TestClaimFiltersStayWithinTheBound(t *testing.T) {
	reg := &Registry{}
	for i := range MaxClaimTypes + 44 {
		if err := reg.Handle(EventName(fmt.Sprintf("T%03d", i)), newCounter().handle); err != nil {
			t.Fatal(err)
		}
	}
	logger, buf := bufferLogger()
	cfg := Config{Store: newMemStore(), Logger: logger}.WithDefaults()
	g := newGate(cfg, reg)
	types, skip, ok := g.request()
	if !ok || types != nil || len(skip) != 0 {
		t.Fatalf("%d routed types: Types %d, SkipTypes %d, ok %v; want every type claimed (Types nil)", MaxClaimTypes+44, len(types), len(skip), ok)
	}
	if !strings.Contains(buf.String(), "routes more event types than one claim filters on") {
		t.Errorf("no warning that the routed types were not filtered on:\n%s", buf.String())
	}

	// Pauses of more types than a claim skips: a Client with few routes
	// folds them into its types; one that claims everything skips the first
	// MaxClaimTypes.
	small := &Registry{}
	for _, name := range []string{"T000", "T001", "Z"} {
		if err := small.Handle(EventName(name), newCounter().handle); err != nil {
			t.Fatal(err)
		}
	}
	var pauses []Pause
	for i := range MaxClaimTypes + 10 {
		pauses = append(pauses, Pause{Scope: fmt.Sprintf("T%03d", i)})
	}
	for _, tc := range []struct {
		reg       *Registry
		wantTypes []string
		wantSkip  int
	}{
		{small, []string{"Z"}, 0},
		{reg, nil, MaxClaimTypes},
	} {
		g := newGate(cfg, tc.reg)
		g.setPauses(pauses)
		types, skip, ok := g.request()
		if !ok || !slices.Equal(types, tc.wantTypes) || len(skip) != tc.wantSkip {
			t.Errorf("with %d pauses: Types %v, SkipTypes %d, ok %v; want %v and %d", len(pauses), types, len(skip), ok, tc.wantTypes, tc.wantSkip)
		}
	}
	routes := map[string]RoutePolicy{}
	for i := range MaxClaimTypes + 1 {
		routes[fmt.Sprintf("T%03d", i)] = RoutePolicy{Rate: 1}
	}
	if err := (Config{Store: newMemStore(), TxContext: fakeTxContext{}, Routes: routes}).Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("%d limited routes: Validate = %v; want ErrInvalidConfig", len(routes), err)
	}
}
