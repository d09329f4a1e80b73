package outbox

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"
)

// delivery is one event's delivery from the moment its listener is
// about to start until its outcome is recorded.
type delivery struct {
	q queued
	// attempt is this delivery's number; a charged suspect's is counted
	// already (deliverSuspect), any other's is counted if it fails.
	attempt int
	count   bool
	started time.Time // the monotonic clock, for ListenerDuration
}

// begin starts q's delivery, which must end in its deadline: past it the
// claim is no longer renewed, so that a listener that ignores its context
// and hangs loses the event to a take-over.
func (d *dispatcher) begin(q queued, deadline time.Time) delivery {
	dl := delivery{q: q, attempt: q.attempts + 1, count: true}
	if q.charged {
		dl.attempt, dl.count = q.attempts, false
	}
	d.claims.delivering(q.hold, deadline)
	if !q.created.IsZero() {
		d.metrics.CommitToDelivery(labelsOf(q.env), utcNow(d.clock).Sub(q.created))
	}
	dl.started = time.Now()
	return dl
}

// context returns the context the delivery's interceptors and listener
// see: ctx with the delivery's attempt (DeliveryAttempt).
func (dl delivery) context(ctx context.Context) context.Context {
	return context.WithValue(ctx, attemptKey{}, dl.attempt)
}

// deliver runs one event through interceptors and its listener l (nil:
// unroutable) in a context of to, and records the outcome. For an event of
// a run with more after it (q.inRun), it reports whether its DONE was
// queued: the run goes on once that is stored (see deliverRuns).
func (d *dispatcher) deliver(to *timeouts, q queued, l Listener) (goOn bool) {
	dl := d.begin(q, utcNow(d.clock).Add(d.cfg.ListenerTimeout))
	ctx := to.start(dl.attempt)
	ended := false
	defer func() {
		if !ended { // runtime.Goexit: this goroutine ends, the outcome is stored first
			to.end(ctx)
			d.settle(to.ctx, dl, ErrGoexit)
		}
	}()
	// A listener that returns an error after its timeout failed (its
	// error wraps context.DeadlineExceeded); one that succeeds late did its
	// work, and a stale ack is fenced off anyway.
	var err error
	if len(d.cfg.Interceptors) == 0 {
		err = d.call(ctx, &q, l)
	} else {
		err = d.dispatch(ctx, q.env, d.handler(q, l))
	}
	to.end(ctx)
	ended = true
	return d.settle(to.ctx, dl, err)
}

// call is dispatch without interceptors: it runs q's listener l (nil: no
// listener routes it), turning panics into errors, with no closure that
// outlives the call (nothing of the delivery is allocated for it).
func (d *dispatcher) call(ctx context.Context, q *queued, l Listener) error {
	return guard(func() error { return d.invoke(ctx, q, l) })
}

// handler returns the call of q's listener l for dispatch (nil: no
// listener routes q).
func (d *dispatcher) handler(q queued, l Listener) func(context.Context) error {
	if l == nil {
		return nil
	}
	return func(ctx context.Context) error { return d.invoke(ctx, &q, l) }
}

// invoke runs q's listener l: the subscribers a fan-out owes, each
// counted, or the listener itself.
func (d *dispatcher) invoke(ctx context.Context, q *queued, l Listener) error {
	switch l := l.(type) {
	case nil:
		return unroutable(q.env)
	case *fanOut:
		return d.runFanOut(ctx, *q, l)
	default:
		return l.Handle(ctx, q.env)
	}
}

// runFanOut runs the subscribers of l that q owes, each counted. It takes
// a copy of q: the counting closure would move invoke's q to the heap.
func (d *dispatcher) runFanOut(ctx context.Context, q queued, l *fanOut) error {
	return l.run(ctx, q.env, q.subscribers, func(name string, err error) {
		d.metrics.SubscriberRun(labelsOf(q.env), name, err == nil)
	})
}

// unroutable is the error of an event that no listener routes.
func unroutable(e Envelope) error {
	return fmt.Errorf("%w: (%s, %s)", ErrUnroutable, e.AggregateType(), e.Type())
}

// settle hands the outcome of a delivery whose dispatch returned err to
// claims, which stores it. ctx is the worker's: cancelled, Close cut the
// delivery off, and the row is given back (not the listener's failure).
// For an event of a run with more after it, it reports whether its DONE
// was queued (see claims.settleStep).
func (d *dispatcher) settle(ctx context.Context, dl delivery, err error) bool {
	q := dl.q
	took := time.Since(dl.started)
	o := d.outcome(ctx, dl, err)
	d.metrics.ListenerDuration(labelsOf(q.env), took)
	d.metrics.DeliveryDuration(labelsOf(q.env), o.verdict.String(), took)
	if q.inRun {
		return d.claims.settleStep(ctx, q.hold, q.env, o, q.stopRun)
	}
	d.claims.settle(ctx, q.hold, q.env, o)
	return false
}

// outcome is what the delivery dl that returned err comes to: released if
// Close cut it off, otherwise what claims.decide says. A fan-out owes the
// subscribers that failed from now on.
func (d *dispatcher) outcome(ctx context.Context, dl delivery, err error) outcome {
	if err != nil && ctx.Err() != nil {
		return released()
	}
	var subs []string
	if err != nil {
		subs = subscribersAfter(err, dl.q.subscribers)
	}
	return d.claims.decide(dl.attempt, dl.count, err, subs)
}

// dispatch runs interceptors and handle, the listener's call (nil: no
// listener routes e), turning panics into errors.
func (d *dispatcher) dispatch(ctx context.Context, e Envelope, handle func(context.Context) error) (err error) {
	ran, err := d.before(ctx, e)
	defer func() { d.after(ctx, e, ran, err) }()
	if err != nil {
		return err
	}
	if handle == nil {
		return unroutable(e)
	}
	call := handle
	ics := d.cfg.Interceptors
	for i := len(ics) - 1; i >= 0; i-- {
		if around := ics[i].Around; around != nil {
			next := call
			call = func(ctx context.Context) error { return around(ctx, e, next) }
		}
	}
	return guard(func() error { return call(ctx) })
}

// before runs the interceptors' Before hooks in order, up to the first
// that fails; ran is how many interceptors it reached, whose After hooks
// run.
func (d *dispatcher) before(ctx context.Context, e Envelope) (ran int, err error) {
	for _, ic := range d.cfg.Interceptors {
		ran++
		if ic.Before != nil {
			if err := guard(func() error { return ic.Before(ctx, e) }); err != nil {
				return ran, fmt.Errorf("interceptor: %w", err)
			}
		}
	}
	return ran, nil
}

// after runs the After hooks of the first ran interceptors, in reverse
// order, with the dispatch's error.
func (d *dispatcher) after(ctx context.Context, e Envelope, ran int, err error) {
	ics := d.cfg.Interceptors
	for i := ran - 1; i >= 0; i-- {
		if after := ics[i].After; after != nil {
			safeCall(d.log, "interceptor After", func() { after(ctx, e, err) })
		}
	}
}

// guard calls fn, returning a *PanicError if it panics. A runtime.Goexit
// in fn cannot be stopped: it ends the calling goroutine, whose deferred
// calls store the outcome (ErrGoexit) and replace the worker (see
// dispatcher.replaceOnGoexit).
func guard(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return fn()
}
