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

// dispatcher defaults (the reference specification's values, except the cold
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
)

// dispatcher delivers events to listeners with a fixed pool of workers fed
// by two bounded queues: hot (from the writer, right after commit) and cold
// (from the poller), drained 2:1 so neither starves. A full queue never
// blocks or fails a writer: the event stays in the table for the poller.
//
// The work is spread over files by job: this one holds the configuration,
// the queues and the lifecycle; deliver.go runs listeners and turns their
// results into outcomes; batch.go forms the batches of a BatchListener;
// hotpath.go takes committed events from the writer. Every Store call of a
// claim, and the holds, are claims' (claims.go).
type dispatcher struct {
	cfg      Config
	registry *Registry
	owner    string
	log      *slog.Logger
	metrics  Metrics
	clock    Clock
	// claims makes every Store call of this dispatcher's claims and keeps
	// the holds of the events it is responsible for.
	claims *claims

	hot, cold chan queued
	hotFull   hotFullLog // see dropHot
	turn      atomic.Uint32
	// suspects holds the events that were in flight when their owner
	// stopped (see ErrInFlight): one goroutine delivers them one at a
	// time, each once the events claimed with it have ended. Other
	// taken-over events run on the workers: a SIGKILL of a healthy process
	// leaves many of them, which its own deliveries never started.
	suspects chan queued

	mu       sync.RWMutex // guards closed against concurrent enqueues
	closed   bool
	started  bool
	stopping chan struct{} // closed when Close begins: workers drain and exit
	runCtx   context.Context
	cancel   context.CancelFunc
	workers  sync.WaitGroup
	once     sync.Once     // beginClose
	finished chan struct{} // closed once every goroutine has stopped (nil: never started)
}

