package outbox

// maxWorkerRuns bounds the runs one worker delivers side by side (see
// deliverRuns).
const maxWorkerRuns = 16

// workerRun is a run (see ClaimRequest.Run) a worker delivers: its events,
// the next to start, and the hold of the event whose DONE it waits for.
type workerRun struct {
	items   []queued
	next    int
	pending *hold
}

// left returns the run's events not started yet.
func (r *workerRun) left() []queued { return r.items[r.next:] }

// deliverRuns delivers the run q heads, and the runs queued right behind
// it (up to maxWorkerRuns; the first other event it meets is returned as
// next, for the worker to run next), side by side in rounds: each round
// starts the next event of every run, one after the other, then writes
// their DONE updates at once (claims.flushAcksNow) — one update for the
// round, not one per event — and a run goes on to its next event only
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
	runs := []*workerRun{newWorkerRun(q)}
	for len(runs) < maxWorkerRuns {
		t, ok := d.poll()
		if !ok {
			break
		}
		if len(t.rest) == 0 {
			next, more = t, true
			break
		}
		runs = append(runs, newWorkerRun(t))
	}
	defer func() {
		for _, r := range runs { // what is left when the worker stops (also on runtime.Goexit)
			d.giveBack(r.left(), nil)
		}
	}()
	for len(runs) > 0 {
		waiting := runs[:0:0]
		for _, r := range runs {
			if d.step(to, r, runs) {
				waiting = append(waiting, r)
			}
		}
		if len(waiting) > 0 {
			d.claims.flushAcksNow()
		}
		kept := waiting[:0]
		for _, r := range waiting {
			if r.pending.done.Load() {
				kept = append(kept, r)
				continue
			}
			d.giveBack(r.left(), nil)
			r.next = len(r.items)
		}
		runs = kept
	}
	return next, more
}

func newWorkerRun(q queued) *workerRun {
	items := append([]queued{q}, q.rest...)
	items[0].rest = nil
	return &workerRun{items: items}
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
	item.inRun, item.stopRun = r.next < len(r.items), func() { stop() }
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
