package outboxtest

import (
	"context"
	"sync"

	outbox "github.com/go-outbox/outbox/core"
)

// Arrivals is a TxContext that counts, per name, the calls of Current
// whose context carries that name (WithArrival), so that a test can hold
// one transaction open until a concurrent one has reached a given point:
// the inbox's Process and the idempotency Guard's Do call Current right
// before they record their id or key.
type Arrivals struct {
	outbox.TxContext
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every arrival
	n       map[string]int
}

type arrivalKey struct{}

// NewArrivals wraps tc.
func NewArrivals(tc outbox.TxContext) *Arrivals {
	return &Arrivals{TxContext: tc, changed: make(chan struct{}), n: map[string]int{}}
}

// WithArrival returns ctx carrying name: the Current calls made with it
// count as arrivals of name.
func WithArrival(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, arrivalKey{}, name)
}

// Current counts an arrival of the name ctx carries, if any, and returns
// the wrapped TxContext's transaction.
func (a *Arrivals) Current(ctx context.Context) (outbox.Tx, error) {
	if name, ok := ctx.Value(arrivalKey{}).(string); ok {
		a.mu.Lock()
		a.n[name]++
		close(a.changed)
		a.changed = make(chan struct{})
		a.mu.Unlock()
	}
	return a.TxContext.Current(ctx)
}

// Wait returns once name has n arrivals, or ctx is done.
func (a *Arrivals) Wait(ctx context.Context, name string, n int) {
	for {
		a.mu.Lock()
		got, changed := a.n[name], a.changed
		a.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}
