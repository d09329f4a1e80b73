package outboxtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// RunEndToEndSuite runs scenarios of whole outbox.Clients — writes, the hot
// path, pollers on several nodes, retries, dead letters, purges — against
// a backend. newFixture must return a fixture on its own empty table.
// Subtests run one after another (one checks for goroutine leaks). Every
// delivery is counted per event id, so duplicates are reported, not hidden.
func RunEndToEndSuite(t *testing.T, newFixture func(t *testing.T) Fixture) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, f Fixture)
	}{
		{"HotPathDeliversConcurrentWrites", e2eHotPath},
		{"HandleRoutesEveryAggregate", e2eHandleAnyAggregate},
		{"RollbackWritesAndDeliversNothing", e2eRollback},
		{"WriteOutsideTransactionFails", e2eNoTx},
		{"HotQueueOverflowLeftToPoller", e2eOverflow},
		{"RetryThenSuccess", e2eRetryThenSuccess},
		{"DeadAfterMaxAttemptsThenReplay", e2eDeadAndReplay},
		{"UnroutableIsLeftPending", e2eUnroutable},
		{"FanOutRetriesOnlyTheFailingSubscriber", e2eFanOut},
		{"ListenerPanicIsFailure", e2ePanic},
		{"RetryAfterKeepsAttempts", e2eRetryAfter},
		{"DelayedEventSkipsHotPath", e2eDelayed},
		{"InterceptorsInOrder", e2eInterceptors},
		{"WriterOnlyLeavesRowsForCDC", e2eWriterOnly},
		{"ConcurrentPollersDeliverOnce", e2eConcurrentPollers},
		{"LeaseExpiryRecoversAndFencesStaleAck", e2eLeaseExpiry},
		{"HeartbeatKeepsALongDeliveryClaimed", e2eHeartbeat},
		{"CloseReleasesUndelivered", e2eCloseReleases},
		{"PurgeInBatchesOnlyOldTerminal", e2ePurge},
		{"PoisonThatKillsItsProcessEndsDead", e2ePoison},
		{"HungListenerIsTakenOverByItsOwnNode", e2eHungListener(true)},
		{"HungListenerIsTakenOverByAnotherNode", e2eHungListener(false)},
		{"ClockSkewWithinMaxClockSkewTakesNoLiveClaim", e2eClockSkew},
		{"ListenerTimeoutIsAFailedAttempt", e2eListenerTimeout},
		{"OrderedKeysInCommitOrderAcrossNodes", e2eOrderedAcrossNodes},
		{"OrderedNodesNeverRunTwoOfAKeyAtOnce", e2eOrderedNeverTwoAtOnce},
		{"OrderedDeadEventBlocksItsKeyUntilSkippedOrReplayed", e2eOrderedDeadBlocks},
		{"OrderedHotPathTakesFreeKeysOnly", e2eOrderedHotPath},
		{"OrderedDelayedEventHoldsItsKey", e2eOrderedDelayed},
		{"TwoServicesWithDifferentRoutesShareATable", e2eTwoServices},
		{"OutageWithCircuitBreakerEndsWithNoDead", e2eOutage},
		{"RateLimitSharedAcrossThreeNodes", e2eRateAcrossNodes},
		{"ConcurrencyLimitSharedAcrossThreeNodes", e2eConcurrencyAcrossNodes},
		{"PauseObeyedByThreeOrderedNodes", e2ePauseAcrossNodes},
		{"WakeUpReachesAPollerOnlyNode", e2eWakeUpReachesPollerOnlyNode},
		{"WakeUpHandsOnAnOrderedKey", e2eWakeUpHandsOnOrderedKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newFixture(t))
		})
	}
}

// Ledger counts deliveries per event id.
type Ledger struct {
	mu     sync.Mutex
	counts map[string]int
	total  int
}

// NewLedger returns an empty Ledger.
func NewLedger() *Ledger { return &Ledger{counts: map[string]int{}} }

// Record counts one delivery of id.
func (l *Ledger) Record(id string) {
	l.mu.Lock()
	l.counts[id]++
	l.total++
	l.mu.Unlock()
}

// Count returns how many times id was delivered.
func (l *Ledger) Count(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[id]
}

