package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// claims owns the life of this process's claims: every Store call that
// makes, keeps or ends a claim, and the in-process holds. A claimed row
// goes claimed (the hot path's insert, or a poller's Claim) → held
// (queued in this process) → renewed (the heartbeat) → settled (DONE in
// batches; RETRY and DEAD one by one, fenced by the owner) or released
// (given back unfinished). The code that runs listeners hands claims an
// outcome and writes nothing itself; the producer (the queues, the
// workers and the poller) asks claims and reads no state of its own about
// a claim. DEAD is decided in one place: decide.
//
// The batching of DONE updates is in acks.go; the hold table in
// inflight.go.
type claims struct {
	store Store
	owner string
	lease time.Duration
	// takeOver is the age of a claim, by this Client's clock, past which
	// it claims the row from another owner: Lease plus MaxClockSkew, as
	// the claim time was written with the owner's clock.
	takeOver    time.Duration
	maxAttempts int
	retry       RetryPolicy
	ordered     bool
	run         int           // Config.OrderedRun
	skipRecent  time.Duration // Config.SkipRecent, of continueRuns
	// continuer is the Store as a RunContinuer when it is one and runs
	// take more than one event (nil: runs end with a poller's claim).
	continuer  RunContinuer
	deadPolicy DeadPolicy
	unrouted   time.Duration // Config.UnroutedRetry (negative: DEAD at once)
	// unroutedTypes are the types whose first unrouted event was logged
	// (see reportUnrouted).
	unroutedMu    sync.Mutex
	unroutedTypes map[[2]string]struct{}
	ackBatch      int
	ackInterval   time.Duration
	log           *slog.Logger
	metrics       Metrics
	clock         Clock
	held          *holds
	// gate decides what this Client may claim and start (see gate).
	gate *gate

	acks     chan *hold         // deliveries that succeeded, for ackLoop
	flushNow chan chan struct{} // see flushAcksNow
	ackDone  chan struct{}      // closed when ackLoop returns
	// wake tells the poller that events wait in the table for its next
	// poll: the hot path refused them, or an ordered event ended and the
	// next of its key may go out.
	wake chan struct{}
	// cross wakes the other instances' pollers (nil without a Waker);
	// polls says this Client runs a poller of its own.
	cross *crossWake
	polls bool
}

// newClaims returns the claims of the owner cfg.Owner, with the settings
// of cfg (defaults applied, see Config.WithDefaults). ackRoom is how many
// acknowledgements may wait for the ack writer.
func newClaims(cfg Config, ackRoom int) *claims {
	return newClaimsOf(cfg, ackRoom, nil)
}

// newClaimsOf is newClaims of a Client that routes events by reg (nil: a
// Client that delivers nothing).
func newClaimsOf(cfg Config, ackRoom int, reg *Registry) *claims {
	c := &claims{
		store: cfg.Store, owner: cfg.Owner, lease: cfg.Lease, takeOver: cfg.Lease + cfg.MaxClockSkew, maxAttempts: cfg.MaxAttempts, retry: cfg.RetryPolicy,
		ordered: cfg.Ordered, run: cfg.OrderedRun, skipRecent: cfg.SkipRecent, deadPolicy: cfg.DeadPolicy, unrouted: cfg.UnroutedRetry, ackBatch: cfg.AckBatchSize, ackInterval: cfg.AckInterval,
		log: cfg.Logger.With("outbox_owner", cfg.Owner), metrics: cfg.Metrics, clock: cfg.Clock,
		held: newHolds(), acks: make(chan *hold, ackRoom), flushNow: make(chan chan struct{}),
		ackDone: make(chan struct{}), wake: make(chan struct{}, 1),
		gate: newGate(cfg, reg),
	}
	if rc, ok := cfg.Store.(RunContinuer); ok && cfg.OrderedRun > 1 {
		c.continuer = rc
	}
	c.held.ended = c.gate.ended
	c.gate.wake = c.wakePoller
	return c
}

// insert adds events in the caller's transaction tx at now: claimed by
// this owner when claimed is set (the hot path owns its rows; the store
// leaves delayed events unclaimed), unclaimed for any poller otherwise.
func (c *claims) insert(ctx context.Context, tx Tx, now time.Time, claimed bool, events []Envelope) error {
	owner := ""
	if claimed {
		owner = c.owner
	}
	return c.store.Insert(ctx, tx, now, owner, events)
}

