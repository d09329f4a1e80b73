package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// poller defaults (the reference specification's values).
const (
	DefaultPollInterval   = 5 * time.Second
	DefaultPollBatchSize  = 50
	DefaultMaxPollBackoff = time.Minute
	// maxClaimGrowth bounds a claim at this many times BatchSize. The
	// database's work per row falls with the claim's size up to a few
	// thousand rows (PostgreSQL: a claim of 2000 rows costs it two thirds
	// of what claims of 400 do per row; see docs/benchmarks.md).
	maxClaimGrowth = 40
	// pollBusyWait is how soon the loop polls again when the cold queue has
	// no room for a full batch: its workers free room within an ack window.
	pollBusyWait = 5 * time.Millisecond
	// backlogClaimers is how many claims a poller keeps in flight while
	// there is a backlog: a claim spends most of its time in the database,
	// and a second one overlapping it nearly doubles the drain rate. Idle,
	// one loop polls.
	backlogClaimers = 2
	// recoveryInterval spaces the claims that recover expired claims.
	recoveryInterval = time.Second
)

// poller claims due events that the hot path did not deliver — delayed
// events, retries, events refused by a full queue, events of crashed
// instances — and feeds them to the dispatcher's cold queue. It claims
// through claims and reads the queue's room through coldQueue. Any number of
// pollers can run on one table: claims are exclusive, with an owner and a
// lease. A full batch triggers another poll at once; an idle poll waits
// Interval; database errors back off exponentially up to MaxBackoff.
type poller struct {
	cfg    Config
	claims *claims
	queue  coldQueue
	log    *slog.Logger
	// backlog wakes the extra claimers: the main loop found a full batch.
	backlog chan struct{}
	// reserved is the cold-queue room that claims in flight may fill;
	// nextRecovery is when a claim recovers expired claims again.
	mu           sync.Mutex
	reserved     int
	nextRecovery time.Time

	bg background
}

// newPoller returns a poller that claims through c and feeds queue, with
// the settings of cfg (defaults applied, see Config.WithDefaults): PollInterval
// between polls when there is nothing to do; PollBatchSize, the smallest
// claim (the poller waits for that much room in the cold queue, then
// claims as much as there is room for, up to maxClaimGrowth times
// PollBatchSize); SkipRecent; MaxPollBackoff, the longest wait after
// database errors. Call Start to run it.
func newPoller(cfg Config, c *claims, queue coldQueue) *poller {
	return &poller{cfg: cfg, claims: c, queue: queue, log: cfg.Logger.With("outbox_owner", cfg.Owner), backlog: make(chan struct{}, 1)}
}

// coldQueue is what a poller feeds: the dispatcher's cold queue.
type coldQueue interface {
	// room returns how many more events the queue takes now (none while
	// the dispatcher is not running) and its size.
	room() (free, size int)
	// depths returns the current lengths of the hot and cold queues.
	depths() (hot, cold int)
	// enqueueClaimed queues a claimed event (with the rest of its run, see
	// runLen), one of a claim whose
	// suspects wait for mates (see dispatcher.enqueueClaimed); false if
	// the queue is full or closing.
	enqueueClaimed(run []Record, mates *claimMates) bool
}

// Start runs the polling loop, and the extra claimers that help it while
// there is a backlog, until Close. The first poll happens at once.
func (p *poller) Start(ctx context.Context) error {
	return p.bg.start(ctx, "poller", func(ctx context.Context) {
		var wg sync.WaitGroup
		for range backlogClaimers - 1 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.claimBacklog(ctx)
			}()
		}
		p.loop(ctx)
		wg.Wait()
	})
}

// claimBacklog is an extra claimer: woken by the main loop when a claim
// came back full, it claims until a claim does not.
func (p *poller) claimBacklog(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.backlog:
		}
		for {
			_, more, _, err := p.poll(ctx)
			if err != nil || !more {
				break // the main loop handles errors, waits and backoff
			}
		}
	}
}

