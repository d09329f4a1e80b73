package outboxtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// Backend is what the end-to-end suite needs of a database and a
// transaction style: a Store on a fresh, empty outbox table, the pool, and a
// way to run a business transaction that TxContext recognizes.
type Backend struct {
	Store     outbox.Store
	DB        outbox.Executor
	TxContext outbox.TxContext
	// InTx runs fn in a transaction: committed if fn returns nil, rolled
	// back (and fn's error returned) otherwise.
	InTx func(ctx context.Context, fn func(ctx context.Context) error) error
}

// RunEndToEndSuite runs writer + hot path + dispatcher + poller scenarios
// against a backend. newBackend must return a backend on its own empty
// table. Subtests run one after another (one checks for goroutine leaks).
// Every delivery is counted per event id,
// so duplicates are reported, not hidden.
func RunEndToEndSuite(t *testing.T, newBackend func(t *testing.T) Backend) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, b Backend)
	}{
		{"HotPathDeliversConcurrentWrites", e2eHotPath},
		{"RollbackWritesAndDeliversNothing", e2eRollback},
		{"WriteOutsideTransactionFails", e2eNoTx},
		{"HotQueueOverflowLeftToPoller", e2eOverflow},
		{"RetryThenSuccess", e2eRetryThenSuccess},
		{"DeadAfterMaxAttemptsThenReplay", e2eDeadAndReplay},
		{"UnroutableIsDeadAtOnce", e2eUnroutable},
		{"ListenerPanicIsFailure", e2ePanic},
		{"RetryAfterKeepsAttempts", e2eRetryAfter},
		{"DelayedEventSkipsHotPath", e2eDelayed},
		{"InterceptorsInOrder", e2eInterceptors},
		{"WriterOnlyLeavesRowsForCDC", e2eWriterOnly},
		{"ConcurrentPollersDeliverOnce", e2eConcurrentPollers},
		{"LeaseExpiryRecoversAndFencesStaleAck", e2eLeaseExpiry},
		{"CloseReleasesUndelivered", e2eCloseReleases},
		{"PurgeInBatchesOnlyOldTerminal", e2ePurge},
		{"NoGoroutineOutlivesClose", e2eNoLeak},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newBackend(t))
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

type stackOpts struct {
	dispatcher func(*outbox.DispatcherConfig)
	poller     func(*outbox.PollerConfig)
	noPoller   bool
	manualPoll bool // build the poller but do not start its loop: the test calls PollOnce
	noHook     bool
	clock      outbox.Clock
}