// claimed is the result of one claim.
type claimed struct {
	// recs are the events to deliver (see admit).
	recs []Record
	// rows is how many rows the claim took, takenOver how many of them it
	// took over from an owner that stored no outcome (ErrClaimExpired).
	rows, takenOver int
}

// claimFilter is the type filter of a claim (see ClaimRequest.Types and
// SkipTypes), as the gate decides it.
type claimFilter struct{ types, skip []string }

// claim claims up to limit due events of the types f lets through
// (recovering expired claims when recover is set). The events that may
// not start are settled here: a row that cannot be decoded, and one taken
// over with its attempts spent (see admit).
func (c *claims) claim(ctx context.Context, now time.Time, limit int, skipRecent time.Duration, recover bool, f claimFilter) (claimed, error) {
	began := time.Now() // the claim's real duration: the monotonic clock
	req := c.request(now, limit, skipRecent, f)
	req.NoRecovery = !recover
	recs, err := c.store.Claim(ctx, req)
	if err != nil {
		return claimed{}, err
	}
	c.metrics.Claimed(time.Since(began), len(recs))
	return c.admitAll(ctx, recs), nil
}

// request is the ClaimRequest of this owner at now for up to limit events
// of the types f lets through.
func (c *claims) request(now time.Time, limit int, skipRecent time.Duration, f claimFilter) ClaimRequest {
	return ClaimRequest{
		Owner: c.owner, Now: now, Lease: c.takeOver, SkipRecent: skipRecent, Limit: limit,
		Ordered: c.ordered, DeadSkips: c.deadPolicy == DeadSkipsKey, Run: c.run, Types: f.types, SkipTypes: f.skip,
	}
}

// admitAll orders the records of a claim into runs (groupRuns) and
// admits them: an event that may not start (admit) is settled at once,
// and the events after it in its run are given back.
func (c *claims) admitAll(ctx context.Context, recs []Record) claimed {
	groupRuns(recs)
	out := claimed{rows: len(recs), recs: recs[:0]}
	var cut map[string]bool // the keys of runs cut short by an event that may not start
	var back []string       // the events after it, given back
	for _, r := range recs {
		if takenOver(r) {
			out.takenOver++
		}
		if inRun(r) && cut[r.Envelope.OrderingKey()] {
			back = append(back, r.ID)
			continue
		}
		o, ok := c.admit(r)
		if ok {
			out.recs = append(out.recs, r)
			continue
		}
		if inRun(r) {
			if cut == nil {
				cut = map[string]bool{}
			}
			cut[r.Envelope.OrderingKey()] = true
		}
		c.report(r.Envelope, r.ID, o)
		if _, err := c.mark(ctx, r.ID, o); err != nil {
			c.log.Error("outbox: could not move the event to DEAD", "event_id", r.ID, "error", err)
		} else if r.Err == nil {
			c.deadEnds(r.Envelope)
		}
	}
	if err := c.release(ctx, back); err != nil {
		c.log.Warn("outbox: could not give back the rest of a run; its events are claimable again when their lease expires", "count", len(back), "error", err)
	}
	return out
}

// continueRuns claims the events that follow tails on their keys (see
// RunContinuer), as a poller's claim takes runs, and returns those
// admitted, grouped by key. It returns nothing when the Store cannot
// continue runs, when nothing may be claimed, or when the claim fails
// (logged): the keys then go on with the next claim of a poller.
func (c *claims) continueRuns(ctx context.Context, tails []RunTail) []Record {
	if c.continuer == nil || len(tails) == 0 {
		return nil
	}
	types, skip, claimsAny := c.gate.request()
	if !claimsAny {
		return nil
	}
	began := time.Now()
	req := c.request(utcNow(c.clock), len(tails)*c.run, c.skipRecent, claimFilter{types: types, skip: skip})
	req.NoRecovery = true
	recs, err := c.continuer.ContinueRuns(ctx, req, tails)
	if err != nil {
		c.log.Warn("outbox: could not continue runs; their keys go on with the next claim", "keys", len(tails), "error", err)
		if rerr := c.release(ctx, recordIDs(recs)); rerr != nil { // what it locked before it failed
			c.log.Warn("outbox: could not give back the events of runs that could not go on; they are claimable again when their lease expires",
				"count", len(recs), "error", rerr)
		}
		return nil
	}
	c.metrics.Claimed(time.Since(began), len(recs))
	return c.admitAll(ctx, recs).recs
}