// Summary returns the total deliveries, distinct events and duplicates
// (deliveries beyond the first).
func (l *Ledger) Summary() (total, distinct, duplicates int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, len(l.counts), l.total - len(l.counts)
}

// Listener returns a listener that records every delivery.
func (l *Ledger) Listener() outbox.Listener {
	return outbox.ListenerFunc(func(_ context.Context, e outbox.Envelope) error {
		l.Record(e.ID())
		return nil
	})
}

// Eventually polls cond every few milliseconds until it holds or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var (
	evtPing = outbox.EventName("Ping")
	evtFail = outbox.EventName("Fail")
)

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(discard{}, &slog.HandlerOptions{Level: slog.LevelError + 1}))
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// newClient returns a Client on f configured by cfg, with the suite's
// defaults where cfg leaves zero values (quick retries, a 20ms poll
// interval, a quiet logger); it is closed at cleanup.
func newClient(t testing.TB, f Fixture, cfg outbox.Config) *outbox.Client {
	t.Helper()
	cfg.Store, cfg.Purger = f.Store, f.Purger
	if cfg.TxContext == nil {
		cfg.TxContext = f.TxContext
	}
	if cfg.RetryPolicy == nil {
		cfg.RetryPolicy = &outbox.ExponentialBackoff{Base: time.Millisecond, Max: 5 * time.Millisecond, NoJitter: true}
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	c, err := outbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeClient(t, c) })
	return c
}

// handle registers listener l for event type et on c.
func handle(t testing.TB, c *outbox.Client, et outbox.EventType, l outbox.Listener) {
	t.Helper()
	if err := c.Handle(et, l.Handle); err != nil {
		t.Fatal(err)
	}
}

func start(t testing.TB, c *outbox.Client) {
	t.Helper()
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// startNode returns a started Client on f with listener l for Ping events.
func startNode(t testing.TB, f Fixture, l outbox.Listener, cfg outbox.Config) *outbox.Client {
	t.Helper()
	c := newClient(t, f, cfg)
	if l != nil {
		handle(t, c, evtPing, l)
	}
	start(t, c)
	return c
}

func closeClient(t testing.TB, c *outbox.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Errorf("client close: %v", err)
	}
}