type stack struct {
	d *outbox.Dispatcher
	p *outbox.Poller
	w *outbox.Writer
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(discard{}, &slog.HandlerOptions{Level: slog.LevelError + 1}))
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// newStack builds and starts a dispatcher, poller and writer; Close runs at cleanup.
func newStack(t *testing.T, b Backend, reg outbox.ListenerRegistry, o stackOpts) *stack {
	t.Helper()
	clock := o.clock
	if clock == nil {
		clock = outbox.SystemClock
	}
	dcfg := outbox.DispatcherConfig{
		Store: b.Store, DB: b.DB, Registry: reg, Clock: clock, Logger: quietLogger(),
		RetryPolicy:  &outbox.ExponentialBackoff{Base: time.Millisecond, Max: 5 * time.Millisecond, NoJitter: true},
		DrainTimeout: 5 * time.Second,
	}
	if o.dispatcher != nil {
		o.dispatcher(&dcfg)
	}
	d, err := outbox.NewDispatcher(dcfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := &stack{d: d}
	if !o.noPoller {
		pcfg := outbox.PollerConfig{Store: b.Store, DB: b.DB, Dispatcher: d, Interval: 20 * time.Millisecond, Clock: clock, Logger: quietLogger()}
		if o.poller != nil {
			o.poller(&pcfg)
		}
		if s.p, err = outbox.NewPoller(pcfg); err != nil {
			t.Fatal(err)
		}
		if !o.manualPoll {
			if err := s.p.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	wcfg := outbox.WriterConfig{TxContext: b.TxContext, Store: b.Store, Clock: clock, Logger: quietLogger()}
	if !o.noHook {
		wcfg.Hook = d.Hook()
	}
	if s.w, err = outbox.NewWriter(wcfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.close(t) })
	return s
}

func (s *stack) close(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if s.p != nil {
		if err := s.p.Close(ctx); err != nil {
			t.Errorf("poller close: %v", err)
		}
	}
	if err := s.d.Close(ctx); err != nil {
		t.Errorf("dispatcher close: %v", err)
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
func write(t testing.TB, b Backend, w *outbox.Writer, events ...outbox.Envelope) {
	t.Helper()
	err := b.InTx(context.Background(), func(ctx context.Context) error {
		_, err := w.Write(ctx, events...)
		return err
	})
	if err != nil {
		t.Fatalf("write: %v", err)
	}
}

func count(t testing.TB, b Backend, statuses ...outbox.Status) int64 {
	t.Helper()
	n, err := b.Store.Count(context.Background(), b.DB, outbox.Query{Statuses: statuses})
	if err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

func record(t testing.TB, b Backend, id string) outbox.Record {
	t.Helper()
	q := outbox.Query{Limit: 1000}
	for {
		recs, err := b.Store.List(context.Background(), b.DB, q)
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		for _, r := range recs {
			if r.ID == id {
				return r
			}
		}
		if len(recs) < q.Limit {
			t.Fatalf("event %s not in the table", id)
		}
		q.AfterID = recs[len(recs)-1].ID
	}
}

func registry(t testing.TB, pairs ...any) *outbox.Registry {
	t.Helper()
	r := outbox.NewRegistry()
	for i := 0; i < len(pairs); i += 2 {
		if err := r.Register(outbox.GlobalAggregate, pairs[i].(outbox.EventType), pairs[i+1].(outbox.Listener)); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func e2eHotPath(t *testing.T, b Backend) {
	l := NewLedger()
	s := newStack(t, b, registry(t, evtPing, l.Listener()), stackOpts{})
	const writers, perWriter = 8, 50
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perWriter {
				write(t, b, s.w, ping(t))
			}
		}()
	}
	wg.Wait()
	const n = writers * perWriter
	Eventually(t, 30*time.Second, "all events DONE", func() bool { return count(t, b, outbox.StatusDone) == n })
	total, distinct, dups := l.Summary()
	t.Logf("written=%d delivered=%d distinct=%d duplicates=%d", n, total, distinct, dups)
	if distinct != n || dups != 0 {
		t.Fatalf("want %d events delivered once each, got %d distinct with %d duplicates", n, distinct, dups)
	}
}

func e2eRollback(t *testing.T, b Backend) {
	l := NewLedger()
	s := newStack(t, b, registry(t, evtPing, l.Listener()), stackOpts{})
	boom := errors.New("business failure")
	err := b.InTx(context.Background(), func(ctx context.Context) error {
		if _, err := s.w.Write(ctx, ping(t), ping(t)); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx returned %v, want the business error", err)
	}
	write(t, b, s.w, ping(t)) // a committed event after it, as a marker
	Eventually(t, 10*time.Second, "marker delivered", func() bool { total, _, _ := l.Summary(); return total >= 1 })
	if _, _, err := s.p.PollOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := count(t, b); n != 1 {
		t.Fatalf("rolled back events left %d rows, want only the marker", n)
	}
	if total, _, _ := l.Summary(); total != 1 {
		t.Fatalf("delivered %d events, want only the marker", total)
	}
}

func e2eNoTx(t *testing.T, b Backend) {
	s := newStack(t, b, registry(t), stackOpts{noPoller: true})
	_, err := s.w.Write(context.Background(), ping(t))
	if !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("Write outside a transaction: %v, want ErrNoTransaction", err)
	}
	if n := count(t, b); n != 0 {
		t.Fatalf("%d rows written outside a transaction", n)
	}
}

func e2eOverflow(t *testing.T, b Backend) {
	release := make(chan struct{})
	l := NewLedger()
	slow := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		<-release
		l.Record(e.ID())
		return nil
	})
	s := newStack(t, b, registry(t, evtPing, slow), stackOpts{
		dispatcher: func(c *outbox.DispatcherConfig) { c.Workers, c.HotQueueSize, c.ColdQueueSize = 1, 1, 4 },
		poller: func(c *outbox.PollerConfig) {
			c.Interval, c.OwnReclaimAfter = time.Hour, 50*time.Millisecond // only the drop signal wakes it
		},
	})
	const n = 20
	for range n {
		write(t, b, s.w, ping(t)) // never blocks nor fails, whatever the queue
	}
	if got := count(t, b); got != n {
		t.Fatalf("%d rows, want %d: every write must succeed", got, n)
	}
	close(release)
	Eventually(t, 30*time.Second, "overflowed events delivered by the poller", func() bool {
		return count(t, b, outbox.StatusDone) == n
	})
	if _, distinct, dups := l.Summary(); distinct != n || dups != 0 {
		t.Fatalf("distinct=%d duplicates=%d, want %d and 0", distinct, dups, n)
	}
}

func e2eRetryThenSuccess(t *testing.T, b Backend) {
	var calls atomic.Int32
	flaky := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		if calls.Add(1) <= 2 {
			return errors.New("downstream unavailable")
		}
		return nil
	})
	s := newStack(t, b, registry(t, evtPing, flaky), stackOpts{})
	e := ping(t)
	write(t, b, s.w, e)
	Eventually(t, 10*time.Second, "event DONE after retries", func() bool { return record(t, b, e.ID()).Status == outbox.StatusDone })
	r := record(t, b, e.ID())
	if r.Attempts != 2 || calls.Load() != 3 {
		t.Fatalf("attempts=%d calls=%d, want 2 failed attempts and 3 calls", r.Attempts, calls.Load())
	}
}

func e2eDeadAndReplay(t *testing.T, b Backend) {
	var healthy atomic.Bool
	var calls atomic.Int32
	l := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		calls.Add(1)
		if !healthy.Load() {
			return errors.New("always fails")
		}
		return nil
	})
	s := newStack(t, b, registry(t, evtPing, l), stackOpts{dispatcher: func(c *outbox.DispatcherConfig) { c.MaxAttempts = 3 }})
	e := ping(t)
	write(t, b, s.w, e)
	Eventually(t, 10*time.Second, "event DEAD", func() bool { return record(t, b, e.ID()).Status == outbox.StatusDead })
	r := record(t, b, e.ID())
	if r.Attempts != 3 || calls.Load() != 3 || r.LastError == "" {
		t.Fatalf("attempts=%d calls=%d lastError=%q, want 3, 3 and an error", r.Attempts, calls.Load(), r.LastError)
	}
	dead := outbox.NewDeadEvents(b.Store, b.DB, nil)
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
	Eventually(t, 10*time.Second, "replayed event DONE", func() bool { return record(t, b, e.ID()).Status == outbox.StatusDone })
}