// continues reports whether runs of run events go on through
// continueRuns when they end (see RunContinuer).
func (c *claims) continues(run int) bool { return c.continuer != nil && run >= c.run }

// takenOver reports whether the claim of r was taken over from an owner
// that stored no outcome (see ErrClaimExpired, ErrInFlight): its delivery
// counts its attempt before it starts.
func takenOver(r Record) bool { return r.LastError == ErrClaimExpired.Error() || inFlight(r) }

// inFlight reports whether r is a suspect: taken over while its delivery
// was running (it started after an earlier take-over, see ErrInFlight), so
// perhaps what stopped its owner. A take-over of a row whose owner had not
// started it is no suspect. Nothing is written when a fresh event starts
// (the cost of every delivery), so the first take-over of a fresh event
// cannot tell: it is counted, not isolated; if it stops its process again,
// it is a suspect from then on.
func inFlight(r Record) bool { return r.LastError == ErrInFlight.Error() }

// admit vets a claimed record before it is queued: one that cannot be
// decoded, or one whose attempts are spent (only take-overs get there: a
// failing delivery is settled DEAD when it stores its last failure, so
// these attempts ended without an outcome — the listener kills or hangs
// its process), is not started; decide says what becomes of it.
func (c *claims) admit(r Record) (outcome, bool) {
	switch {
	case r.Err != nil:
		return c.decide(r.Attempts, false, &undecodableError{err: r.Err}, r.Subscribers), false
	case r.Envelope.Expired(utcNow(c.clock)):
		return c.decide(r.Attempts, false, expiredError(r.Envelope), r.Subscribers), false
	case c.spent(r.Attempts):
		return c.decide(r.Attempts, false, fmt.Errorf("%w (%d attempts used, the last ones without an outcome: does the listener kill or hang its process?)",
			ErrClaimExpired, r.Attempts), r.Subscribers), false
	}
	return outcome{}, true
}

// spent reports whether an event that has used attempt attempts may not
// be attempted again.
func (c *claims) spent(attempt int) bool { return attempt >= c.maxAttempts }

// verdict is how a claim ends.
type verdict uint8

const (
	settleDone    verdict = iota // DONE, batched (ackLoop)
	settleRetry                  // pending again at outcome.at
	settleDead                   // DEAD
	settleRelease                // given back unfinished: claimable at once, no attempt used
)

// outcome is what became of a claimed event: the value that delivery
// hands to claims.settle. Only decide makes a DEAD one.
type outcome struct {
	verdict verdict
	// at is when a retry is due, or when the event went DEAD.
	at time.Time
	// err is the failure recorded (nil for DONE and release).
	err error
	// delay is a retry's wait (at minus the time of the decision).
	delay time.Duration
	// attempt is the attempt that ended; count says the store counts it.
	attempt int
	count   bool
	// subscribers are the subscribers of a fan-out the event still owes.
	subscribers []string
}

// released is the outcome of a delivery cut off by Close: not the
// listener's failure.
func released() outcome { return outcome{verdict: settleRelease} }

// DefaultUnroutedRetry is how long an event that no route of a Client
// handles is left pending before that Client offers it again, unless
// Config.UnroutedRetry sets another delay. A minute: another program
// that shares the table, or the next version of this one during a rolling
// deploy, claims such an event meanwhile (a Client that takes it again
// costs the event at most that long), while a Client that routes none of
// a table's many foreign events costs the database about one update per
// event and minute.
const DefaultUnroutedRetry = time.Minute

// maxUnroutedTypes bounds the types whose first unrouted event a Client
// remembers having logged: event types come from the table, whose writers
// this Client does not control.
const maxUnroutedTypes = 1000