type queued struct {
	env      Envelope
	attempts int
	hold     *hold
	// created is when the event was inserted (CommitToDelivery).
	created time.Time
	// seq is the event's Record.Seq (claimed events; see RunContinuer).
	seq int64
	// subscribers are the subscribers the event still owes (nil: all; see
	// Registry.Subscribe).
	subscribers []string
	// suspect: the claim was taken over from an owner that stored no
	// outcome (ErrClaimExpired, ErrInFlight); this delivery may end the
	// same way, so its attempt is counted before it starts (charged).
	suspect, charged bool
	// after, for an event in flight when its owner stopped (the suspect
	// lane's), are the events claimed with it, which end first.
	after *claimMates
	// rest are the later events of the run this event heads (see
	// ClaimRequest.Run), each held: the worker delivers them after it, in
	// order (deliverRuns). inRun: a run's event with more after it, whose
	// DONE is written before the next starts.
	rest  []queued
	inRun bool
	// stopRun, for an event of a run with more after it, gives back the
	// rest of the run: called before an outcome other than DONE is
	// stored, so that whoever sees that outcome sees the rest given back.
	stopRun func()
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

// newDispatcher returns a dispatcher delivering the events it is given
// to the listeners of reg, with the settings of cfg (defaults applied, see
// Config.WithDefaults); call Start to run it. c, made with ackRoom(cfg), makes
// every Store call.
func newDispatcher(cfg Config, reg *Registry, c *claims) *dispatcher {
	return &dispatcher{
		cfg: cfg, registry: reg, owner: cfg.Owner, log: cfg.Logger.With("outbox_owner", cfg.Owner),
		metrics: cfg.Metrics, clock: cfg.Clock, claims: c,
		hot: make(chan queued, cfg.HotQueueSize), cold: make(chan queued, cfg.ColdQueueSize),
		suspects: make(chan queued, suspectQueueSize),
		stopping: make(chan struct{}),
	}
}

// ackRoom is how many acknowledgements may wait for the ack writer: as
// many as the queues hold, so that a worker does not wait for the ack
// writer while a DONE update waits for the database (SQLite's write
// lock), unless that lasts thousands of deliveries.
func ackRoom(cfg Config) int {
	return cfg.HotQueueSize + cfg.ColdQueueSize + suspectQueueSize + cfg.Workers + 1
}

// Owner returns the owner id this dispatcher claims rows with.
func (d *dispatcher) Owner() string { return d.owner }

// Start launches the workers and the ack writer. The goroutines stop on
// Close; ctx only scopes the values listeners see (its cancellation does not
// stop the dispatcher).
func (d *dispatcher) Start(ctx context.Context) error {
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
func (d *dispatcher) enqueueHot(e Envelope, created time.Time) bool {
	ok, _ := d.enqueue(d.hot, queued{env: e, created: created}, utcNow(d.clock), nil)
	if ok {
		d.metrics.EventEnqueued(labelsOf(e), PathHot)
	}
	return ok
}

// enqueueClaimed queues an event claimed by the poller, one of a claim
// whose mates (nil: none) are the events its suspects wait for: an event
// in flight when its owner stopped (inFlight) goes to the suspect lane,
// where it starts once the mates have ended; any other event joins the
// mates. It returns false if the queue is full or the dispatcher is
// closed. An event already held in this process is not queued twice but
// reported as accepted.
//
// run is the event and the later events of its run (see ClaimRequest.Run
// and runLen), which one worker delivers after it, in order.
func (d *dispatcher) enqueueClaimed(run []Record, mates *claimMates) bool {
	r := run[0]
	item := queued{env: r.Envelope, attempts: r.Attempts, suspect: takenOver(r), created: r.CreatedAt, seq: r.Seq, subscribers: r.Subscribers}
	q := d.cold
	if inFlight(r) && len(run) == 1 {
		// It may be what stopped its owner: it runs alone, after the
		// events claimed with it, so that they are not dragged along. (In
		// a run, its attempt is counted before it starts, see deliverRuns.)
		q, item.after, mates = d.suspects, mates, nil
	}
	if len(run) > 1 {
		var back []string
		item.rest, back = d.holdRun(run[1:], mates)
		defer d.giveBack(nil, back)
	}
	ok, held := d.enqueue(q, item, claimedAt(r, d.clock), mates)
	if held {
		d.giveBack(item.rest, nil) // its run waits for it
		return true                // being delivered here already: its renewals failed for a lease, and this claim took it back
	}
	if !ok {
		for _, t := range item.rest {
			d.claims.letGo(t.hold)
		}
		return false
	}
	d.metrics.EventEnqueued(labelsOf(r.Envelope), PathCold)
	for _, t := range item.rest {
		d.metrics.EventEnqueued(labelsOf(t.env), PathCold)
	}
	return true
}

// claimedAt returns when r was claimed (now, if the store did not say).
func claimedAt(r Record, clock Clock) time.Time {
	if r.LockedAt.IsZero() {
		return utcNow(clock)
	}
	return r.LockedAt
}

// holdRun holds the later events of a run, up to the first that is held
// already (being delivered here: its run stops before it), and returns
// them queued, and the ids of those after it, which are to be given back.
func (d *dispatcher) holdRun(recs []Record, mates *claimMates) (rest []queued, back []string) {
	for i, r := range recs {
		hd := d.claims.hold(r.Envelope, claimedAt(r, d.clock), mates)
		if hd == nil {
			for _, t := range recs[i+1:] {
				back = append(back, t.ID)
			}
			return rest, back
		}
		rest = append(rest, queued{env: r.Envelope, attempts: r.Attempts, suspect: takenOver(r), created: r.CreatedAt, seq: r.Seq,
			subscribers: r.Subscribers, hold: hd})
	}
	return rest, nil
}

// giveBack lets go of the queued events qs and releases their claims and
// those of ids (held nowhere here), unstarted, no attempt used: the
// later events of a run that stopped. The events whose holds were taken
// over here meanwhile are left to those.
func (d *dispatcher) giveBack(qs []queued, ids []string) {
	for _, q := range qs {
		if d.claims.letGo(q.hold) {
			ids = append(ids, q.env.ID())
		}
	}
	if len(ids) == 0 {
		return
	}
	if err := d.claims.release(context.Background(), ids); err != nil {
		d.log.Warn("outbox: could not give back the rest of a run; its events are claimable again when their lease expires", "count", len(ids), "error", err)
	}
	d.claims.wakePoller() // their key may go on
}

// enqueue holds item's event, claimed at claimed, as one of mates (nil:
// none, see claimMates), and queues it without blocking. held reports
// that the event was already held (see holds.acquire), in which case
// nothing is queued.
func (d *dispatcher) enqueue(q chan queued, item queued, claimed time.Time, mates *claimMates) (ok, held bool) {
	item.hold = d.claims.hold(item.env, claimed, mates)
	if item.hold == nil {
		return false, true
	}
	if !d.send(q, item) {
		d.claims.letGo(item.hold)
		return false, false
	}
	return true, false
}

func (d *dispatcher) send(q chan queued, item queued) bool {
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
func (d *dispatcher) room() (free, size int) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed || !d.started {
		return 0, cap(d.cold)
	}
	return cap(d.cold) - len(d.cold), cap(d.cold)
}

// depths returns the current lengths of the hot and cold queues.
func (d *dispatcher) depths() (hot, cold int) { return len(d.hot), len(d.cold) }

// next takes the next event (see poll), waiting for one. It returns
// false when the dispatcher is stopping and both queues are empty, or
// when it is stopping hard.
func (d *dispatcher) next() (queued, bool) {
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
func (d *dispatcher) poll() (queued, bool) {
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
func (d *dispatcher) work() {
	returned := false
	defer d.replaceOnGoexit(&returned, d.work)
	ctx, cancel := context.WithCancel(d.runCtx)
	defer cancel()
	to := newTimeouts(ctx, d.cfg.ListenerTimeout)
	defer to.close()
	var buf batchBuf
	for {
		q, ok := d.next()
		if !ok {
			returned = true
			return
		}
		for ok {
			q, ok = d.run(to, &buf, q)
		}
	}
}

// expired reports (and lets go of) a queued event whose claim lapsed
// while it waited (see claims.expired).
func (d *dispatcher) expired(q queued) bool { return d.claims.expired(q.hold, q.env) }

// heldBack reports (and gives back unstarted, its attempt unused) a
// queued event that the gate holds back now: its type was paused, or its
// circuit breaker opened, since it was claimed.
func (d *dispatcher) heldBack(q queued) bool {
	if d.claims.gate.admits(q.env) {
		return false
	}
	d.claims.giveBack(d.runCtx, q.hold, q.env)
	return true
}

// suspectLane delivers the events of the suspects queue one at a time.
func (d *dispatcher) suspectLane() {
	returned := false
	defer d.replaceOnGoexit(&returned, d.suspectLane)
	to := newTimeouts(d.runCtx, d.cfg.ListenerTimeout)
	defer to.close()
	for {
		select {
		case q := <-d.suspects:
			if !d.waitMates(q) {
				returned = true
				return
			}
			if d.expired(q) || d.heldBack(q) {
				continue
			}
			d.deliverSuspect(to, q)
		case <-d.stopping:
			returned = true
			return // releaseQueued gives the rest back
		case <-d.runCtx.Done():
			returned = true
			return
		}
	}
}

// waitMates waits until the events claimed with the suspect q have ended,
// or for ListenerTimeout at most (a mate that runs longer is hung: its
// claim is no longer renewed). It returns false, q given back, when the
// dispatcher stops meanwhile.
func (d *dispatcher) waitMates(q queued) bool {
	if q.after == nil || isClosed(q.after.done) {
		return true
	}
	t := time.NewTimer(d.cfg.ListenerTimeout)
	defer t.Stop()
	select {
	case <-q.after.done:
	case <-t.C:
	case <-d.stopping:
		d.claims.settle(d.runCtx, q.hold, q.env, released())
		return false
	case <-d.runCtx.Done():
		d.claims.settle(d.runCtx, q.hold, q.env, released())
		return false
	}
	return true
}

// replaceOnGoexit ends a worker goroutine (a worker or the suspect lane),
// deferred by it: unless it returned, something it ran called
// runtime.Goexit, which no recover stops; the delivery's own deferred
// calls have stored its outcome (ErrGoexit), and a new goroutine running
// fn takes the worker's place, so that the pool keeps its size.
func (d *dispatcher) replaceOnGoexit(returned *bool, fn func()) {
	if !*returned {
		d.log.Warn("outbox: a listener called runtime.Goexit; its delivery failed and its worker was replaced")
		d.workers.Add(1) // before Done: Close's Wait must not see the pool empty
		go fn()
	}
	d.workers.Done()
}

// deliverSuspect delivers an event taken over from an owner that stored no
// outcome. The acknowledgements of what ran before are written first, and
// the attempt is counted before the listener starts: if this delivery kills
// the process too, the event still comes closer to DEAD, and the events
// delivered before it are not delivered again.
func (d *dispatcher) deliverSuspect(to *timeouts, q queued) {
	if !d.claims.countAttempt(d.runCtx, q.hold, q.env) {
		return
	}
	q.attempts, q.charged = q.attempts+1, true
	d.deliver(to, q, d.route(q.env))
}

// Close stops accepting events, lets the workers deliver what is queued for
// up to DrainTimeout (or until ctx ends), then cancels the listeners' context
// and waits for the workers. Events still queued are released so any poller
// can claim them at once; pending acks are written. Every call waits, until
// its ctx ends, for every goroutine the dispatcher started: it returns nil
// once they have all stopped, and an error wrapping ctx.Err() if ctx ended
// first (the drain was cut short, or listeners still run: a later Close
// waits for them again). The acknowledgements of listeners that return
// late are still written before the last goroutine ends.
func (d *dispatcher) Close(ctx context.Context) error {
	d.once.Do(d.beginClose)
	if d.finished == nil || isClosed(d.finished) { // never started, or stopped
		return nil
	}
	select {
	case <-d.finished:
		return nil
	case <-ctx.Done():
	}
	// The caller stops waiting: cancel the listeners now, and give them a
	// moment to return.
	d.cancel()
	grace := time.NewTimer(closeGrace)
	defer grace.Stop()
	select {
	case <-d.finished:
		return fmt.Errorf("outbox: dispatcher close: drain cut short: %w", ctx.Err())
	case <-grace.C:
		return fmt.Errorf("outbox: dispatcher close: listeners still running: %w", ctx.Err())
	}
}

// beginClose stops accepting events and, if the dispatcher runs, starts
// the shutdown: the workers drain the queues, the listeners' context is
// cancelled after DrainTimeout, and once every worker has returned the
// rest is released and the acks are written (finished is closed then).
func (d *dispatcher) beginClose() {
	d.mu.Lock()
	d.closed = true
	started := d.started
	d.mu.Unlock()
	close(d.stopping)
	if !started {
		return
	}
	d.finished = make(chan struct{})
	drain := time.AfterFunc(d.cfg.DrainTimeout, func() {
		d.log.Warn("outbox: drain timeout reached, cancelling listeners", "timeout", d.cfg.DrainTimeout)
		d.cancel()
	})
	go func() {
		d.workers.Wait()
		drain.Stop()
		d.cancel()
		d.releaseQueued(d.runCtx)
		d.claims.closeAcks()
		close(d.finished)
	}()
}

// releaseQueued drops this owner's claim on events that were queued but not
// delivered, so they need not wait for the lease to expire.
func (d *dispatcher) releaseQueued(ctx context.Context) {
	var ids []string
	for _, q := range []chan queued{d.hot, d.cold, d.suspects} {
	drain:
		for {
			select {
			case item := <-q:
				for _, t := range append([]queued{item}, item.rest...) {
					ids = append(ids, t.env.ID())
					d.claims.letGo(t.hold)
				}
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
	d.claims.cross.send() // the other instances' pollers take them at once
	d.log.Info("outbox: released undelivered events for other pollers", "count", len(ids))
}
