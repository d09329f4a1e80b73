package outbox

import (
	"context"
	"fmt"
	"sync"
)

// Listener handles delivered events. It must be idempotent: an event can be
// delivered more than once. Returning an error schedules a retry (or DEAD
// after the last attempt); returning RetryAfter schedules a retry without
// using up an attempt. A panic counts as a failure.
type Listener interface {
	Handle(ctx context.Context, e Envelope) error
}

// BatchListener is a Listener that can also take several events at once,
// such as a broker sink that publishes them asynchronously and waits for
// their acknowledgements together. The dispatcher hands a worker's event
// to HandleBatch together with the events queued right behind it that
// route to the same listener (up to Config.ListenerBatchSize),
// and to Handle when it is alone.
//
// HandleBatch returns one result per event, in the order of events: nil
// for an event it delivered, else the error of that event, with the same
// meaning as Handle's (a retry, RetryAfter, DEAD after the last attempt).
// It must never report nil for an event it did not deliver: each result
// decides that event's outcome alone. A result slice shorter than events
// fails the events without a result (ErrNoResult); results past the last
// event are ignored. A panic fails every event of the batch.
//
// ctx is the batch's: it ends at ListenerTimeout after the batch started,
// or when the dispatcher closes. It does not carry the contexts that
// interceptors' Around hooks pass on for each event, nor DeliveryAttempt
// (each event may be at another attempt); Before, Around and After still
// run for each event on its own (see Interceptor).
type BatchListener interface {
	Listener
	HandleBatch(ctx context.Context, events []Envelope) []error
}

// ListenerFunc adapts a function to Listener.
type ListenerFunc func(ctx context.Context, e Envelope) error

// Handle calls f.
func (f ListenerFunc) Handle(ctx context.Context, e Envelope) error { return f(ctx, e) }

type attemptKey struct{}

// DeliveryAttempt returns which delivery attempt of the event a listener or
// interceptor is running: 1 for the first, 1 + the failed attempts so far
// after that (a RetryAfter does not count). It returns 0 outside a dispatch,
// and in the context of a BatchListener's HandleBatch.
func DeliveryAttempt(ctx context.Context) int {
	n, _ := ctx.Value(attemptKey{}).(int)
	return n
}

// Registry routes an event to exactly one Listener: the one registered for
// its (aggregate type, event type), else the one registered for its event
// type on any aggregate (Handle, or the subscribers of Subscribe), else the
// catch-all (HandleAll). It is safe for
// concurrent use; the zero value is ready to use. Client.Handle,
// Client.Register and Client.HandleAll fill the Client's own.
type Registry struct {
	mu    sync.RWMutex
	exact map[routeKey]Listener
	any   map[string]Listener
	all   Listener
}

type routeKey struct{ aggregate, event string }