// decide turns the result of attempt number attempt (err: nil for
// success) into an outcome. count says the attempt is not counted yet;
// subs are the subscribers the event owes from now on. It is the one
// place where an event is sent to DEAD: it has no listener and
// UnroutedRetry is negative (by default it is due again after
// UnroutedRetry, like a RetryAfter), or it cannot be decoded, or it failed permanently (ErrPermanent)
// or with its attempts spent.
// A RetryAfter is due after its delay without using the attempt; any other
// failure is retried after the RetryPolicy's delay.
func (c *claims) decide(attempt int, count bool, err error, subs []string) outcome {
	if err == nil {
		return outcome{verdict: settleDone}
	}
	now := utcNow(c.clock)
	o := outcome{verdict: settleDead, at: now, err: err, attempt: attempt, subscribers: subs}
	var ra *RetryAfterError
	var bad *undecodableError
	switch {
	case c.unrouted > 0 && errors.Is(err, ErrUnroutable):
		o.verdict, o.at, o.delay = settleRetry, now.Add(c.unrouted), c.unrouted
	case errors.Is(err, ErrUnroutable), errors.As(err, &bad), errors.Is(err, ErrExpired):
	case errors.Is(err, ErrPermanent):
		o.count = count
	case errors.As(err, &ra):
		o.verdict, o.at, o.delay = settleRetry, now.Add(ra.Delay), ra.Delay
	case c.spent(attempt):
		o.count = count
	default:
		o.delay = c.retry.Delay(attempt)
		o.verdict, o.at, o.count = settleRetry, now.Add(o.delay), count
	}
	return o
}

// expiredError is the failure recorded for e, which expired before its
// delivery.
func expiredError(e Envelope) error {
	return fmt.Errorf("%w (expired at %s)", ErrExpired, e.ExpiresAt().Format(time.RFC3339Nano))
}

// undecodableError is the failure of a stored row that cannot be decoded
// into an Envelope.
type undecodableError struct{ err error }

func (e *undecodableError) Error() string { return "decode: " + e.err.Error() }
func (e *undecodableError) Unwrap() error { return e.err }

// settle stores the outcome o of the delivery of e, held by hd. DONE joins
// the next acknowledgement batch (the hold is let go once it is written);
// any other outcome lets go of the hold first (once the outcome is stored,
// a claim may hand the event, pending again, right back to this process,
// and it must be taken then, not turned away as still held) and is
// written at once, fenced, retrying database errors. It runs even while
// stopping hard (ctx only lends its values), so that an outcome already
// decided is not thrown away.
func (c *claims) settle(ctx context.Context, hd *hold, e Envelope, o outcome) {
	c.gate.observe(e, o)
	if o.verdict == settleDone {
		c.metrics.Delivered(labelsOf(e))
		c.acks <- hd
		return
	}
	c.held.release(hd)
	c.report(e, e.ID(), o)
	var changed bool
	err := storeRetry(ctx, func(ctx context.Context) (err error) {
		changed, err = c.mark(ctx, e.ID(), o)
		return err
	})
	switch {
	case err != nil:
		c.log.Error("outbox: could not record delivery outcome; the event will be delivered again", eventAttrs(e), "outcome", o.verdict.String(), "error", err)
	case !changed:
		c.metrics.StaleUpdates(1)
		c.log.Warn("outbox: claim was taken over, outcome not recorded", eventAttrs(e), "outcome", o.verdict.String())
	}
	if o.verdict == settleDead {
		c.deadEnds(e)
	}
	if e.Ordered() {
		// Its key waits for it again (a retry is due later), or goes on: a
		// poll sees which, and claims the next head of its key if it may.
		c.wakePoller()
	}
}

// mark writes the fenced RETRY, DEAD or release of event id.
func (c *claims) mark(ctx context.Context, id string, o outcome) (bool, error) {
	var text string
	if o.err != nil {
		text = storedError(o.err.Error())
	}
	switch o.verdict {
	case settleRetry:
		return c.store.MarkRetry(ctx, Outcome{Owner: c.owner, ID: id, At: o.at, Error: text, CountAttempt: o.count, Subscribers: o.subscribers})
	case settleDead:
		return c.store.MarkDead(ctx, Outcome{Owner: c.owner, ID: id, At: o.at, Error: text, CountAttempt: o.count, Subscribers: o.subscribers})
	case settleRelease:
		n, err := c.store.Release(ctx, c.owner, []string{id})
		return n > 0, err
	}
	return false, fmt.Errorf("outbox: no store update for outcome %s", o.verdict)
}

