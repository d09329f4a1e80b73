package outbox

import (
	"context"
	"fmt"
	"sync"
)

// background is the lifecycle shared by the poller and the purge
// scheduler: one goroutine between Start and Close, whose context is
// cancelled by Close. The zero value is ready to use.
type background struct {
	mu      sync.Mutex
	started bool
	closed  bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// start runs fn in a goroutine. fn must return once its context is done.
// ctx only lends its values: its cancellation does not stop fn, Close does.
func (b *background) start(ctx context.Context, name string, fn func(ctx context.Context)) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	if b.started {
		return fmt.Errorf("%w: %s already started", ErrInvalidConfig, name)
	}
	b.started = true
	ctx, b.cancel = context.WithCancel(context.WithoutCancel(ctx))
	b.done = make(chan struct{})
	go func() {
		defer close(b.done)
		fn(ctx)
	}()
	return nil
}

// close cancels the goroutine and waits for it to return, or for ctx to
// end (an error wrapping ctx.Err()). It is idempotent, and every call
// waits: a later close returns nil once the goroutine has returned.
func (b *background) close(ctx context.Context, name string) error {
	b.mu.Lock()
	if !b.closed && b.started {
		b.cancel()
	}
	b.closed = true
	started := b.started
	b.mu.Unlock()
	if !started || isClosed(b.done) {
		return nil
	}
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("outbox: %s close: %w", name, ctx.Err())
	}
}

// isClosed reports whether ch is closed already: checked before a select
// that also waits for a context, which would pick either at random once
// both are ready.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
