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

// close cancels the goroutine and waits for it to return, or for ctx to end.
// It is idempotent.
func (b *background) close(ctx context.Context, name string) error {
	b.mu.Lock()
	if b.closed || !b.started {
		b.closed = true
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.cancel()
	b.mu.Unlock()
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("outbox: %s close: %w", name, ctx.Err())
	}
}
