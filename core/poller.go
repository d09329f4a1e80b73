package outbox

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// poller defaults (the reference specification's values).
const (
	DefaultPollInterval   = 5 * time.Second
	DefaultPollBatchSize  = 50
	DefaultMaxPollBackoff = time.Minute
	// ownReclaimAfter is how soon a poller takes back rows its own
	// dispatcher claimed but does not hold, such as hot-path events the full
	// hot queue refused (at most the poll interval).
	ownReclaimAfter = time.Second
	// maxClaimGrowth bounds a claim at this many times BatchSize.
	maxClaimGrowth = 8
	// pollBusyWait is how soon the loop polls again when the cold queue has
	// no room for a full batch: its workers free room within an ack window.
	pollBusyWait = 5 * time.Millisecond
)

// pollerConfig configures a poller. Zero values take the documented
// defaults. The store, lease, clock, logger and metrics are the dispatcher's.
type pollerConfig struct {
	// Dispatcher receives the claimed events on its cold queue and lends
	// the poller its owner id, store and lease (required).
	Dispatcher *Dispatcher
	// Interval between polls when there is nothing to do (default 5s).
	Interval time.Duration
	// BatchSize is the smallest claim (default 50): the poller waits for
	// that much room in the cold queue, then claims as much as there is
	// room for, up to 8 times BatchSize.
	BatchSize int
	// SkipRecent leaves events younger than this to the hot path (default 0).
	SkipRecent time.Duration
	// MaxBackoff caps the wait between polls after database errors (default 1m).
	MaxBackoff time.Duration
}

// poller claims due events that the hot path did not deliver — delayed
// events, retries, events refused by a full queue, events of crashed
// instances — and feeds them to the dispatcher's cold queue. Any number of
// pollers can run on one table: claims are exclusive, with an owner and a
// lease. A full batch triggers another poll at once; an idle poll waits
// Interval; database errors back off exponentially up to MaxBackoff.
type poller struct {
	cfg        pollerConfig
	d          *Dispatcher
	ownReclaim time.Duration

	bg background
}

// newPoller validates cfg and returns a poller; call Start to run it.
func newPoller(cfg pollerConfig) (*poller, error) {
	if cfg.Dispatcher == nil {
		return nil, configErr("poller needs a Dispatcher")
	}
	if cfg.Interval < 0 || cfg.BatchSize < 0 || cfg.SkipRecent < 0 || cfg.MaxBackoff < 0 {
		return nil, configErr("poller settings must not be negative")
	}
	setDefault(&cfg.Interval, DefaultPollInterval)
	setDefault(&cfg.BatchSize, DefaultPollBatchSize)
	setDefault(&cfg.MaxBackoff, DefaultMaxPollBackoff)
	return &poller{cfg: cfg, d: cfg.Dispatcher, ownReclaim: min(ownReclaimAfter, cfg.Interval)}, nil
}

// Start runs the polling loop in a goroutine until Close. The first poll
// happens at once.
func (p *poller) Start(ctx context.Context) error { return p.bg.start(ctx, "poller", p.loop) }