func ping(t testing.TB, opts ...outbox.EnvelopeOption) outbox.Envelope {
	t.Helper()
	e, err := outbox.NewEnvelope(evtPing, append([]outbox.EnvelopeOption{outbox.WithJSON([]byte(`{"n":1}`))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// write commits events in one transaction.
func write(t testing.TB, f Fixture, c *outbox.Client, events ...outbox.Envelope) {
	t.Helper()
	err := f.InTx(context.Background(), func(ctx context.Context) error {
		_, err := c.Write(ctx, events...)
		return err
	})
	if err != nil {
		t.Fatalf("write: %v", err)
	}
}

func count(t testing.TB, f Fixture, statuses ...outbox.Status) int64 {
	t.Helper()
	n, err := f.Store.Count(context.Background(), outbox.Query{Statuses: statuses})
	if err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

func record(t testing.TB, f Fixture, id string) outbox.Record {
	t.Helper()
	r, err := f.Store.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return r
}

func e2eHotPath(t *testing.T, f Fixture) {
	l := NewLedger()
	c := startNode(t, f, l.Listener(), outbox.Config{})
	const writers, perWriter = 8, 50
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perWriter {
				write(t, f, c, ping(t))
			}
		}()
	}
	wg.Wait()
	const n = writers * perWriter
	Eventually(t, 30*time.Second, "all events DONE", func() bool { return count(t, f, outbox.StatusDone) == n })
	total, distinct, dups := l.Summary()
	t.Logf("written=%d delivered=%d distinct=%d duplicates=%d", n, total, distinct, dups)
	if distinct != n || dups != 0 {
		t.Fatalf("want %d events delivered once each, got %d distinct with %d duplicates", n, distinct, dups)
	}
}

// e2eHandleAnyAggregate: Handle takes an event type on any aggregate;
// Register for one (aggregate, event) pair wins over it.
func e2eHandleAnyAggregate(t *testing.T, f Fixture) {
	general, special := NewLedger(), NewLedger()
	c := newClient(t, f, outbox.Config{})
	handle(t, c, evtPing, general.Listener())
	if err := c.Register(outbox.AggregateName("Invoice"), evtPing, special.Listener()); err != nil {
		t.Fatal(err)
	}
	if err := c.Handle(evtPing, func(context.Context, outbox.Envelope) error { return nil }); !errors.Is(err, outbox.ErrDuplicateListener) {
		t.Fatalf("second Handle = %v, want ErrDuplicateListener", err)
	}
	start(t, c)
	order, invoice, global := ping(t, outbox.WithAggregate(outbox.AggregateName("Order"), "o-1")),
		ping(t, outbox.WithAggregate(outbox.AggregateName("Invoice"), "i-1")), ping(t)
	write(t, f, c, order, invoice, global)
	Eventually(t, 10*time.Second, "all three DONE", func() bool { return count(t, f, outbox.StatusDone) == 3 })
	if general.Count(order.ID()) != 1 || general.Count(global.ID()) != 1 || special.Count(invoice.ID()) != 1 || general.Count(invoice.ID()) != 0 {
		t.Fatalf("routing: general got order %d, global %d, invoice %d; special got invoice %d",
			general.Count(order.ID()), general.Count(global.ID()), general.Count(invoice.ID()), special.Count(invoice.ID()))
	}
}

func e2eRollback(t *testing.T, f Fixture) {
	l := NewLedger()
	c := startNode(t, f, l.Listener(), outbox.Config{})
	boom := errors.New("business failure")
	err := f.InTx(context.Background(), func(ctx context.Context) error {
		if _, err := c.Write(ctx, ping(t), ping(t)); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx returned %v, want the business error", err)
	}
	write(t, f, c, ping(t)) // a committed event after it, as a marker
	Eventually(t, 10*time.Second, "marker delivered", func() bool { total, _, _ := l.Summary(); return total >= 1 })
	if _, err := c.PollOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := count(t, f); n != 1 {
		t.Fatalf("rolled back events left %d rows, want only the marker", n)
	}
	if total, _, _ := l.Summary(); total != 1 {
		t.Fatalf("delivered %d events, want only the marker", total)
	}
}

func e2eNoTx(t *testing.T, f Fixture) {
	c := startNode(t, f, nil, outbox.Config{Mode: outbox.ModeHotPathOnly})
	_, err := c.Write(context.Background(), ping(t))
	if !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("Write outside a transaction: %v, want ErrNoTransaction", err)
	}
	if n := count(t, f); n != 0 {
		t.Fatalf("%d rows written outside a transaction", n)
	}
}

func e2eOverflow(t *testing.T, f Fixture) {
	release := make(chan struct{})
	l := NewLedger()
	slow := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		<-release
		l.Record(e.ID())
		return nil
	})
	// Only the hot path's drop signal wakes the poller.
	c := startNode(t, f, slow, outbox.Config{Workers: 1, HotQueueSize: 1, ColdQueueSize: 4, PollInterval: time.Hour})
	const n = 20
	for range n {
		write(t, f, c, ping(t)) // never blocks nor fails, whatever the queue
	}
	if got := count(t, f); got != n {
		t.Fatalf("%d rows, want %d: every write must succeed", got, n)
	}
	close(release)
	Eventually(t, 30*time.Second, "overflowed events delivered by the poller", func() bool {
		return count(t, f, outbox.StatusDone) == n
	})
	if _, distinct, dups := l.Summary(); distinct != n || dups != 0 {
		t.Fatalf("distinct=%d duplicates=%d, want %d and 0", distinct, dups, n)
	}
}

func e2eRetryThenSuccess(t *testing.T, f Fixture) {
	var calls atomic.Int32
	flaky := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		if calls.Add(1) <= 2 {
			return errors.New("downstream unavailable")
		}
		return nil
	})
	c := startNode(t, f, flaky, outbox.Config{})
	e := ping(t)
	write(t, f, c, e)
	Eventually(t, 10*time.Second, "event DONE after retries", func() bool { return record(t, f, e.ID()).Status == outbox.StatusDone })
	r := record(t, f, e.ID())
	if r.Attempts != 2 || calls.Load() != 3 {
		t.Fatalf("attempts=%d calls=%d, want 2 failed attempts and 3 calls", r.Attempts, calls.Load())
	}
}

