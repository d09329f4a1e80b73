package outbox

// maxWorkerRuns bounds the runs one worker delivers side by side (see
// deliverRuns).
const maxWorkerRuns = 16

// workerRun is a run (see ClaimRequest.Run) a worker delivers: its events,
// the next to start, and the hold of the event whose DONE it waits for.
// more says that its last events came as a full run: the events after
// them are asked for as the last one ends (see RunContinuer).
type workerRun struct {
	items   []queued
	next    int
	pending *hold
	more    bool
}

// left returns the run's events not started yet.
func (r *workerRun) left() []queued { return r.items[r.next:] }

// deliverRuns delivers the run q heads, and the runs queued behind it,
// side by side in rounds: each round first takes the runs queued since
// (up to maxWorkerRuns in all; the first other event it meets is returned
// as next, for the worker to run once its runs have ended, and no run is
// taken after it), then starts the next event of every run, one after the
// other, then writes their DONE updates at once (claims.flushAcksNow,
// which the other workers' rounds join) — one update for the round, not
// one per event — and a run goes on to its next event only
// once its event's DONE is stored (claims.settleStep), so that no event
// starts before the one before it on its key is DONE. At the first event
// of a run that does not end so — a failure, a retry, DEAD, a claim that
// lapsed or was taken over, an event held back or expired, Close — the
// run's later events are given back unstarted (no attempt used, no error
// recorded): their key waits as it would for a single event. The claims
// of the runs' later events are renewed as long as the worker's current
// delivery is within its deadline: if a listener hangs, the runs' claims
// lapse together, and take-overs recover them in order.
func (d *dispatcher) deliverRuns(to *timeouts, q queued) (next queued, more bool) {
	runs := []*workerRun{d.newWorkerRun(q)}
	defer func() {
		for _, r := range runs { // what is left when the worker stops (also on runtime.Goexit)
			d.giveBack(r.left(), nil)
		}
	}()
	for len(runs) > 0 {
		for !more && len(runs) < maxWorkerRuns {
			t, ok := d.poll()
			if !ok {
				break
			}
			if len(t.rest) == 0 {
				next, more = t, true
				break
			}
			runs = append(runs, d.newWorkerRun(t))
		}
		waiting := runs[:0:0]
		for _, r := range runs {
			if d.step(to, r, runs) {
				waiting = append(waiting, r)
			}
		}
		if len(waiting) > 0 {
			d.endRound(waiting, !more)
		}
		kept, ended := waiting[:0], false
		for _, r := range waiting {
			switch {
			case !r.pending.done.Load():
				d.giveBack(r.left(), nil)
				r.next = len(r.items)
			case len(r.left()) == 0: // nothing followed it: its key goes on with a poller's claim
				ended = true
			default:
				kept = append(kept, r)
			}
		}
		if ended {
			d.claims.wakePoller()
		}
		runs = kept
	}
	return next, more
}

func (d *dispatcher) newWorkerRun(q queued) *workerRun {
	items := append([]queued{q}, q.rest...)
	items[0].rest = nil
	return &workerRun{items: items, more: d.claims.continues(len(items))}
}

// endRound waits for the DONE updates of a round (claims.flushAcksNow),
// and meanwhile, when cont says so, asks for the events that follow the
// runs whose last event the round started (claims.continueRuns): a run
// goes on with them once that event is DONE; if it is not, they are given
// back. A worker that holds an event to run after its runs does not
// continue them: its runs end within OrderedRun events, and that event
// waits no longer.
func (d *dispatcher) endRound(waiting []*workerRun, cont bool) {
	var tails []RunTail
	var ending []*workerRun
	for _, r := range waiting {
		if r.more && len(r.left()) == 0 {
			last := r.items[len(r.items)-1]
			tails = append(tails, RunTail{Key: last.env.OrderingKey(), Seq: last.seq})
			ending = append(ending, r)
		}
	}
	if len(tails) == 0 || !cont || isClosed(d.stopping) {
		d.claims.flushAcksNow()
		return
	}
	got := make(chan []Record, 1)
	go func() { got <- d.claims.continueRuns(d.runCtx, tails) }()
	d.claims.flushAcksNow()
	byKey := map[string][]Record{}
	for _, rec := range <-got {
		k := rec.Envelope.OrderingKey()
		byKey[k] = append(byKey[k], rec)
	}
	for i, r := range ending {
		recs := byKey[tails[i].Key]
		delete(byKey, tails[i].Key)
		r.more = false
		if len(recs) == 0 {
			continue
		}
		if !r.pending.done.Load() {
			d.giveBack(nil, recordIDs(recs))
			continue
		}
		rest, back := d.holdRun(recs, nil)
		d.giveBack(nil, back)
		for _, t := range rest {
			d.metrics.EventEnqueued(labelsOf(t.env), PathCold)
		}
		r.items = append(r.items, rest...)
		r.more = len(back) == 0 && d.claims.continues(len(recs))
	}
	for _, recs := range byKey { // none: each key is a tail's
		d.giveBack(nil, recordIDs(recs))
	}
}

// recordIDs returns the ids of recs.
func recordIDs(recs []Record) []string {
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	return ids
}

// step starts the next event of r (runs are the worker's runs, whose later
// events' claims it renews until the event's deadline) and reports
// whether r goes on once the event's DONE, queued, is stored. A run that
// stops gives back what is left of it.
func (d *dispatcher) step(to *timeouts, r *workerRun, runs []*workerRun) bool {
	item := r.items[r.next]
	if r.next > 0 && isClosed(d.stopping) { // Close: the rest is given back
		d.giveBack(r.left(), nil)
		r.next = len(r.items)
		return false
	}
	r.next++
	stop := func() bool {
		d.giveBack(r.left(), nil)
		r.next = len(r.items)
		return false
	}
	if d.expired(item) || d.outlived(item) || d.heldBack(item) {
		return stop()
	}
	if item.suspect { // taken over from an owner that stored no outcome
		if !d.claims.countAttempt(d.runCtx, item.hold, item.env) {
			return stop()
		}
		item.attempts, item.charged = item.attempts+1, true
	}
	item.inRun, item.stopRun = r.next < len(r.items) || r.more, func() { stop() }
	deadline := utcNow(d.clock).Add(d.cfg.ListenerTimeout)
	for _, o := range runs {
		for _, t := range o.left() {
			d.claims.delivering(t.hold, deadline)
		}
	}
	if !d.deliver(to, item, d.route(item.env)) {
		return stop() // not DONE, or the last of its run
	}
	r.pending = item.hold
	return true
}