// Handle routes events of type et, on any aggregate type, to fn. A second
// registration for the same event type fails with ErrDuplicateListener.
func (r *Registry) Handle(et EventType, fn func(ctx context.Context, e Envelope) error) error {
	if et == nil || fn == nil {
		return fmt.Errorf("%w: Handle needs an event type and a listener function", ErrInvalidConfig)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if l, dup := r.any[et.Name()]; dup {
		if _, subs := l.(*fanOut); subs {
			return fmt.Errorf("%w: event type %s has subscribers: add another with Subscribe", ErrDuplicateListener, et.Name())
		}
		return fmt.Errorf("%w: event type %s (any aggregate)", ErrDuplicateListener, et.Name())
	}
	if r.any == nil {
		r.any = make(map[string]Listener)
	}
	r.any[et.Name()] = ListenerFunc(fn)
	return nil
}

// Subscribe adds l as the subscriber called name of the events of type et,
// on any aggregate type: every subscriber of a type gets each of its
// events, and they retry independently. A delivery runs the subscribers
// side by side; when some fail, the others are done with the event, and
// only the failed ones run again at its retries, are named on it when it
// goes DEAD (Record.Subscribers) and run when it is replayed. The
// subscribers of an event share its row, so the ones that fail together
// share its attempts and retry schedule.
//
// A name is 1 to MaxSubscriberLen bytes without commas and is stored with
// the event: keep it stable across releases (an event that still owes a
// subscriber that is no longer registered fails as ErrUnroutable for it).
// Subscribe and Handle of one event type exclude each other: a second
// listener of a type is a subscriber; a second subscriber of one name fails
// with ErrDuplicateListener.
func (r *Registry) Subscribe(name string, et EventType, l Listener) error {
	if et == nil || l == nil {
		return fmt.Errorf("%w: Subscribe needs an event type and a listener", ErrInvalidConfig)
	}
	if err := validSubscriber(name); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.any == nil {
		r.any = make(map[string]Listener)
	}
	f, ok := r.any[et.Name()].(*fanOut)
	if !ok {
		if _, dup := r.any[et.Name()]; dup {
			return fmt.Errorf("%w: event type %s has a listener (Handle): make it a subscriber too", ErrDuplicateListener, et.Name())
		}
		f = &fanOut{subs: make(map[string]Listener)}
		r.any[et.Name()] = f
	}
	return f.add(name, l)
}

// Register routes events of type et on aggregate type at to l; it wins over
// a Handle for et. A second registration for the same pair fails with
// ErrDuplicateListener.
func (r *Registry) Register(at AggregateType, et EventType, l Listener) error {
	if at == nil || et == nil || l == nil {
		return fmt.Errorf("%w: Register needs an aggregate type, an event type and a listener", ErrInvalidConfig)
	}
	k := routeKey{at.Name(), et.Name()}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.exact[k]; dup {
		return fmt.Errorf("%w: (%s, %s)", ErrDuplicateListener, k.aggregate, k.event)
	}
	if r.exact == nil {
		r.exact = make(map[routeKey]Listener)
	}
	r.exact[k] = l
	return nil
}

// HandleAll routes every event that no Register or Handle route matches to
// l: one relay that publishes everything, while specific routes still win.
// A second catch-all fails with ErrDuplicateListener.
func (r *Registry) HandleAll(l Listener) error {
	if l == nil {
		return fmt.Errorf("%w: HandleAll needs a listener", ErrInvalidConfig)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.all != nil {
		return fmt.Errorf("%w: catch-all route", ErrDuplicateListener)
	}
	r.all = l
	return nil
}

// listenerFor returns the listener for (aggregateType, eventType), or nil.
func (r *Registry) listenerFor(aggregateType, eventType string) Listener {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if l, ok := r.exact[routeKey{aggregateType, eventType}]; ok {
		return l
	}
	if l, ok := r.any[eventType]; ok {
		return l
	}
	return r.all
}

// Interceptor runs around every dispatch, for cross-cutting concerns (audit,
// tracing, metrics). Before hooks run in registration order and an error (or
// panic) short-circuits the dispatch as a failure; After hooks run in reverse
// order with the dispatch's error (nil on success) and cannot fail it.
//
// Around wraps the listener call itself, once every Before has passed: it
// must call next once, with the context the listener (and the Around hooks
// registered after it) should see, and return next's error or its own. The
// first interceptor's Around is the outermost. It is how a tracer runs the
// listener in a span: next gets the span's context. Before and After see
// the dispatch's own context, not the one an Around passed on. An
// unroutable event (no listener) does not reach Around.
//
// Events delivered in one batch (BatchListener) go through their
// interceptors each on its own (concurrently, with an Around hook): each
// event's Around wraps the wait for that event's result, and the batch is
// handed over once every event's Around has called next (or returned
// without calling it: that event is left out of the batch, and what its
// Around returned is its outcome).
type Interceptor struct {
	Before func(ctx context.Context, e Envelope) error
	After  func(ctx context.Context, e Envelope, err error)
	Around func(ctx context.Context, e Envelope, next func(context.Context) error) error
}