func (p *poller) loop(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	backoff := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-p.claims.wakeups(): // the hot path left events in the table
			if backoff > 0 {
				continue // the database is failing: keep backing off
			}
			timer.Stop() // Reset below; a stale tick is at worst one more poll
		}
		_, more, busy, err := p.poll(ctx)
		wait := p.claims.gate.wait(p.cfg.PollInterval) // a limited route's next token
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			backoff = min(max(2*backoff, time.Second), p.cfg.MaxPollBackoff)
			wait = backoff
			p.log.Error("outbox: poll failed, backing off", "error", err, "retry_in", wait)
		case more:
			backoff, wait = 0, 0
			select {
			case p.backlog <- struct{}{}:
			default:
			}
		case busy:
			backoff, wait = 0, min(wait, pollBusyWait)
		default:
			backoff = 0
		}
		p.claims.gate.polled(err, utcNow(p.cfg.Clock))
		timer.Reset(wait)
	}
}

// PollOnce claims one batch and queues it. It claims nothing while the
// cold queue has no room for a full batch (BatchSize, or the queue's size if
// smaller). It returns how many events were queued and whether another poll
// should follow at once because the batch was full.
func (p *poller) PollOnce(ctx context.Context) (queued int, more bool, err error) {
	queued, more, _, err = p.poll(ctx)
	return queued, more, err
}

// poll is PollOnce; busy reports that it claimed nothing because the
// running dispatcher's cold queue had no room for a full batch, so the loop
// polls again soon rather than after Interval. Waiting for room keeps claims
// full-sized: a poller that claimed whatever little room there was would
// run many small claims, each competing with the dispatcher's acks for the
// database (on SQLite, for its single write lock).
func (p *poller) poll(ctx context.Context) (queued int, more, busy bool, err error) {
	hot, cold := p.queue.depths()
	p.cfg.Metrics.QueueDepths(hot, cold)
	limit, concurrent, ok := p.reserve()
	if !ok { // always so while the dispatcher is not running
		// Leave the rows in the table. While the queue holds events, the
		// workers are about to free room; a claim in flight is about to
		// fill it.
		return 0, false, cold > 0 || concurrent, nil
	}
	defer p.unreserve(limit)
	now := utcNow(p.cfg.Clock)
	types, skip, claimsAny := p.claims.gate.request()
	if !claimsAny { // everything is paused, or nothing routed
		queued, err = p.pollRoutes(ctx, now)
		return queued, false, false, err
	}
	recover := p.recoveryDue(now)
	got, err := p.claims.claim(ctx, now, limit, p.cfg.SkipRecent, recover, claimFilter{types: types, skip: skip})
	if err != nil {
		return 0, false, false, fmt.Errorf("outbox: claim: %w", err)
	}
	if recover {
		p.recovered(now, got, limit)
	}
	side, err := p.pollRoutes(ctx, now)
	if err != nil {
		return side, false, false, err
	}
	queued, more, busy = p.enqueue(ctx, got, limit, concurrent)
	return queued + side, more, busy, nil
}

// enqueue queues the records of the claim got, of at most limit rows,
// and reports whether another poll should follow at once (more), or soon
// for what the queue refused (busy).
func (p *poller) enqueue(ctx context.Context, got claimed, limit int, concurrent bool) (queued int, more, busy bool) {
	recs := got.recs
	if len(recs) == 0 {
		return 0, false, false
	}
	// Events taken over from an owner that stored no outcome come after the
	// fresh ones (claims.claim orders them, see groupRuns), and those that
	// were in flight when it stopped (suspects: one may be what stopped it)
	// last, in the suspect lane, where each starts once the others of this
	// claim (its mates) have ended: a suspect that kills the process again
	// takes none of them along.
	var mates *claimMates
	sealed := true
	if inFlight(recs[len(recs)-1]) {
		mates, sealed = newClaimMates(), false
	}
	seal := func() {
		if !sealed {
			sealed = true
			mates.seal()
		}
	}
	defer seal()
	for i, n := 0, 0; i < len(recs); i += n {
		if inFlight(recs[i]) {
			seal() // every other event of the claim has joined
		}
		n = runLen(recs[i:])
		if !p.queue.enqueueClaimed(recs[i:i+n], mates) {
			// Full or closing: give the rest back to every poller.
			p.release(ctx, recs[i:])
			return queued, false, true // poll again soon for what was released
		}
		queued += n
	}
	// A claim that came back full suggests more. So does one that ran
	// beside another claim: rows that one locked were skipped here.
	return queued, (got.rows == limit || concurrent) && queued > 0, false
}