func e2eUnroutable(t *testing.T, b Backend) {
	s := newStack(t, b, registry(t), stackOpts{})
	e := ping(t)
	write(t, b, s.w, e)
	Eventually(t, 10*time.Second, "unroutable event DEAD", func() bool { return record(t, b, e.ID()).Status == outbox.StatusDead })
	if r := record(t, b, e.ID()); r.Attempts != 0 {
		t.Fatalf("unroutable event used %d attempts, want 0 (no retries)", r.Attempts)
	}
}

func e2ePanic(t *testing.T, b Backend) {
	l := NewLedger()
	boom := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error { panic("listener bug") })
	s := newStack(t, b, registry(t, evtFail, boom, evtPing, l.Listener()), stackOpts{
		dispatcher: func(c *outbox.DispatcherConfig) { c.MaxAttempts, c.Workers = 2, 1 },
	})
	bad := outbox.MustEnvelope(evtFail, outbox.WithJSON([]byte(`{}`)))
	write(t, b, s.w, bad)
	Eventually(t, 10*time.Second, "panicking event DEAD", func() bool { return record(t, b, bad.ID()).Status == outbox.StatusDead })
	good := ping(t)
	write(t, b, s.w, good) // the single worker survived the panics
	Eventually(t, 10*time.Second, "next event delivered", func() bool { return l.Count(good.ID()) == 1 })
	if r := record(t, b, bad.ID()); r.Attempts != 2 {
		t.Fatalf("attempts=%d, want 2", r.Attempts)
	}
}

func e2eRetryAfter(t *testing.T, b Backend) {
	var calls atomic.Int32
	l := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		if calls.Add(1) <= 3 {
			return outbox.RetryAfter(time.Millisecond, "rate limited")
		}
		return nil
	})
	s := newStack(t, b, registry(t, evtPing, l), stackOpts{dispatcher: func(c *outbox.DispatcherConfig) { c.MaxAttempts = 2 }})
	e := ping(t)
	write(t, b, s.w, e)
	Eventually(t, 10*time.Second, "event DONE", func() bool { return record(t, b, e.ID()).Status == outbox.StatusDone })
	if r := record(t, b, e.ID()); r.Attempts != 0 || calls.Load() != 4 {
		t.Fatalf("attempts=%d calls=%d, want 0 attempts used and 4 calls (more than MaxAttempts)", r.Attempts, calls.Load())
	}
}