// storedError makes the text of a delivery's error storable on every
// database, which is the only place it is made: a listener's error is
// whatever its downstream said, and PostgreSQL refuses NUL characters,
// MySQL and MariaDB invalid UTF-8 — a refused update would lose the error
// and cost the event a lease. Invalid UTF-8 becomes U+FFFD, control
// characters other than newline and tab are written as Go escapes
// (\x00, \u0085), and the text is cut to MaxErrorLen characters.
func storedError(s string) string {
	if !utf8.ValidString(s) || strings.IndexFunc(s, isEscaped) >= 0 {
		var b strings.Builder
		for _, r := range strings.ToValidUTF8(s, string(utf8.RuneError)) {
			switch {
			case !isEscaped(r):
				b.WriteRune(r)
			case r < utf8.RuneSelf:
				fmt.Fprintf(&b, `\x%02x`, r)
			default:
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		}
		s = b.String()
	}
	return TruncateError(s)
}

// isEscaped reports whether storedError escapes r: a control character
// other than newline and tab.
func isEscaped(r rune) bool { return r != '\n' && r != '\t' && unicode.IsControl(r) }

// report counts and logs the outcome o of event e (id: the event id, for
// a row that cannot be decoded and has no Envelope).
func (c *claims) report(e Envelope, id string, o outcome) {
	var ra *RetryAfterError
	var bad *undecodableError
	switch {
	case o.verdict == settleRelease:
	case o.verdict == settleRetry && errors.As(o.err, &ra):
		c.log.Debug("outbox: listener asked for a retry", eventAttrs(e), "delay", ra.Delay)
	case o.verdict == settleRetry && errors.Is(o.err, ErrUnroutable):
		c.reportUnrouted(e, o.delay)
	case o.verdict == settleRetry:
		c.metrics.Failed(labelsOf(e))
		c.log.Warn("outbox: delivery failed, will retry", eventAttrs(e), "attempts", o.attempt, "retry_in", o.delay, "error", o.err)
	case errors.As(o.err, &bad):
		c.metrics.Dead(EventLabels{}) // its type cannot be read
		c.log.Error("outbox: stored event cannot be decoded, moved to DEAD", "event_id", id, "error", bad.err)
	case errors.Is(o.err, ErrExpired):
		c.metrics.Dead(labelsOf(e))
		c.metrics.Expired(labelsOf(e))
		c.log.Debug("outbox: event expired before delivery, moved to DEAD", eventAttrs(e), "expires_at", e.ExpiresAt())
	case errors.Is(o.err, ErrUnroutable):
		c.metrics.Dead(labelsOf(e))
		c.log.Error("outbox: event has no listener, moved to DEAD", eventAttrs(e), "aggregate_type", e.AggregateType())
	case errors.Is(o.err, ErrPermanent):
		c.metrics.Dead(labelsOf(e))
		c.log.Error("outbox: listener reported a permanent failure, moved to DEAD", eventAttrs(e), "attempts", o.attempt, "error", o.err)
	case errors.Is(o.err, ErrClaimExpired):
		c.metrics.Dead(labelsOf(e))
		c.log.Error("outbox: deliveries ended without an outcome too often, moved to DEAD", eventAttrs(e), "attempts", o.attempt)
	default:
		c.metrics.Dead(labelsOf(e))
		c.log.Error("outbox: event failed its last attempt, moved to DEAD", eventAttrs(e), "attempts", o.attempt, "error", o.err)
	}
}

// reportUnrouted logs an event that no route of this Client handles,
// left pending for delay: as a warning for the first event of its type
// (aggregate type and event type), at debug level after that, so that a
// table shared with another program does not fill the log.
func (c *claims) reportUnrouted(e Envelope, delay time.Duration) {
	key := [2]string{e.AggregateType(), e.Type()}
	c.unroutedMu.Lock()
	_, seen := c.unroutedTypes[key]
	first := !seen && len(c.unroutedTypes) < maxUnroutedTypes
	if first {
		if c.unroutedTypes == nil {
			c.unroutedTypes = make(map[[2]string]struct{})
		}
		c.unroutedTypes[key] = struct{}{}
	}
	c.unroutedMu.Unlock()
	if first {
		c.log.Warn("outbox: this client has no listener for an event type; its events are left pending for another program and offered again later (logged once per type)",
			"event_type", e.Type(), "aggregate_type", e.AggregateType(), "retry_in", delay)
		return
	}
	c.log.Debug("outbox: event has no listener, left pending for another program", eventAttrs(e),
		"aggregate_type", e.AggregateType(), "retry_in", delay)
}

// String returns the verdict's name in logs.
func (v verdict) String() string {
	switch v {
	case settleDone:
		return "done"
	case settleRetry:
		return "retry"
	case settleDead:
		return "dead"
	}
	return "release"
}

// deadEnds reports an ordered event that went DEAD: under DeadBlocksKey
// the later events of its key wait for it from now on.
func (c *claims) deadEnds(e Envelope) {
	if !e.Ordered() || c.deadPolicy != DeadBlocksKey {
		return
	}
	c.metrics.KeyBlocked()
	c.log.Error("outbox: ordering key blocked by a DEAD event: its later events wait until it is replayed or skipped (Client.Dead)",
		"ordering_key", e.OrderingKey(), eventAttrs(e))
}

// markDone writes one batch of DONE updates, retrying database errors
// (storeRetry), and lets go of the batch's holds. If it still fails the
// rows stay claimed by this owner and are delivered again.
func (c *claims) markDone(batch []*hold) {
	defer func() {
		for _, hd := range batch {
			c.held.release(hd)
		}
	}()
	ids := holdIDs(batch)
	c.metrics.AckBatch(len(ids))
	var n int64
	err := storeRetry(context.Background(), func(ctx context.Context) (err error) {
		n, err = c.store.MarkDone(ctx, c.owner, ids, utcNow(c.clock))
		return err
	})
	if err != nil {
		c.log.Error("outbox: could not mark events DONE; they will be delivered again", "count", len(ids), "error", err)
		return
	}
	if stale := len(ids) - int(n); stale > 0 {
		c.metrics.StaleUpdates(stale)
		c.log.Warn("outbox: some DONE updates found their claim taken over", "stale", stale, "batch", len(ids))
		c.doneAnyway(batch)
	} else {
		for _, hd := range batch {
			hd.done.Store(true)
		}
	}
	for _, hd := range batch {
		if hd.ordered && !hd.midRun { // the next event of its key may go out now
			c.wakePoller()
			break
		}
	}
}

// doneAnyway sorts out a DONE update that changed fewer rows than it had
// ids (some claims were taken over), for the events of runs that wait for
// it (hold.midRun; see deliverRuns): the count does not say which, so they
// are read again, in one List, and a run goes on if its event is DONE — whoever stored it,
// the next event of its key may start (the guarantee asks that it be
// DONE); any other answer stops the run. The holds of the other events
// are left as they are.
func (c *claims) doneAnyway(batch []*hold) {
	ctx, cancel := context.WithTimeout(context.Background(), c.lease)
	defer cancel()
	var waiting []*hold
	for _, hd := range batch {
		if hd.midRun {
			waiting = append(waiting, hd)
		}
	}
	if len(waiting) == 0 {
		return
	}
	recs, err := c.store.List(ctx, Query{IDs: holdIDs(waiting), Statuses: []Status{StatusDone}, Limit: len(waiting)})
	if err != nil {
		return
	}
	done := make(map[string]bool, len(recs))
	for _, r := range recs {
		done[r.ID] = true
	}
	for _, hd := range waiting {
		if done[hd.id] {
			hd.done.Store(true)
		}
	}
}

// hold holds e, claimed at claimed, for delivery in this process, as one
// of mates (nil: none, see claimMates). It returns nil while e is held
// already (see holds.acquire).
func (c *claims) hold(e Envelope, claimed time.Time, mates *claimMates) *hold {
	var typ string
	if c.gate.held(e.Type()) {
		typ = e.Type()
	}
	hd, ok := c.held.acquire(e.ID(), typ, claimed, utcNow(c.clock), mates)
	if !ok {
		if typ != "" {
			c.gate.ended(typ)
		}
		return nil
	}
	hd.ordered = e.Ordered()
	return hd
}

// giveBack releases the claim of e, held by hd, unstarted: the gate holds
// its type back (a pause, an open breaker). No attempt is used.
func (c *claims) giveBack(ctx context.Context, hd *hold, e Envelope) {
	c.log.Debug("outbox: event held back (paused, or its circuit breaker is open), given back unstarted", eventAttrs(e))
	c.settle(ctx, hd, e, released())
}

// letGo forgets hd: the queue refused its event, and its row stays
// claimed until the caller releases it or its lease expires.
// It reports whether hd was still held (not taken over here since).
func (c *claims) letGo(hd *hold) bool { return c.held.release(hd) }

// settleStep stores the outcome o of the delivery of e, held by hd, an
// event of a run with more after it, and reports whether it was DONE: its
// DONE then joins the acknowledgements, and the run goes on once they are
// written (flushAcksNow) and hd.done says it is stored, its claim still
// this owner's — the next event of its key may start only then. Any other
// outcome stops the run: stop gives back the rest of it first, then the
// outcome is settled as usual.
func (c *claims) settleStep(ctx context.Context, hd *hold, e Envelope, o outcome, stop func()) bool {
	if o.verdict == settleDone {
		hd.midRun = true // its key goes on here: no need to wake the poller
	} else {
		stop()
	}
	c.settle(ctx, hd, e, o)
	return o.verdict == settleDone
}

// delivering records that hd's listener starts; its claim is renewed
// until deadline.
func (c *claims) delivering(hd *hold, deadline time.Time) { c.held.start(hd, deadline) }

// expired reports (and lets go of) an event whose claim was last renewed
// more than a lease ago (the heartbeat failed): another instance may have
// claimed and delivered it by now. It is left to whoever claims it next
// (possibly this process's own poller) instead of being delivered twice.
func (c *claims) expired(hd *hold, e Envelope) bool {
	age := utcNow(c.clock).Sub(c.held.lastRenewed(hd))
	if age < c.lease {
		return false
	}
	c.held.release(hd)
	c.log.Info("outbox: claim expired while queued, leaving the event to a new claim", eventAttrs(e), "unrenewed_for", age)
	return true
}

// countAttempt counts the attempt of e, held by hd, before a delivery
// that may never end (one taken over from an owner that stored no
// outcome). The acknowledgements of what ran before are written first:
// if this delivery kills the process, the events delivered before it are
// not delivered again. It reports whether the delivery may start; if not,
// the hold is let go.
func (c *claims) countAttempt(ctx context.Context, hd *hold, e Envelope) bool {
	c.flushAcksNow()
	var ok bool
	err := storeRetry(ctx, func(ctx context.Context) (err error) {
		ok, err = c.store.CountAttempt(ctx, c.owner, e.ID())
		return err
	})
	switch {
	case err != nil:
		c.held.release(hd)
		c.log.Error("outbox: could not count the attempt of a taken-over event; not starting it", eventAttrs(e), "error", err)
		return false
	case !ok:
		c.held.release(hd)
		c.metrics.StaleUpdates(1)
		c.log.Warn("outbox: claim was taken over before delivery, not starting it", eventAttrs(e))
		return false
	}
	return true
}

// heartbeat renews the claims of the held events every Lease/3 until
// stop is closed or ctx ends.
func (c *claims) heartbeat(ctx context.Context, stop <-chan struct{}) {
	every := c.lease / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.renew(ctx, every)
		case <-stop:
			return
		case <-ctx.Done():
			return
		}
	}
}

