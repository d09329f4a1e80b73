package outbox

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// run delivers q in to's context (the worker's), together with the events queued behind it that route
// to the same BatchListener (up to ListenerBatchSize), and returns the
// event it took on the way that routes elsewhere, which the worker runs
// next (more is false when there is none). It takes what is queued now
// and never waits for more. buf is the worker's own memory for batches,
// reused from one to the next.
func (d *dispatcher) run(to *timeouts, buf *batchBuf, q queued) (next queued, more bool) {
	if len(q.rest) > 0 {
		return d.deliverRuns(to, q)
	}
	if d.expired(q) || d.outlived(q) || d.heldBack(q) {
		return queued{}, false
	}
	if q.suspect {
		d.deliverSuspect(to, q)
		return queued{}, false
	}
	l := d.route(q.env)
	bl, ok := l.(BatchListener)
	if !ok || d.cfg.ListenerBatchSize == 1 {
		d.deliver(to, q, l)
		return queued{}, false
	}
	batch := append(buf.queued[:0], q)
	defer func() { buf.queued = clearSlice(batch) }()
	for len(batch) < d.cfg.ListenerBatchSize {
		t, ok := d.poll()
		if !ok {
			break
		}
		if len(t.rest) == 0 && (d.expired(t) || d.outlived(t) || d.heldBack(t)) {
			continue
		}
		if t.suspect || len(t.rest) > 0 || !sameListener(d.route(t.env), bl) {
			next, more = t, true
			break
		}
		batch = append(batch, t)
	}
	if len(batch) == 1 {
		d.deliver(to, q, l)
	} else {
		d.deliverBatch(to.ctx, buf, bl, batch)
	}
	return next, more
}

// outlived settles q, unstarted, if its event expired while it waited
// (Envelope.Expired): it goes to DEAD, using no attempt.
func (d *dispatcher) outlived(q queued) bool {
	if q.env.NumHeaders() == 0 || !q.env.Expired(utcNow(d.clock)) {
		return false
	}
	d.claims.settle(d.runCtx, q.hold, q.env, d.claims.decide(q.attempts, false, expiredError(q.env), q.subscribers))
	return true
}

// batchBuf is a worker's memory for the batches it delivers: a relay
// hands over a batch per few events, and allocating its slices anew each
// time made them the dispatcher's largest allocation. What it holds is
// cleared after each batch, so it keeps no event alive.
type batchBuf struct {
	queued  []queued
	members []member
}

// member is an event of a batch delivered inline: its delivery, its
// context and the interceptors it passed.
type member struct {
	dl  delivery
	ctx context.Context
	ran int // interceptors reached (after)
}

// clearSlice zeroes s's elements (dropping what they point to) and
// returns it empty, with its capacity.
func clearSlice[T any](s []T) []T {
	clear(s)
	return s[:0]
}

// route returns the listener of e, or nil.
func (d *dispatcher) route(e Envelope) Listener {
	return d.registry.listenerFor(e.AggregateType(), e.Type())
}

// sameListener reports whether l is bl. Listeners of a type that cannot
// be compared are never the same: their events go in batches of their
// own.
func sameListener(l Listener, bl BatchListener) bool {
	if l == nil {
		return false
	}
	t := reflect.TypeOf(l)
	return t == reflect.TypeOf(bl) && t.Comparable() && l == Listener(bl)
}

// deliverBatch delivers qs, events that route to l, in one HandleBatch,
// and records each event's outcome as deliver does; the batch shares one
// ListenerTimeout. With an Around interceptor, each event runs through
// its interceptors in a goroutine of its own, whose innermost call joins
// the batch and waits for the event's result; the batch is handed over
// once every event has joined or left it. Without one, deliverInline
// does the same in the worker.
func (d *dispatcher) deliverBatch(ctx context.Context, buf *batchBuf, l BatchListener, qs []queued) {
	bctx, cancel := context.WithTimeout(ctx, d.cfg.ListenerTimeout)
	defer cancel()
	deadline := utcNow(d.clock).Add(d.cfg.ListenerTimeout)
	if !slices.ContainsFunc(d.cfg.Interceptors, func(ic Interceptor) bool { return ic.Around != nil }) {
		d.deliverInline(ctx, bctx, buf, l, qs, deadline)
		return
	}
	b := newBatch(qs)
	var wg sync.WaitGroup
	for i, q := range qs {
		dl := d.begin(q, deadline)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := ErrGoexit // kept if an interceptor calls runtime.Goexit
			defer func() {
				b.leave(i)
				d.settle(ctx, dl, err)
			}()
			err = d.dispatch(dl.context(bctx), q.env, func(context.Context) error { return b.join(i) })
		}()
	}
	b.hand(bctx, l)
	wg.Wait()
}