func e2eDeadAndReplay(t *testing.T, f Fixture) {
	var healthy atomic.Bool
	var calls atomic.Int32
	l := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		calls.Add(1)
		if !healthy.Load() {
			return errors.New("always fails")
		}
		return nil
	})
	c := startNode(t, f, l, outbox.Config{MaxAttempts: 3})
	e := ping(t)
	write(t, f, c, e)
	Eventually(t, 10*time.Second, "event DEAD", func() bool { return record(t, f, e.ID()).Status == outbox.StatusDead })
	r := record(t, f, e.ID())
	if r.Attempts != 3 || calls.Load() != 3 || r.LastError == "" {
		t.Fatalf("attempts=%d calls=%d lastError=%q, want 3, 3 and an error", r.Attempts, calls.Load(), r.LastError)
	}
	dead := c.Dead()
	if n, err := dead.Count(context.Background(), outbox.Query{}); err != nil || n != 1 {
		t.Fatalf("dead count = %d, %v; want 1", n, err)
	}
	healthy.Store(true)
	if err := dead.Replay(context.Background(), e.ID()); err != nil {
		t.Fatal(err)
	}
	if err := dead.Replay(context.Background(), e.ID()); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("second replay: %v, want ErrNotFound", err)
	}
	Eventually(t, 10*time.Second, "replayed event DONE", func() bool { return record(t, f, e.ID()).Status == outbox.StatusDone })
}

// e2eFanOut: of three subscribers, the two that succeed get the event
// once; the failing one alone retries, goes DEAD named on the event, and
// alone gets the replay.
func e2eFanOut(t *testing.T, f Fixture) {
	runs := &subscriberRuns{n: map[string]int{}}
	c := newClient(t, f, outbox.Config{MaxAttempts: 3, Metrics: runs})
	var healthy atomic.Bool
	calls := map[string]*atomic.Int32{"audit": {}, "billing": {}, "mail": {}}
	for name, n := range calls {
		err := c.Subscribe(name, evtPing, outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
			n.Add(1)
			if name == "mail" && !healthy.Load() {
				return errors.New("mail server down")
			}
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
	}
	start(t, c)
	e := ping(t)
	write(t, f, c, e)
	Eventually(t, 10*time.Second, "event DEAD", func() bool { return record(t, f, e.ID()).Status == outbox.StatusDead })
	r := record(t, f, e.ID())
	want := map[string]int32{"audit": 1, "billing": 1, "mail": 3}
	for name, n := range calls {
		if n.Load() != want[name] {
			t.Errorf("%s ran %d times, want %d", name, n.Load(), want[name])
		}
	}
	if r.Attempts != 3 || !slices.Equal(r.Subscribers, []string{"mail"}) || !strings.Contains(r.LastError, "subscriber mail: mail server down") {
		t.Fatalf("dead event: attempts=%d subscribers=%q last error %q; want 3, [mail] and mail's error", r.Attempts, r.Subscribers, r.LastError)
	}
	healthy.Store(true)
	if err := c.Dead().Replay(context.Background(), e.ID()); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 10*time.Second, "replayed event DONE", func() bool { return record(t, f, e.ID()).Status == outbox.StatusDone })
	want["mail"] = 4
	for name, n := range calls {
		if n.Load() != want[name] {
			t.Errorf("after the replay %s ran %d times, want %d", name, n.Load(), want[name])
		}
	}
	wantRuns := map[string]int{"audit ok": 1, "billing ok": 1, "mail failed": 3, "mail ok": 1}
	if got := runs.counts(); !maps.Equal(got, wantRuns) {
		t.Errorf("Metrics.SubscriberRun counted %v, want %v", got, wantRuns)
	}
}

// subscriberRuns counts Metrics.SubscriberRun calls per subscriber and
// outcome.
type subscriberRuns struct {
	outbox.NopMetrics
	mu sync.Mutex
	n  map[string]int
}

func (m *subscriberRuns) SubscriberRun(_ outbox.EventLabels, name string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n[name+map[bool]string{true: " ok", false: " failed"}[ok]]++
}

