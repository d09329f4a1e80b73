package outboxmem

import (
	"context"
	"sync"

	outbox "github.com/go-outbox/outbox/core"
)

var _ outbox.Waker = (*Store)(nil)

// wakes are the listeners of a Store's wake-ups (outbox.Waker): the Clients
// that share the Store hear each other as instances on one table do.
type wakes struct {
	mu        sync.Mutex
	listeners map[*wakeListener]struct{}
}

// wakeListener is one Listen: the wake-ups sent since it last woke, merged.
type wakeListener struct {
	signal chan struct{}
	mu     sync.Mutex
	any    bool   // a wake-up waits
	from   string // its sender, "" if several sent
}

// Wake tells the Clients listening on the Store that events wait in it.
func (s *Store) Wake(_ context.Context, from string) error {
	s.wk.mu.Lock()
	defer s.wk.mu.Unlock()
	for l := range s.wk.listeners {
		l.mu.Lock()
		if l.any && l.from != from {
			l.from = ""
		} else if !l.any {
			l.any, l.from = true, from
		}
		l.mu.Unlock()
		select {
		case l.signal <- struct{}{}:
		default:
		}
	}
	return nil
}

// Listen hears the wake-ups of the Clients on the Store until ctx ends.
func (s *Store) Listen(ctx context.Context, wake func(from string)) error {
	l := &wakeListener{signal: make(chan struct{}, 1)}
	s.wk.mu.Lock()
	if s.wk.listeners == nil {
		s.wk.listeners = map[*wakeListener]struct{}{}
	}
	s.wk.listeners[l] = struct{}{}
	s.wk.mu.Unlock()
	defer func() {
		s.wk.mu.Lock()
		delete(s.wk.listeners, l)
		s.wk.mu.Unlock()
	}()
	wake("")
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.signal:
		}
		l.mu.Lock()
		from, any := l.from, l.any
		l.any, l.from = false, ""
		l.mu.Unlock()
		if any {
			wake(from)
		}
	}
}