// pollRoutes runs the claims of single routes that the gate asks for (see
// gate.sideClaims): a half-open circuit breaker's probe, and the share of
// a limited route, within the cold queue's room. They recover expired
// claims of their routes too: the main claim leaves those routes out.
func (p *poller) pollRoutes(ctx context.Context, now time.Time) (queued int, err error) {
	p.mu.Lock()
	free, _ := p.queue.room()
	sides := p.claims.gate.sideClaims(now, free-p.reserved)
	total := 0
	for _, s := range sides {
		total += s.limit
	}
	p.reserved += total
	p.mu.Unlock()
	defer p.unreserve(total)
	for i, s := range sides {
		got, err := p.claims.claim(ctx, now, s.limit, 0, true, claimFilter{types: []string{s.typ}})
		p.claims.gate.claimedSide(s, got.recs)
		if err != nil {
			for _, rest := range sides[i+1:] {
				p.claims.gate.claimedSide(rest, nil)
			}
			return queued, fmt.Errorf("outbox: claim of %s: %w", s.typ, err)
		}
		n, _, _ := p.enqueue(ctx, got, s.limit, false)
		queued += n
	}
	return queued, nil
}

// suspicion orders the records of a claim: fresh ones (0), then those
// taken over (1), then those in flight when their owner stopped (2).
func suspicion(r Record) int {
	switch {
	case inFlight(r):
		return 2
	case takenOver(r):
		return 1
	}
	return 0
}

// reserve takes cold-queue room for one claim: as much as the queue has
// room for beside the claims in flight, up to maxClaimGrowth batches
// (fewer, larger claims drain a backlog faster). It fails while there is
// no room for a batch (BatchSize, or the queue's size if smaller).
// concurrent reports that another claim is in flight.
func (p *poller) reserve() (limit int, concurrent, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	free, size := p.queue.room()
	room := free - p.reserved
	if room < min(p.cfg.PollBatchSize, size) {
		return 0, p.reserved > 0, false
	}
	limit = min(room, p.cfg.PollBatchSize*maxClaimGrowth)
	concurrent = p.reserved > 0
	p.reserved += limit
	return limit, concurrent, true
}

func (p *poller) unreserve(n int) {
	p.mu.Lock()
	p.reserved -= n
	p.mu.Unlock()
}

// recoveryDue reports whether the claim at now recovers expired claims:
// about once a second (at most every Lease/4), not at every claim (see
// ClaimRequest.NoRecovery). The first claim always does.
func (p *poller) recoveryDue(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Before(p.nextRecovery) {
		return false
	}
	p.nextRecovery = now.Add(min(recoveryInterval, p.cfg.Lease/4))
	return true
}

// recovered notes the outcome of a claim that recovered: a claim filled
// with taken-over rows means more may have expired, to recover at once.
func (p *poller) recovered(now time.Time, got claimed, limit int) {
	if got.takenOver == limit {
		p.mu.Lock()
		p.nextRecovery = now
		p.mu.Unlock()
	}
}

// release drops the claim on recs, which the cold queue refused.
func (p *poller) release(ctx context.Context, recs []Record) {
	ids := recordIDs(recs)
	if err := p.claims.release(ctx, ids); err != nil {
		p.log.Warn("outbox: could not release events the cold queue refused; they are claimable again when their lease expires", "count", len(ids), "error", err)
		return
	}
	p.log.Debug("outbox: cold queue full, released the rest of the claim", "count", len(ids))
}

// Close stops the polling loop and waits for it to exit (or for ctx to end).
// Events already queued are the dispatcher's to finish; close the poller
// before the dispatcher.
func (p *poller) Close(ctx context.Context) error { return p.bg.close(ctx, "poller") }