func (m *subscriberRuns) counts() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.n)
}

// e2eUnroutable: an event no route of the Client handles is left pending
// for another program by default, no attempt used; with UnroutedRetry
// negative it goes DEAD at once.
// e2eUnroutable: a Client that claims every type (ClaimAll) leaves an
// event it cannot route pending, or sends it DEAD with UnroutedRetry
// negative.
func e2eUnroutable(t *testing.T, f Fixture) {
	for _, tc := range []struct {
		retry time.Duration
		want  outbox.Status
	}{{0, outbox.StatusRetry}, {-1, outbox.StatusDead}} {
		c := startNode(t, f, nil, outbox.Config{UnroutedRetry: tc.retry, ClaimAll: true})
		e := ping(t)
		write(t, f, c, e)
		Eventually(t, 10*time.Second, "unroutable event "+tc.want.String(), func() bool {
			r := record(t, f, e.ID())
			return r.Status == tc.want && r.LockedBy == ""
		})
		if r := record(t, f, e.ID()); r.Attempts != 0 || !strings.Contains(r.LastError, "no listener") {
			t.Fatalf("UnroutedRetry %v: unroutable event used %d attempts, error %q; want 0 and a no-listener error", tc.retry, r.Attempts, r.LastError)
		}
		closeClient(t, c)
	}
}

func e2ePanic(t *testing.T, f Fixture) {
	l := NewLedger()
	c := newClient(t, f, outbox.Config{MaxAttempts: 2, Workers: 1})
	handle(t, c, evtFail, outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error { panic("listener bug") }))
	handle(t, c, evtPing, l.Listener())
	start(t, c)
	bad := outbox.MustEnvelope(evtFail, outbox.WithJSON([]byte(`{}`)))
	write(t, f, c, bad)
	Eventually(t, 10*time.Second, "panicking event DEAD", func() bool { return record(t, f, bad.ID()).Status == outbox.StatusDead })
	good := ping(t)
	write(t, f, c, good) // the single worker survived the panics
	Eventually(t, 10*time.Second, "next event delivered", func() bool { return l.Count(good.ID()) == 1 })
	if r := record(t, f, bad.ID()); r.Attempts != 2 {
		t.Fatalf("attempts=%d, want 2", r.Attempts)
	}
}

func e2eRetryAfter(t *testing.T, f Fixture) {
	var calls atomic.Int32
	l := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		if calls.Add(1) <= 3 {
			return outbox.RetryAfter(time.Millisecond, "rate limited")
		}
		return nil
	})
	c := startNode(t, f, l, outbox.Config{MaxAttempts: 2})
	e := ping(t)
	write(t, f, c, e)
	Eventually(t, 10*time.Second, "event DONE", func() bool { return record(t, f, e.ID()).Status == outbox.StatusDone })
	if r := record(t, f, e.ID()); r.Attempts != 0 || calls.Load() != 4 {
		t.Fatalf("attempts=%d calls=%d, want 0 attempts used and 4 calls (more than MaxAttempts)", r.Attempts, calls.Load())
	}
}

func e2eDelayed(t *testing.T, f Fixture) {
	clock := NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	l := NewLedger()
	c := startNode(t, f, l.Listener(), outbox.Config{Clock: clock, PollInterval: time.Hour})
	e := ping(t, outbox.WithAvailableAt(clock.Now().Add(time.Hour)))
	write(t, f, c, e)
	ctx := context.Background()
	if n, err := c.PollOnce(ctx); err != nil || n != 0 {
		t.Fatalf("poll before due: queued %d, %v; want 0", n, err)
	}
	if got := l.Count(e.ID()); got != 0 {
		t.Fatalf("delayed event delivered %d times before it was due", got)
	}
	clock.Advance(time.Hour)
	// Poll as the poller would, until the event is delivered: a poll that
	// runs beside another claim may find the row taken by it.
	Eventually(t, 10*time.Second, "delayed event delivered", func() bool {
		if _, err := c.PollOnce(ctx); err != nil {
			t.Fatalf("poll when due: %v", err)
		}
		return l.Count(e.ID()) == 1
	})
}

