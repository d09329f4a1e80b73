package outbox

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// timeouts gives the deliveries of one goroutine (a worker or the suspect
// lane), one after another, their contexts: the goroutine's context with
// a deadline ListenerTimeout away and the delivery's attempt.
//
// Why not context.WithTimeout and WithValue per delivery: those allocate a
// timer and two contexts for every event, register the first with the
// goroutine's context and unregister it again, which cost more than half
// of what the dispatcher spends on an event (BenchmarkColdDelivery). Here
// one timer per goroutine is reset for each delivery, and the goroutine's
// context is watched once, not once per delivery.
type timeouts struct {
	ctx     context.Context // the goroutine's: its end cancels the delivery running
	timeout time.Duration
	timer   *time.Timer // fires at the running delivery's deadline
	cur     atomic.Pointer[deliveryCtx]
	stop    func() bool // stops watching ctx
}

// newTimeouts returns the timeouts of deliveries run in ctx, which has no
// deadline of its own (the dispatcher's contexts derive from
// context.WithoutCancel); close lets go of them.
func newTimeouts(ctx context.Context, timeout time.Duration) *timeouts {
	t := &timeouts{ctx: ctx, timeout: timeout}
	t.timer = time.AfterFunc(time.Hour, t.expire)
	t.timer.Stop()
	t.stop = context.AfterFunc(ctx, func() {
		if c := t.cur.Load(); c != nil {
			c.cancel(ctx.Err())
		}
	})
	return t
}

// start returns the context of the next delivery, whose attempt is
// attempt. It must be ended (end) before the next one starts.
func (t *timeouts) start(attempt int) *deliveryCtx {
	c := &deliveryCtx{parent: t.ctx, deadline: time.Now().Add(t.timeout), attempt: attempt}
	t.cur.Store(c)
	// Checked after c is current: a ctx that ends from now on cancels c
	// through the watch.
	if err := t.ctx.Err(); err != nil {
		c.cancel(err)
	}
	t.timer.Reset(t.timeout) // fires at c.deadline or a little after
	return c
}

// end ends the delivery of c: its context is cancelled, as a
// WithTimeout's is when its cancel function is called.
func (t *timeouts) end(c *deliveryCtx) {
	t.timer.Stop()
	t.cur.CompareAndSwap(c, nil)
	c.cancel(context.Canceled)
}

// expire cancels the running delivery if its deadline has passed. The
// timer may fire for a delivery that has ended since; the next one's
// deadline is later, and its own reset of the timer fires then.
func (t *timeouts) expire() {
	if c := t.cur.Load(); c != nil && !time.Now().Before(c.deadline) {
		c.cancel(context.DeadlineExceeded)
	}
}

// close lets go of the timer and stops watching the goroutine's context.
func (t *timeouts) close() {
	t.timer.Stop()
	t.stop()
}

// deliveryCtx is the context of one delivery (see timeouts). It behaves
// as context.WithTimeout of its goroutine's context with the attempt as a
// value: Err is context.DeadlineExceeded past the deadline, Canceled (or
// the goroutine context's error) otherwise, and contexts derived from it
// are cancelled with it without a goroutine of their own (AfterFunc).
type deliveryCtx struct {
	parent   context.Context
	deadline time.Time
	attempt  int

	mu     sync.Mutex
	done   chan struct{} // made by the first Done
	err    error
	afters []*func() // AfterFunc's, run once cancelled
}

// closedDone is the Done channel of a delivery cancelled before anyone
// asked for it.
var closedDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Deadline returns the delivery's deadline.
func (c *deliveryCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Done returns a channel closed when the delivery is cancelled.
func (c *deliveryCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
	}
	return c.done
}

// Err returns why the delivery was cancelled, or nil.
func (c *deliveryCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Value returns the delivery's attempt for DeliveryAttempt and the
// goroutine context's values otherwise.
func (c *deliveryCtx) Value(key any) any {
	if _, ok := key.(attemptKey); ok {
		return c.attempt
	}
	return c.parent.Value(key)
}

// AfterFunc arranges for f to run in its own goroutine once the delivery
// is cancelled (at once if it is), as context.AfterFunc does; stop
// reports whether it kept f from running. context.WithCancel and its kin
// use it to cancel what derives from the delivery.
func (c *deliveryCtx) AfterFunc(f func()) (stop func() bool) {
	p := &f
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	c.afters = append(c.afters, p)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		i := slices.Index(c.afters, p)
		if i < 0 {
			return false
		}
		c.afters = slices.Delete(c.afters, i, i+1)
		return true
	}
}

// String names the context, for debugging.
func (c *deliveryCtx) String() string { return "outbox delivery context" }

// cancel cancels the delivery with err unless it is cancelled already.
func (c *deliveryCtx) cancel(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	if c.done == nil {
		c.done = closedDone
	} else {
		close(c.done)
	}
	afters := c.afters
	c.afters = nil
	c.mu.Unlock()
	for _, f := range afters {
		go (*f)()
	}
}
