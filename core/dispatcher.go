package outbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Dispatcher defaults (the reference specification's values, except the cold
// queue's size).
const (
	DefaultWorkers = 4
	// DefaultQueueSize is the hot queue's size unless HotQueueSize sets
	// another.
	DefaultQueueSize = 1000
	// DefaultColdQueueSize is the cold queue's size unless ColdQueueSize
	// sets another: larger than the hot queue's, so that two claims of the
	// largest size (40 PollBatchSizes: 2000 events) fit in it beside each
	// other — the drain of a backlog runs at the database's pace only
	// with claims that large.
	DefaultColdQueueSize = 4000
	DefaultMaxAttempts   = 10
	DefaultDrainTimeout  = 5 * time.Second
	DefaultLease         = 15 * time.Second
	// DefaultListenerTimeout bounds one delivery unless ListenerTimeout
	// sets another bound.
	DefaultListenerTimeout = 30 * time.Second
	DefaultAckBatchSize    = 256
	DefaultAckInterval     = 5 * time.Millisecond
	// DefaultListenerBatchSize bounds the batches handed to a
	// BatchListener unless ListenerBatchSize sets another bound.
	DefaultListenerBatchSize = 100
	releaseTimeoutOnStop     = 5 * time.Second
	closeGrace               = time.Second
	maxOwnerLen              = 128 // the width of the locked_by column
	suspectQueueSize         = 64  // events waiting for the suspect lane
	suspectLaneAttempts      = 2   // attempts after which a taken-over event runs alone
)

// DispatcherConfig configures a Dispatcher. Zero values take the documented
// defaults; negative values are errors.
type DispatcherConfig struct {
	// Store records delivery outcomes (required).
	Store Store
	// Registry routes events to listeners (required).
	Registry *Registry
	// Owner identifies this dispatcher in claims; default NewOwnerID().
	// It must be unique per process start.
	Owner string
	// Workers is the number of concurrent deliveries (default 4).
	Workers int
	// HotQueueSize and ColdQueueSize bound the queues (defaults 1000 and
	// 4000).
	HotQueueSize  int
	ColdQueueSize int
	// MaxAttempts is the number of failed deliveries after which an event is
	// DEAD (default 10).
	MaxAttempts int
	// RetryPolicy spaces retries (default &ExponentialBackoff{}).
	RetryPolicy RetryPolicy
	// Interceptors run around every delivery.
	Interceptors []Interceptor
	// DrainTimeout bounds how long Close delivers what is queued (default 5s).
	DrainTimeout time.Duration
	// Lease is how long a claim protects a row from other instances
	// without being renewed (default 15s). A heartbeat renews the claims of
	// every event the dispatcher holds (queued, or delivering within its
	// ListenerTimeout) every Lease/3, in one batched update: a crashed
	// instance's events are taken over about one Lease after the crash,
	// however long listeners run. The dispatcher does not start an event
	// whose claim was last renewed more than Lease ago (renewals failed: it
	// may have been claimed elsewhere).
	Lease time.Duration
	// ListenerTimeout bounds one delivery (default 30s): the listener's
	// context carries the deadline and ends then with
	// context.DeadlineExceeded, and the error it returns counts as a
	// failed attempt. A listener that ignores its context and does not
	// return keeps its worker, but its claim is no longer renewed: the
	// event is taken over about one Lease later and its attempt counted.
	ListenerTimeout time.Duration
	// AckBatchSize and AckInterval bound the batching of DONE updates:
	// a batch is written when it is full or AckInterval after its first id
	// (defaults 256 and 5ms). A crash before the write means redelivery.
	AckBatchSize int
	AckInterval  time.Duration
	// ListenerBatchSize bounds how many events a worker hands to a
	// BatchListener at once (default DefaultListenerBatchSize). A worker
	// that takes an event routed to a BatchListener also takes the events
	// queued behind it (hot and cold, as it would one by one) that route
	// to the same listener, without waiting for more, and hands them over
	// in one HandleBatch; the first event it takes that routes elsewhere
	// ends the batch and is delivered right after it. Each event's outcome
	// is its own. 1 switches batching off: every event goes to Handle.
	ListenerBatchSize int
	// Ordered claims ordered events (see Config.Ordered) only as the first
	// of their key that is not DONE, and wakes the poller when one ends, so
	// that the next event of its key goes out at once. DeadPolicy says what
	// an ordered event that ends in DEAD does to its key (default
	// DeadBlocksKey).
	Ordered    bool
	DeadPolicy DeadPolicy
	// Metrics, Logger and Clock default to no-op metrics, slog.Default() and SystemClock.
	Metrics Metrics
	Logger  *slog.Logger
	Clock   Clock
}

// Dispatcher delivers events to listeners with a fixed pool of workers fed
// by two bounded queues: hot (from the Writer, right after commit) and cold
// (from the poller), drained 2:1 so neither starves. A full queue never
// blocks or fails a writer: the event stays in the table for the poller.
//
// The work is spread over files by job: this one holds the configuration,
// the queues and the lifecycle; deliver.go runs listeners and turns their
// results into outcomes; batch.go forms the batches of a BatchListener;
// hotpath.go takes committed events from the Writer. Every Store call of a
// claim, and the holds, are claims' (claims.go).
type Dispatcher struct {
	cfg     DispatcherConfig
	owner   string
	log     *slog.Logger
	metrics Metrics
	clock   Clock
	// claims makes every Store call of this dispatcher's claims and keeps
	// the holds of the events it is responsible for.
	claims *claims

	hot, cold chan queued
	turn      atomic.Uint32
	// suspects holds events taken over again and again (a suspect that
	// has used suspectLaneAttempts): one goroutine delivers them one at a
	// time. Others run on the workers: a SIGKILL of a healthy process
	// leaves many first-time suspects, and they must not queue up here.
	suspects chan queued

	mu       sync.RWMutex // guards closed against concurrent enqueues
	closed   bool
	started  bool
	stopping chan struct{} // closed when Close begins: workers drain and exit
	runCtx   context.Context
	cancel   context.CancelFunc
	workers  sync.WaitGroup
	closeErr error
	once     sync.Once
}

type queued struct {
	env      Envelope
	attempts int
	hold     *hold
	// created is when the event was inserted (CommitToDelivery).
	created time.Time
	// subscribers are the subscribers the event still owes (nil: all; see
	// Registry.Subscribe).
	subscribers []string
	// suspect: the claim was taken over from an owner that stored no
	// outcome (ErrClaimExpired); this delivery may end the same way, so its
	// attempt is counted before it starts (charged).
	suspect, charged bool
}

// NewOwnerID returns an owner id unique to this process start: host, pid and
// random bits.
func NewOwnerID() string {
	host, _ := os.Hostname()
	if len(host) > 64 {
		host = host[:64]
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// NewDispatcher validates cfg and returns a Dispatcher; call Start to run it.
func NewDispatcher(cfg DispatcherConfig) (*Dispatcher, error) {
	if cfg.Store == nil || cfg.Registry == nil {
		return nil, configErr("dispatcher needs a Store and a Registry")
	}
	for name, v := range map[string]int{"Workers": cfg.Workers, "HotQueueSize": cfg.HotQueueSize, "ColdQueueSize": cfg.ColdQueueSize, "MaxAttempts": cfg.MaxAttempts, "AckBatchSize": cfg.AckBatchSize, "ListenerBatchSize": cfg.ListenerBatchSize} {
		if v < 0 {
			return nil, configErr("dispatcher %s must not be negative, got %d", name, v)
		}
	}
	if cfg.DrainTimeout < 0 || cfg.AckInterval < 0 || cfg.Lease < 0 || cfg.ListenerTimeout < 0 {
		return nil, configErr("dispatcher durations must not be negative")
	}
	if cfg.DeadPolicy != DeadBlocksKey && cfg.DeadPolicy != DeadSkipsKey {
		return nil, configErr("unknown dead policy %d", int(cfg.DeadPolicy))
	}
	if len(cfg.Owner) > maxOwnerLen {
		return nil, configErr("dispatcher owner id longer than %d characters", maxOwnerLen)
	}
	setDefault(&cfg.Workers, DefaultWorkers)
	setDefault(&cfg.HotQueueSize, DefaultQueueSize)
	setDefault(&cfg.ColdQueueSize, DefaultColdQueueSize)
	setDefault(&cfg.MaxAttempts, DefaultMaxAttempts)
	setDefault(&cfg.AckBatchSize, DefaultAckBatchSize)
	setDefault(&cfg.ListenerBatchSize, DefaultListenerBatchSize)
	setDefault(&cfg.DrainTimeout, DefaultDrainTimeout)
	setDefault(&cfg.AckInterval, DefaultAckInterval)
	setDefault(&cfg.Lease, DefaultLease)
	setDefault(&cfg.ListenerTimeout, DefaultListenerTimeout)
	if cfg.Owner == "" {
		cfg.Owner = NewOwnerID()
	}
	if cfg.RetryPolicy == nil {
		cfg.RetryPolicy = &ExponentialBackoff{}
	}
	cfg.Clock = clockOr(cfg.Clock)
	d := &Dispatcher{
		cfg: cfg, owner: cfg.Owner, log: loggerOr(cfg.Logger).With("outbox_owner", cfg.Owner),
		metrics: metricsOr(cfg.Metrics), clock: cfg.Clock,
		claims: newClaims(claimsConfig{
			Store: cfg.Store, Owner: cfg.Owner, Lease: cfg.Lease, MaxAttempts: cfg.MaxAttempts, RetryPolicy: cfg.RetryPolicy,
			Ordered: cfg.Ordered, DeadPolicy: cfg.DeadPolicy, AckBatch: cfg.AckBatchSize, AckInterval: cfg.AckInterval,
			// Room for as many acks as the queues hold: a worker does not
			// wait for the ack writer while a DONE update waits for the
			// database (SQLite's write lock), unless that lasts thousands
			// of deliveries.
			AckRoom: cfg.HotQueueSize + cfg.ColdQueueSize + suspectQueueSize + cfg.Workers + 1,
			Logger:  cfg.Logger, Metrics: cfg.Metrics, Clock: cfg.Clock,
		}),
		hot: make(chan queued, cfg.HotQueueSize), cold: make(chan queued, cfg.ColdQueueSize),
		suspects: make(chan queued, suspectQueueSize),
		stopping: make(chan struct{}),
	}
	return d, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Owner returns the owner id this dispatcher claims rows with.
func (d *Dispatcher) Owner() string { return d.owner }

// Start launches the workers and the ack writer. The goroutines stop on
// Close; ctx only scopes the values listeners see (its cancellation does not
// stop the dispatcher).
func (d *Dispatcher) Start(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	if d.started {
		return fmt.Errorf("%w: dispatcher already started", ErrInvalidConfig)
	}
	d.started = true
	d.runCtx, d.cancel = context.WithCancel(context.WithoutCancel(ctx))
	d.workers.Add(d.cfg.Workers + 2)
	for range d.cfg.Workers {
		go d.work()
	}
	go d.suspectLane()
	go func() {
		defer d.workers.Done()
		d.claims.heartbeat(d.runCtx, d.stopping)
	}()
	go d.claims.ackLoop()
	return nil
}

// enqueueHot queues a committed event for immediate delivery. It returns
// false, without blocking, if the hot queue is full, the dispatcher is
// closed, or the event is already held in this process; the event then
// stays in the table for the poller.
func (d *Dispatcher) enqueueHot(e Envelope, created time.Time) bool {
	ok, _ := d.enqueue(d.hot, queued{env: e, created: created}, utcNow(d.clock))
	if ok {
		d.metrics.EventEnqueued(labelsOf(e), PathHot)
	}
	return ok
}

// enqueueCold queues an event claimed by the poller. It returns false if the
// cold queue is full or the dispatcher is closed. An event already held in
// this process is not queued twice but reported as accepted.
func (d *Dispatcher) enqueueCold(r Record) bool {
	claimed := r.LockedAt
	if claimed.IsZero() {
		claimed = utcNow(d.clock)
	}
	item := queued{env: r.Envelope, attempts: r.Attempts, suspect: takenOver(r), created: r.CreatedAt, subscribers: r.Subscribers}
	q := d.cold
	if item.suspect && item.attempts >= suspectLaneAttempts {
		// Taken over again after attempts that ended no better: it may be
		// what killed those processes. It runs alone, so that what would
		// run beside it is not dragged along each time.
		q = d.suspects
	}
	ok, held := d.enqueue(q, item, claimed)
	if held {
		return true // being delivered here already: its renewals failed for a lease, and this claim took it back
	}
	if ok {
		d.metrics.EventEnqueued(labelsOf(r.Envelope), PathCold)
	}
	return ok
}

// enqueue holds item's event, claimed at claimed, and queues it without
// blocking. held reports that the event was already held (see
// holds.acquire), in which case nothing is queued.
func (d *Dispatcher) enqueue(q chan queued, item queued, claimed time.Time) (ok, held bool) {
	item.hold = d.claims.hold(item.env, claimed)
	if item.hold == nil {
		return false, true
	}
	if !d.send(q, item) {
		d.claims.letGo(item.hold)
		return false, false
	}
	return true, false
}

func (d *Dispatcher) send(q chan queued, item queued) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed || !d.started {
		return false
	}
	select {
	case q <- item:
		return true
	default:
		return false
	}
}

// room returns how many more events the cold queue accepts now (none
// while the dispatcher is not running), and its size.
func (d *Dispatcher) room() (free, size int) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed || !d.started {
		return 0, cap(d.cold)
	}
	return cap(d.cold) - len(d.cold), cap(d.cold)
}

// depths returns the current lengths of the hot and cold queues.
func (d *Dispatcher) depths() (hot, cold int) { return len(d.hot), len(d.cold) }

// next takes the next event (see poll), waiting for one. It returns
// false when the dispatcher is stopping and both queues are empty, or
// when it is stopping hard.
func (d *Dispatcher) next() (queued, bool) {
	if q, ok := d.poll(); ok || d.runCtx.Err() != nil {
		return q, ok
	}
	select {
	case q := <-d.hot:
		return q, true
	case q := <-d.cold:
		return q, true
	case <-d.stopping:
		return queued{}, false
	case <-d.runCtx.Done():
		return queued{}, false
	}
}

// poll takes the next queued event without waiting, hot twice for every
// cold one when both have work. It returns false when both queues are
// empty, or when the dispatcher is stopping hard.
func (d *Dispatcher) poll() (queued, bool) {
	if d.runCtx.Err() != nil {
		return queued{}, false
	}
	first, second := d.hot, d.cold
	if d.turn.Add(1)%3 == 0 {
		first, second = d.cold, d.hot
	}
	select {
	case q := <-first:
		return q, true
	default:
	}
	select {
	case q := <-second:
		return q, true
	default:
	}
	return queued{}, false
}

// work delivers events until the dispatcher stops (see run). Its
// deliveries' contexts derive from a context of its own, which Close
// cancels with the dispatcher's: deriving a batch's from the dispatcher's
// context would make every worker take that context's lock twice per
// batch.
func (d *Dispatcher) work() {
	defer d.workers.Done()
	ctx, cancel := context.WithCancel(d.runCtx)
	defer cancel()
	to := newTimeouts(ctx, d.cfg.ListenerTimeout)
	defer to.close()
	var buf batchBuf
	for {
		q, ok := d.next()
		if !ok {
			return
		}
		for ok {
			q, ok = d.run(to, &buf, q)
		}
	}
}

// expired reports (and lets go of) a queued event whose claim lapsed
// while it waited (see claims.expired).
func (d *Dispatcher) expired(q queued) bool { return d.claims.expired(q.hold, q.env) }

// suspectLane delivers the events of the suspects queue one at a time.
func (d *Dispatcher) suspectLane() {
	defer d.workers.Done()
	to := newTimeouts(d.runCtx, d.cfg.ListenerTimeout)
	defer to.close()
	for {
		select {
		case q := <-d.suspects:
			if d.expired(q) {
				continue
			}
			d.deliverSuspect(to, q)
		case <-d.stopping:
			return // releaseQueued gives the rest back
		case <-d.runCtx.Done():
			return
		}
	}
}

// deliverSuspect delivers an event taken over from an owner that stored no
// outcome. The acknowledgements of what ran before are written first, and
// the attempt is counted before the listener starts: if this delivery kills
// the process too, the event still comes closer to DEAD, and the events
// delivered before it are not delivered again.
func (d *Dispatcher) deliverSuspect(to *timeouts, q queued) {
	if !d.claims.countAttempt(q.hold, q.env) {
		return
	}
	q.attempts, q.charged = q.attempts+1, true
	d.deliver(to, q, d.route(q.env))
}

// Close stops accepting events, lets the workers deliver what is queued for
// up to DrainTimeout (or until ctx ends), then cancels the listeners' context
// and waits for the workers. Events still queued are released so any poller
// can claim them at once; pending acks are written. Close is idempotent.
func (d *Dispatcher) Close(ctx context.Context) error {
	d.once.Do(func() { d.closeErr = d.close(ctx) })
	return d.closeErr
}

func (d *Dispatcher) close(ctx context.Context) error {
	d.mu.Lock()
	d.closed = true
	started := d.started
	d.mu.Unlock()
	close(d.stopping)
	if !started {
		return nil
	}
	drained := make(chan struct{})
	go func() { d.workers.Wait(); close(drained) }()
	timer := time.NewTimer(d.cfg.DrainTimeout)
	defer timer.Stop()
	var err error
	select {
	case <-drained:
	case <-timer.C:
		d.log.Warn("outbox: drain timeout reached, cancelling listeners", "timeout", d.cfg.DrainTimeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	d.cancel()
	// Listeners see their context cancelled; give them a moment to return
	// even when ctx has already ended.
	grace := time.NewTimer(closeGrace)
	defer grace.Stop()
	select {
	case <-drained:
	case <-ctx.Done():
		select {
		case <-drained:
		case <-grace.C:
			return fmt.Errorf("outbox: dispatcher close: listeners still running: %w", ctx.Err())
		}
	}
	d.releaseQueued(ctx)
	d.claims.closeAcks()
	return err
}

// releaseQueued drops this owner's claim on events that were queued but not
// delivered, so they need not wait for the lease to expire.
func (d *Dispatcher) releaseQueued(ctx context.Context) {
	var ids []string
	for _, q := range []chan queued{d.hot, d.cold, d.suspects} {
	drain:
		for {
			select {
			case item := <-q:
				ids = append(ids, item.env.ID())
				d.claims.letGo(item.hold)
			default:
				break drain
			}
		}
	}
	if len(ids) == 0 {
		return
	}
	if err := d.claims.release(ctx, ids); err != nil {
		d.log.Warn("outbox: could not release undelivered events; they are claimable again when their lease expires", "count", len(ids), "error", err)
		return
	}
	d.log.Info("outbox: released undelivered events for other pollers", "count", len(ids))
}