// renew renews, in one batched update bounded by timeout, the claims of
// the held events that are queued or delivering within their
// ListenerTimeout.
func (c *claims) renew(ctx context.Context, timeout time.Duration) {
	now := utcNow(c.clock)
	hs := c.held.renewable(now)
	if len(hs) == 0 {
		return
	}
	ids := holdIDs(hs)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	n, err := c.store.Renew(ctx, c.owner, ids, now)
	if err != nil {
		c.log.Warn("outbox: could not renew claims; they are taken over if this lasts a lease", "count", len(ids), "error", err)
		return
	}
	if n < int64(len(ids)) {
		hs = c.stillOwned(ctx, hs, now)
	}
	c.held.renewedAt(hs, now)
	c.metrics.Renewed(len(ids), n)
	c.log.Debug("outbox: claims renewed", "held", len(ids), "renewed", n)
}

// stillOwned returns those of hs that a renewal at now that changed fewer
// rows than it was given may count as renewed: the holds of deliveries
// that started (their rows may have ended meanwhile: DONE is written
// while the hold is kept), and the queued ones whose rows are still this
// owner's. The others — their claims lapsed and were taken over elsewhere
// — keep their last renewal time, so that such an event is let go at its
// start (claims.expired) instead of delivered beside its new owner. The
// renewal time of a queued hold is what decides whether it starts; a
// queued row ends only through this process (which lets go of its hold
// first) or an operator. So the queued rows are renewed again, alone, and
// read (Store.List) only if some of them are not this owner's; if they
// cannot be read, no queued hold counts as renewed.
func (c *claims) stillOwned(ctx context.Context, hs []*hold, now time.Time) []*hold {
	queued := c.held.queued(hs)
	if len(queued) == 0 {
		return hs
	}
	ids := holdIDs(queued)
	if n, err := c.store.Renew(ctx, c.owner, ids, now); err == nil && n == int64(len(ids)) {
		return hs
	}
	recs, err := c.store.List(ctx, Query{IDs: ids, Statuses: []Status{StatusNew, StatusRetry}, Limit: len(ids)})
	if err != nil {
		c.log.Warn("outbox: could not read which claims were renewed; queued events count as not renewed", "count", len(ids), "error", err)
	}
	mine := make(map[string]bool, len(recs))
	for _, r := range recs {
		if r.LockedBy == c.owner {
			mine[r.ID] = true
		}
	}
	waiting := make(map[*hold]bool, len(queued))
	for _, hd := range queued {
		waiting[hd] = true
	}
	out := hs[:0:0]
	for _, hd := range hs {
		if mine[hd.id] || !waiting[hd] {
			out = append(out, hd)
		}
	}
	return out
}