func e2eInterceptors(t *testing.T, f Fixture) {
	var mu sync.Mutex
	var trace []string
	add := func(s string) { mu.Lock(); trace = append(trace, s); mu.Unlock() }
	ic := func(name string) outbox.Interceptor {
		return outbox.Interceptor{
			Before: func(ctx context.Context, e outbox.Envelope) error { add("before-" + name); return nil },
			After:  func(ctx context.Context, e outbox.Envelope, err error) { add(fmt.Sprintf("after-%s(%v)", name, err)) },
		}
	}
	l := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error { add("listener"); return nil })
	c := startNode(t, f, l, outbox.Config{Interceptors: []outbox.Interceptor{ic("a"), ic("b")}})
	e := ping(t)
	write(t, f, c, e)
	Eventually(t, 10*time.Second, "event DONE", func() bool { return record(t, f, e.ID()).Status == outbox.StatusDone })
	mu.Lock()
	defer mu.Unlock()
	want := "[before-a before-b listener after-b(<nil>) after-a(<nil>)]"
	if got := fmt.Sprint(trace); got != want {
		t.Fatalf("trace %s, want %s", got, want)
	}
}

// writerOnly returns a started writer-only Client: rows are left unclaimed
// for pollers (or CDC).
func writerOnly(t testing.TB, f Fixture, clock outbox.Clock) *outbox.Client {
	t.Helper()
	return startNode(t, f, nil, outbox.Config{Mode: outbox.ModeWriterOnly, Clock: clock})
}

func e2eWriterOnly(t *testing.T, f Fixture) {
	w := writerOnly(t, f, nil)
	for range 5 {
		write(t, f, w, ping(t))
	}
	recs, err := f.Store.List(context.Background(), outbox.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 5 {
		t.Fatalf("%d rows, want 5", len(recs))
	}
	for _, r := range recs {
		if r.Status != outbox.StatusNew || r.LockedBy != "" {
			t.Fatalf("row %s: status %s locked by %q, want NEW and unclaimed", r.ID, r.Status, r.LockedBy)
		}
	}
}

func e2eConcurrentPollers(t *testing.T, f Fixture) {
	const n, nodes = 600, 3
	w := writerOnly(t, f, nil)
	for i := 0; i < n; i += 50 {
		batch := make([]outbox.Envelope, 50)
		for j := range batch {
			batch[j] = ping(t)
		}
		write(t, f, w, batch...)
	}
	l := NewLedger()
	perNode := make([]atomic.Int32, nodes)
	for i := range nodes {
		listener := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
			perNode[i].Add(1)
			l.Record(e.ID())
			return nil
		})
		startNode(t, f, listener, outbox.Config{Mode: outbox.ModePollerOnly, PollInterval: 5 * time.Millisecond, PollBatchSize: 20})
	}
	Eventually(t, 60*time.Second, "all events DONE", func() bool { return count(t, f, outbox.StatusDone) == n })
	total, distinct, dups := l.Summary()
	t.Logf("nodes=%d events=%d delivered=%d duplicates=%d per-node=[%d %d %d]", nodes, n, total, dups, perNode[0].Load(), perNode[1].Load(), perNode[2].Load())
	if distinct != n || dups != 0 {
		t.Fatalf("want every event delivered exactly once, got %d distinct and %d duplicates", distinct, dups)
	}
}

func e2eLeaseExpiry(t *testing.T, f Fixture) {
	clock := NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	started, unblock := make(chan struct{}), make(chan struct{})
	stuck := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		close(started)
		<-unblock
		return nil
	})
	var stale atomic.Int32
	e := ping(t)
	write(t, f, writerOnly(t, f, clock), e)
	// Node A claims the event at its first poll and its listener hangs. It
	// stands for a process that stopped: it hears no wake-ups, which would
	// make it poll again and take its own expired claim back.
	startNode(t, f, stuck, outbox.Config{Mode: outbox.ModePollerOnly, Clock: clock, Lease: time.Minute,
		PollInterval: time.Hour, Metrics: staleCounter{n: &stale}, Waker: outbox.NoWaker})
	<-started
	clock.Advance(2 * time.Minute) // A's lease expires while its listener hangs
	// Node B takes it over at its first poll.
	l := NewLedger()
	startNode(t, f, l.Listener(), outbox.Config{Mode: outbox.ModePollerOnly, Clock: clock, Lease: time.Minute, PollInterval: time.Hour})
	Eventually(t, 10*time.Second, "B delivers the event", func() bool { return record(t, f, e.ID()).Status == outbox.StatusDone })
	doneAt := record(t, f, e.ID()).DoneAt
	close(unblock) // A finishes late: its ack must change nothing
	Eventually(t, 10*time.Second, "A's stale ack fenced off", func() bool { return stale.Load() == 1 })
	if r := record(t, f, e.ID()); r.Status != outbox.StatusDone || !r.DoneAt.Equal(doneAt) {
		t.Fatalf("after the stale ack: status %s done_at %v, want DONE at %v", r.Status, r.DoneAt, doneAt)
	}
}

