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

// ListenerFunc adapts a function to Listener.
type ListenerFunc func(ctx context.Context, e Envelope) error

// Handle calls f.
func (f ListenerFunc) Handle(ctx context.Context, e Envelope) error { return f(ctx, e) }

type attemptKey struct{}

// DeliveryAttempt returns which delivery attempt of the event a listener or
// interceptor is running: 1 for the first, 1 + the failed attempts so far
// after that (a RetryAfter does not count). It returns 0 outside a dispatch.
func DeliveryAttempt(ctx context.Context) int {
	n, _ := ctx.Value(attemptKey{}).(int)
	return n
}

// ListenerRegistry routes an event to exactly one Listener.
type ListenerRegistry interface {
	// ListenerFor returns the listener for (aggregateType, eventType), or nil.
	ListenerFor(aggregateType, eventType string) Listener
}

// Registry is the default ListenerRegistry: one listener per
// (aggregate type, event type). It is safe for concurrent use.
type Registry struct {
	mu sync.RWMutex
	m  map[routeKey]Listener
}

type routeKey struct{ aggregate, event string }

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{m: make(map[routeKey]Listener)} }

// Register routes events of type et on aggregate type at to l. A second
// registration for the same pair fails with ErrDuplicateListener.
func (r *Registry) Register(at AggregateType, et EventType, l Listener) error {
	if at == nil || et == nil || l == nil {
		return fmt.Errorf("%w: Register needs an aggregate type, an event type and a listener", ErrInvalidConfig)
	}
	k := routeKey{at.Name(), et.Name()}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = make(map[routeKey]Listener)
	}
	if _, dup := r.m[k]; dup {
		return fmt.Errorf("%w: (%s, %s)", ErrDuplicateListener, k.aggregate, k.event)
	}
	r.m[k] = l
	return nil
}

// Handle registers fn for event type et on GlobalAggregate.
func (r *Registry) Handle(et EventType, fn func(ctx context.Context, e Envelope) error) error {
	if fn == nil {
		return fmt.Errorf("%w: Handle needs a listener function", ErrInvalidConfig)
	}
	return r.Register(GlobalAggregate, et, ListenerFunc(fn))
}

// ListenerFor implements ListenerRegistry.
func (r *Registry) ListenerFor(aggregateType, eventType string) Listener {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.m[routeKey{aggregateType, eventType}]
}

// Interceptor runs around every dispatch, for cross-cutting concerns (audit,
// tracing, metrics). Before hooks run in registration order and an error (or
// panic) short-circuits the dispatch as a failure; After hooks run in reverse
// order with the dispatch's error (nil on success) and cannot fail it.
type Interceptor struct {
	Before func(ctx context.Context, e Envelope) error
	After  func(ctx context.Context, e Envelope, err error)
}