func (p *poller) loop(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	next := time.Now()    // when the timer fires
	var dropDue time.Time // by when refused hot-path rows must be polled
	backoff := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.d.dropped:
			// Refused hot-path rows become claimable after OwnReclaimAfter.
			dropDue = time.Now().Add(p.ownReclaim)
			if dropDue.Before(next) {
				next = dropDue
				timer.Reset(time.Until(next))
			}
			continue
		case <-timer.C:
		}
		started := time.Now()
		_, more, busy, err := p.poll(ctx)
		wait := p.cfg.Interval
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			backoff = min(max(2*backoff, time.Second), p.cfg.MaxBackoff)
			wait = backoff
			p.d.log.Error("outbox: poll failed, backing off", "error", err, "retry_in", wait)
		case more:
			backoff, wait = 0, 0
		case busy:
			backoff, wait = 0, min(wait, pollBusyWait)
		default:
			backoff = 0
		}
		next = time.Now().Add(wait)
		if dropDue.After(started) && dropDue.Before(next) {
			next = dropDue // rows refused during this poll were not claimable yet
		}
		timer.Reset(time.Until(next))
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
	d := p.d
	hot, cold := d.queueDepths()
	d.metrics.QueueDepths(hot, cold)
	limit := min(p.cfg.BatchSize, cap(d.cold))
	room := d.coldCapacity()
	if room < limit { // always so while the dispatcher is not running
		// Leave the rows in the table. While the queue holds events, the
		// workers are about to free room.
		return 0, false, cold > 0, nil
	}
	// A backlog is claimed in claims as large as the queue has room for,
	// up to maxClaimGrowth batches: fewer, larger claims drain it faster.
	limit = min(room, p.cfg.BatchSize*maxClaimGrowth)
	now := utcNow(d.clock)
	d.finished.rotate()
	recs, err := d.cfg.Store.Claim(ctx, ClaimRequest{
		Owner: d.owner, Now: now, Lease: d.cfg.Lease, OwnReclaimAfter: p.ownReclaim,
		SkipRecent: p.cfg.SkipRecent, Limit: limit,
	})
	if err != nil {
		return 0, false, false, fmt.Errorf("outbox: claim: %w", err)
	}
	if len(recs) == 0 {
		return 0, false, false, nil
	}
	// Events taken over from an owner whose delivery ended without an
	// outcome go last: their batch-mates are delivered (and acknowledged)
	// before a delivery that may kill the process starts.
	slices.SortStableFunc(recs, func(a, b Record) int {
		switch ta, tb := takenOver(a), takenOver(b); {
		case ta == tb:
			return 0
		case ta:
			return 1
		}
		return -1
	})
	oldest := recs[0].CreatedAt
	for i, r := range recs {
		if r.CreatedAt.Before(oldest) {
			oldest = r.CreatedAt
		}
		if r.Err != nil {
			d.log.Error("outbox: stored event cannot be decoded, moved to DEAD", "event_id", r.ID, "error", r.Err)
			d.metrics.DispatchDead()
			if _, err := d.cfg.Store.MarkDead(ctx, Outcome{Owner: d.owner, ID: r.ID, At: now, Error: TruncateError("decode: " + r.Err.Error())}); err != nil {
				d.log.Error("outbox: could not move undecodable event to DEAD", "event_id", r.ID, "error", err)
			}
			continue
		}
		if r.Attempts >= d.cfg.MaxAttempts {
			// Only take-overs reach this here (a failing delivery goes to
			// DEAD when it stores its last failure): attempts of taken-over
			// deliveries that stored no outcome either. The listener kills
			// or hangs its process; do not start it again.
			d.metrics.DispatchDead()
			d.log.Error("outbox: deliveries ended without an outcome too often, moved to DEAD", "event_id", r.ID, "event_type", r.Envelope.Type(), "attempts", r.Attempts)
			msg := fmt.Sprintf("%s (%d attempts used, the last ones without an outcome: does the listener kill or hang its process?)", ErrClaimExpired, r.Attempts)
			if _, err := d.cfg.Store.MarkDead(ctx, Outcome{Owner: d.owner, ID: r.ID, At: now, Error: msg}); err != nil {
				d.log.Error("outbox: could not move the event to DEAD", "event_id", r.ID, "error", err)
			}
			continue
		}
		if !d.enqueueCold(r) {
			// Full or closing: the rest stay claimed by us and are taken back
			// after OwnReclaimAfter, or by others when the lease expires.
			d.log.Debug("outbox: cold queue full, leaving the rest of the batch", "left", len(recs)-i)
			return queued, false, false, nil
		}
		queued++
	}
	d.metrics.OldestLag(now.Sub(oldest))
	return queued, len(recs) == limit && queued > 0, false, nil
}

// Close stops the polling loop and waits for it to exit (or for ctx to end).
// Events already queued are the dispatcher's to finish; close the poller
// before the dispatcher.
func (p *poller) Close(ctx context.Context) error { return p.bg.close(ctx, "poller") }