// deliverInline delivers a batch when no interceptor has an Around hook:
// each event's Before hooks run, the events that passed them go to
// l.HandleBatch, and each one's After hooks and outcome follow.
func (d *dispatcher) deliverInline(ctx, bctx context.Context, buf *batchBuf, l BatchListener, qs []queued, deadline time.Time) {
	in := buf.members[:0]
	// begun counts the events of qs whose delivery began, settled those of
	// in whose outcome is stored; both in order.
	var begun, settled int
	var cur delivery // the event whose hooks run, while hooks is set
	hooks, handed, ended := false, false, false
	defer func() {
		if !ended { // runtime.Goexit in a hook or in HandleBatch: see replaceOnGoexit
			d.abandonInline(ctx, cur, hooks, handed, in[settled:], qs[begun:])
		}
		buf.members = clearSlice(in)
	}()
	// events is the listener's to keep: not reused.
	events := make([]Envelope, 0, len(qs))
	for _, q := range qs {
		dl := d.begin(q, deadline)
		begun++
		cur, hooks = dl, true
		ectx := dl.context(bctx)
		ran, err := d.before(ectx, q.env)
		if err != nil {
			d.after(ectx, q.env, ran, err)
			hooks = false
			d.settle(ctx, dl, err)
			continue
		}
		in = append(in, member{dl: dl, ctx: ectx, ran: ran})
		hooks = false
		events = append(events, q.env)
	}
	if len(in) == 0 {
		ended = true
		return
	}
	handed = true
	for k, err := range handleBatch(bctx, l, events) {
		m := in[k]
		d.after(m.ctx, m.dl.q.env, m.ran, err)
		settled++
		d.settle(ctx, m.dl, err)
	}
	ended = true
}

// abandonInline stores the outcomes of a batch delivered inline whose
// worker is ending in runtime.Goexit: the event whose hooks ran (cur, if
// hooks is set) failed with ErrGoexit, and so did the events of in if
// they were handed to the listener (handed); the events that had not
// reached the listener (in, unhanded, and rest, not begun) are given back,
// no attempt used.
func (d *dispatcher) abandonInline(ctx context.Context, cur delivery, hooks, handed bool, in []member, rest []queued) {
	if hooks {
		d.settle(ctx, cur, ErrGoexit)
	}
	for _, m := range in {
		if handed {
			d.settle(ctx, m.dl, ErrGoexit)
		} else {
			d.claims.settle(ctx, m.dl.q.hold, m.dl.q.env, released())
		}
	}
	for _, q := range rest {
		d.claims.settle(ctx, q.hold, q.env, released())
	}
}

// handleBatch calls l.HandleBatch and returns a result for each event:
// ErrNoResult past the end of a short result slice, a *PanicError for
// every event if HandleBatch panics.
func handleBatch(ctx context.Context, l BatchListener, events []Envelope) []error {
	var res []error
	perr := guard(func() error { res = l.HandleBatch(ctx, events); return nil })
	out := make([]error, len(events))
	for i := range out {
		switch {
		case perr != nil:
			out[i] = perr
		case i < len(res):
			out[i] = res[i]
		default:
			out[i] = fmt.Errorf("%w (%d results for %d events)", ErrNoResult, len(res), len(events))
		}
	}
	return out
}

// What became of an event of a batch; each event's state leaves waiting
// once.
const (
	waiting int32 = iota
	joined        // its innermost call joined the batch
	left          // its dispatch ended without joining (a Before failed, an Around did not call next)
	late          // the batch was handed over without it (its interceptors held it past the timeout)
)

// batch gathers the events of one HandleBatch call and hands each its
// result.
type batch struct {
	events  []Envelope
	state   []atomic.Int32
	arrived chan int      // an event's index once it joined, -1 once one left
	results []error       // one per event, set before done is closed
	done    chan struct{} // closed once the results are in
}

func newBatch(qs []queued) *batch {
	b := &batch{
		events: make([]Envelope, len(qs)), state: make([]atomic.Int32, len(qs)),
		arrived: make(chan int, len(qs)), results: make([]error, len(qs)), done: make(chan struct{}),
	}
	for i, q := range qs {
		b.events[i] = q.env
	}
	return b
}

// join adds event i to the batch and returns its result once the batch
// has been handled.
func (b *batch) join(i int) error {
	if b.state[i].CompareAndSwap(waiting, joined) {
		b.arrived <- i
	}
	<-b.done
	return b.results[i]
}

// leave reports that event i's dispatch has ended; if it did not join,
// the batch stops waiting for it.
func (b *batch) leave(i int) {
	if b.state[i].CompareAndSwap(waiting, left) {
		b.arrived <- -1
	}
}

// hand waits until every event has joined or left, or ctx ends (then the
// events still held by their interceptors fail), calls l.HandleBatch with
// the events that joined, in the order they were queued, and publishes
// each one's result (see handleBatch).
func (b *batch) hand(ctx context.Context, l BatchListener) {
	defer close(b.done)
	in := make([]int, 0, len(b.events))
	expired := ctx.Done()
	for pending := len(b.events); pending > 0; {
		select {
		case i := <-b.arrived:
			pending--
			if i >= 0 {
				in = append(in, i)
			}
		case <-expired:
			expired = nil // those that joined or left meanwhile are still on their way
			for i := range b.state {
				if b.state[i].CompareAndSwap(waiting, late) {
					b.results[i] = fmt.Errorf("outbox: the batch was handed over without the event, still held by its interceptors: %w", ctx.Err())
					pending--
				}
			}
		}
	}
	if len(in) == 0 {
		return
	}
	slices.Sort(in)
	events := make([]Envelope, len(in))
	for k, i := range in {
		events[k] = b.events[i]
	}
	for _, i := range in { // kept if HandleBatch calls runtime.Goexit: close(b.done) still runs
		b.results[i] = ErrGoexit
	}
	for k, err := range handleBatch(ctx, l, events) {
		b.results[in[k]] = err
	}
}