type staleCounter struct {
	outbox.NopMetrics
	n *atomic.Int32
}

func (m staleCounter) StaleUpdates(n int) { m.n.Add(int32(n)) }

func e2eCloseReleases(t *testing.T, f Fixture) {
	block := make(chan struct{})
	defer close(block)
	stuck := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		select {
		case <-block:
		case <-ctx.Done():
		}
		return ctx.Err()
	})
	c := startNode(t, f, stuck, outbox.Config{Mode: outbox.ModeHotPathOnly, Workers: 1, DrainTimeout: 50 * time.Millisecond})
	const n = 5
	for range n {
		write(t, f, c, ping(t))
	}
	closeClient(t, c)
	// Every row is still pending and, released, claimable by a new node at once.
	if got := count(t, f, outbox.StatusNew, outbox.StatusRetry); got != n {
		t.Fatalf("%d pending rows after Close, want %d", got, n)
	}
	l := NewLedger()
	startNode(t, f, l.Listener(), outbox.Config{Mode: outbox.ModePollerOnly})
	Eventually(t, 10*time.Second, "released events delivered by another node", func() bool {
		return count(t, f, outbox.StatusDone) == n
	})
}

func e2ePurge(t *testing.T, f Fixture) {
	if f.Purger == nil {
		t.Skip("the fixture has no Purger")
	}
	clock := NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	l := NewLedger()
	c := startNode(t, f, l.Listener(), outbox.Config{Mode: outbox.ModeHotPathOnly, Clock: clock, PurgeBatchSize: 2, UnroutedRetry: -1})
	for range 5 {
		write(t, f, c, ping(t))
	}
	write(t, f, c, outbox.MustEnvelope(evtFail, outbox.WithJSON([]byte(`{}`)))) // no listener: DEAD
	Eventually(t, 10*time.Second, "5 DONE and 1 DEAD", func() bool {
		return count(t, f, outbox.StatusDone) == 5 && count(t, f, outbox.StatusDead) == 1
	})
	write(t, f, writerOnly(t, f, clock), ping(t), ping(t)) // pending, and old by the time we purge
	clock.Advance(8 * 24 * time.Hour)
	recent := ping(t)
	write(t, f, c, recent) // terminal but younger than the retention
	Eventually(t, 10*time.Second, "recent event DONE", func() bool { return record(t, f, recent.ID()).Status == outbox.StatusDone })

	n, err := c.PurgeOnce(context.Background())
	if err != nil || n != 5 {
		t.Fatalf("PurgeOnce deleted %d, %v; want the 5 old DONE events (in batches of 2), not the DEAD one", n, err)
	}
	if got := count(t, f, outbox.StatusDead); got != 1 {
		t.Fatalf("%d DEAD rows left, want the DEAD event kept (no DeadRetention)", got)
	}
	withDead := newClient(t, f, outbox.Config{Mode: outbox.ModeWriterOnly, Clock: clock, DeadRetention: 7 * 24 * time.Hour})
	if n, err := withDead.PurgeOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("PurgeOnce with DeadRetention deleted %d, %v; want the old DEAD event", n, err)
	}
	if got := count(t, f, outbox.StatusNew); got != 2 {
		t.Fatalf("%d pending rows left, want the 2 untouched", got)
	}
	if got := count(t, f, outbox.StatusDone); got != 1 {
		t.Fatalf("%d DONE rows left, want the recent one", got)
	}
}