func e2eDelayed(t *testing.T, b Backend) {
	clock := NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	l := NewLedger()
	s := newStack(t, b, registry(t, evtPing, l.Listener()), stackOpts{clock: clock, manualPoll: true})
	e := ping(t, outbox.WithAvailableAt(clock.Now().Add(time.Hour)))
	write(t, b, s.w, e)
	ctx := context.Background()
	if n, _, err := s.p.PollOnce(ctx); err != nil || n != 0 {
		t.Fatalf("poll before due: queued %d, %v; want 0", n, err)
	}
	if got := l.Count(e.ID()); got != 0 {
		t.Fatalf("delayed event delivered %d times before it was due", got)
	}
	clock.Advance(time.Hour)
	if n, _, err := s.p.PollOnce(ctx); err != nil || n != 1 {
		t.Fatalf("poll when due: queued %d, %v; want 1", n, err)
	}
	Eventually(t, 10*time.Second, "delayed event delivered", func() bool { return l.Count(e.ID()) == 1 })
}

func e2eInterceptors(t *testing.T, b Backend) {
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
	s := newStack(t, b, registry(t, evtPing, l), stackOpts{dispatcher: func(c *outbox.DispatcherConfig) {
		c.Interceptors = []outbox.Interceptor{ic("a"), ic("b")}
	}})
	e := ping(t)
	write(t, b, s.w, e)
	Eventually(t, 10*time.Second, "event DONE", func() bool { return record(t, b, e.ID()).Status == outbox.StatusDone })
	mu.Lock()
	defer mu.Unlock()
	want := "[before-a before-b listener after-b(<nil>) after-a(<nil>)]"
	if got := fmt.Sprint(trace); got != want {
		t.Fatalf("trace %s, want %s", got, want)
	}
}

func e2eWriterOnly(t *testing.T, b Backend) {
	w, err := outbox.NewWriter(outbox.WriterConfig{TxContext: b.TxContext, Store: b.Store})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		write(t, b, w, ping(t))
	}
	recs, err := b.Store.List(context.Background(), b.DB, outbox.Query{})
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

func e2eConcurrentPollers(t *testing.T, b Backend) {
	const n, nodes = 600, 3
	w, err := outbox.NewWriter(outbox.WriterConfig{TxContext: b.TxContext, Store: b.Store})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 50 {
		batch := make([]outbox.Envelope, 50)
		for j := range batch {
			batch[j] = ping(t)
		}
		write(t, b, w, batch...)
	}
	l := NewLedger()
	perNode := make([]atomic.Int32, nodes)
	for i := range nodes {
		listener := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
			perNode[i].Add(1)
			l.Record(e.ID())
			return nil
		})
		newStack(t, b, registry(t, evtPing, listener), stackOpts{noHook: true, poller: func(c *outbox.PollerConfig) {
			c.Interval, c.BatchSize = 5*time.Millisecond, 20
		}})
	}
	Eventually(t, 60*time.Second, "all events DONE", func() bool { return count(t, b, outbox.StatusDone) == n })
	total, distinct, dups := l.Summary()
	t.Logf("nodes=%d events=%d delivered=%d duplicates=%d per-node=[%d %d %d]", nodes, n, total, dups, perNode[0].Load(), perNode[1].Load(), perNode[2].Load())
	if distinct != n || dups != 0 {
		t.Fatalf("want every event delivered exactly once, got %d distinct and %d duplicates", distinct, dups)
	}
}

func e2eLeaseExpiry(t *testing.T, b Backend) {
	clock := NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	started, unblock := make(chan struct{}), make(chan struct{})
	stuck := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		close(started)
		<-unblock
		return nil
	})
	var stale atomic.Int32
	metrics := staleCounter{n: &stale}
	manual := func(c *outbox.PollerConfig) { c.Lease = time.Minute }
	a := newStack(t, b, registry(t, evtPing, stuck), stackOpts{clock: clock, noHook: true, manualPoll: true, poller: manual,
		dispatcher: func(c *outbox.DispatcherConfig) { c.Metrics = metrics }})
	e := ping(t)
	write(t, b, a.w, e)
	if n, _, err := a.p.PollOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("node A poll: %d, %v", n, err)
	}
	<-started
	clock.Advance(2 * time.Minute) // A's lease expires while its listener hangs
	l := NewLedger()
	bNode := newStack(t, b, registry(t, evtPing, l.Listener()), stackOpts{clock: clock, noHook: true, manualPoll: true, poller: manual})
	if n, _, err := bNode.p.PollOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("node B poll after lease expiry: %d, %v; want the event", n, err)
	}
	Eventually(t, 10*time.Second, "B delivers the event", func() bool { return record(t, b, e.ID()).Status == outbox.StatusDone })
	doneAt := record(t, b, e.ID()).DoneAt
	close(unblock) // A finishes late: its ack must change nothing
	Eventually(t, 10*time.Second, "A's stale ack fenced off", func() bool { return stale.Load() == 1 })
	if r := record(t, b, e.ID()); r.Status != outbox.StatusDone || !r.DoneAt.Equal(doneAt) {
		t.Fatalf("after the stale ack: status %s done_at %v, want DONE at %v", r.Status, r.DoneAt, doneAt)
	}
}