// release drops this owner's claim on the events ids, which were never
// delivered here (their holds, if any, are let go already), so that any
// poller can claim them at once instead of waiting for the lease. ctx
// lends its values; the update is bounded by releaseTimeoutOnStop even
// when ctx has ended.
func (c *claims) release(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeoutOnStop)
	defer cancel()
	_, err := c.store.Release(ctx, c.owner, ids)
	return err
}

// wakeups is where the poller hears wakePoller.
func (c *claims) wakeups() <-chan struct{} { return c.wake }

// wakePoller asks the poller to poll soon: events wait in the table for
// it. A Client without a poller of its own asks the other instances'.
func (c *claims) wakePoller() {
	if !c.polls {
		c.cross.send()
		return
	}
	c.wakeOwn()
}

// wakeAll asks this Client's poller and the other instances' to poll
// soon: events wait in the table that any of them may take (this
// Client's hot path refused them, or an operator made them claimable).
func (c *claims) wakeAll() {
	c.cross.send()
	if c.polls {
		c.wakeOwn()
	}
}

// wakeOwn asks this Client's poller to poll soon.
func (c *claims) wakeOwn() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Outcome writes ride out short database outages (a failover, a cut
// connection): a few attempts with growing pauses, about 1.5s in all.
const (
	storeAttempts   = 5
	storeFirstPause = 50 * time.Millisecond
)

// storeRetry runs op until it succeeds, storeAttempts times at most, each
// attempt bounded by releaseTimeoutOnStop. It keeps going after ctx is
// cancelled: an outcome already decided should be stored.
func storeRetry(ctx context.Context, op func(context.Context) error) error {
	ctx = context.WithoutCancel(ctx)
	var err error
	pause := storeFirstPause
	for attempt := range storeAttempts {
		if attempt > 0 {
			time.Sleep(pause)
			pause *= 2
		}
		actx, cancel := context.WithTimeout(ctx, releaseTimeoutOnStop)
		err = op(actx)
		cancel()
		if err == nil {
			return nil
		}
	}
	return err
}