type staleCounter struct {
	outbox.NopMetrics
	n *atomic.Int32
}

func (m staleCounter) StaleUpdates(n int) { m.n.Add(int32(n)) }

func e2eCloseReleases(t *testing.T, b Backend) {
	block := make(chan struct{})
	defer close(block)
	stuck := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		select {
		case <-block:
		case <-ctx.Done():
		}
		return ctx.Err()
	})
	d, err := outbox.NewDispatcher(outbox.DispatcherConfig{Store: b.Store, DB: b.DB, Registry: registry(t, evtPing, stuck),
		Workers: 1, DrainTimeout: 50 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	w, err := outbox.NewWriter(outbox.WriterConfig{TxContext: b.TxContext, Store: b.Store, Hook: d.Hook()})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	for range n {
		write(t, b, w, ping(t))
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Every row is still pending and, released, claimable by a new node at once.
	if got := count(t, b, outbox.StatusNew, outbox.StatusRetry); got != n {
		t.Fatalf("%d pending rows after Close, want %d", got, n)
	}
	l := NewLedger()
	newStack(t, b, registry(t, evtPing, l.Listener()), stackOpts{noHook: true})
	Eventually(t, 10*time.Second, "released events delivered by another node", func() bool {
		return count(t, b, outbox.StatusDone) == n
	})
}

func e2eNoLeak(t *testing.T, b Backend) {
	before := runtime.NumGoroutine()
	func() {
		l := NewLedger()
		s := newStack(t, b, registry(t, evtPing, l.Listener()), stackOpts{})
		ps, err := outbox.NewPurgeScheduler(outbox.PurgeConfig{Purger: b.Store.(outbox.Purger), DB: b.DB, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		if err := ps.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		for range 20 {
			write(t, b, s.w, ping(t))
		}
		Eventually(t, 10*time.Second, "delivered", func() bool { total, _, _ := l.Summary(); return total == 20 })
		s.close(t)
		if err := ps.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}()
	// Pool connections and the test runner may settle a little later.
	Eventually(t, 5*time.Second, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= before })
}

func e2ePurge(t *testing.T, b Backend) {
	clock := NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	l := NewLedger()
	s := newStack(t, b, registry(t, evtPing, l.Listener()), stackOpts{clock: clock, noPoller: true})
	for range 5 {
		write(t, b, s.w, ping(t))
	}
	write(t, b, s.w, outbox.MustEnvelope(evtFail, outbox.WithJSON([]byte(`{}`)))) // no listener: DEAD
	Eventually(t, 10*time.Second, "5 DONE and 1 DEAD", func() bool {
		return count(t, b, outbox.StatusDone) == 5 && count(t, b, outbox.StatusDead) == 1
	})
	cdc, err := outbox.NewWriter(outbox.WriterConfig{TxContext: b.TxContext, Store: b.Store, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	write(t, b, cdc, ping(t), ping(t)) // pending, and old by the time we purge
	clock.Advance(8 * 24 * time.Hour)
	recent := ping(t)
	write(t, b, s.w, recent) // terminal but younger than the retention
	Eventually(t, 10*time.Second, "recent event DONE", func() bool { return record(t, b, recent.ID()).Status == outbox.StatusDone })

	ps, err := outbox.NewPurgeScheduler(outbox.PurgeConfig{Purger: b.Store.(outbox.Purger), DB: b.DB, BatchSize: 2, Clock: clock, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	n, err := ps.PurgeOnce(context.Background())
	if err != nil || n != 6 {
		t.Fatalf("PurgeOnce deleted %d, %v; want the 6 old terminal events (in batches of 2)", n, err)
	}
	if got := count(t, b, outbox.StatusNew); got != 2 {
		t.Fatalf("%d pending rows left, want the 2 untouched", got)
	}
	if got := count(t, b, outbox.StatusDone); got != 1 {
		t.Fatalf("%d DONE rows left, want the recent one", got)
	}
}
