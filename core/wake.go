package outbox

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Waker carries wake-ups between the Clients that share an outbox table,
// in any process: a Client that leaves events in the table for a poller
// (a writer-only Client after each commit, a hot path that refused events,
// the end of an ordered event whose key goes on) wakes the pollers of the
// others, which claim at once instead of at their next poll.
//
// Wake-ups only hasten a poll. A lost one costs latency, never an event:
// every poller still polls every PollInterval, and after each (re)start
// of Listen.
//
// The SQL stores implement it (package sqlstore): PostgreSQL with
// LISTEN/NOTIFY, the others with a signal row read every few tens of
// milliseconds. Config.Waker defaults to the Store when it implements
// Waker; NoWaker turns wake-ups off.
type Waker interface {
	// Wake tells the Clients listening on the table that events wait in
	// it for a claim. from is the sender's owner id (Config.Owner), so
	// that its own listener can ignore it. A Client calls Wake after the
	// commit that left the events, never inside a transaction, from one
	// goroutine at a time, and coalesces the wake-ups asked for meanwhile
	// into one.
	Wake(ctx context.Context, from string) error
	// Listen listens for wake-ups until ctx ends or its connection fails,
	// and calls wake, from the goroutine that called Listen, with the
	// sender's owner id of each; a wake-up whose sender is unknown carries
	// "". Once it listens it calls wake("") once, so that the Client polls
	// for what it may have missed before.
	// It returns ctx's error once ctx ends, or the failure; the Client
	// listens again after a pause. An error wrapping
	// errors.ErrUnsupported means it cannot listen at all (for example a
	// PostgreSQL store without a listening connection): the Client stops
	// listening and says so once.
	Listen(ctx context.Context, wake func(from string)) error
}

// NoWaker turns wake-ups between instances off, as Config.Waker: the
// other instances find this Client's events at their next poll.
var NoWaker Waker = noWaker{}

type noWaker struct{}

func (noWaker) Wake(context.Context, string) error { return nil }
func (noWaker) Listen(ctx context.Context, _ func(string)) error {
	<-ctx.Done()
	return ctx.Err()
}

// wakeTimeout bounds one Wake: a wake-up later than that helps no one.
const wakeTimeout = 5 * time.Second

// crossWake sends this Client's wake-ups to the others through a Waker:
// one goroutine at a time, started on demand and gone when nothing more is
// asked, so that a writer-only Client that is never started still wakes
// the pollers, and Close waits for it.
type crossWake struct {
	w     Waker
	owner string
	log   *slog.Logger

	mu      sync.Mutex
	running bool // a goroutine is sending
	again   bool // a wake-up was asked while it sent
	closed  bool
	failing bool // the last Wake failed (logged once until one succeeds)
	done    sync.WaitGroup
}

// newCrossWake returns the sender of cfg's Waker, or nil without one.
func newCrossWake(cfg Config) *crossWake {
	if cfg.Waker == nil || cfg.Waker == NoWaker {
		return nil
	}
	return &crossWake{w: cfg.Waker, owner: cfg.Owner, log: cfg.Logger.With("outbox_owner", cfg.Owner)}
}

// send asks for a wake-up of the other Clients: at once if none is being
// sent, else once more after the one being sent. Safe on a nil crossWake.
func (x *crossWake) send() {
	if x == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case x.closed:
	case x.running:
		x.again = true
	default:
		x.running = true
		x.done.Add(1)
		go x.run()
	}
}

func (x *crossWake) run() {
	defer x.done.Done()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout)
		err := x.w.Wake(ctx, x.owner)
		cancel()
		x.mu.Lock()
		switch {
		case err != nil && !x.failing:
			x.failing = true
			x.log.Warn("outbox: could not wake the other instances; they will find the events at their next poll", "error", err)
		case err == nil && x.failing:
			x.failing = false
			x.log.Info("outbox: waking the other instances again")
		}
		if !x.again || x.closed {
			x.running, x.again = false, false
			x.mu.Unlock()
			return
		}
		x.again = false
		x.mu.Unlock()
	}
}

// close stops sending and waits for a wake-up being sent, until ctx ends.
func (x *crossWake) close(ctx context.Context) error {
	if x == nil {
		return nil
	}
	x.mu.Lock()
	x.closed = true
	running := x.running
	x.mu.Unlock()
	if !running {
		return nil
	}
	done := make(chan struct{})
	go func() {
		x.done.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// listenLoop listens for the other Clients' wake-ups through w until ctx
// ends, and wakes the poller through wake for each that another owner
// sent. A failed Listen is retried after a pause that doubles up to
// maxPause; the first failure of a series is logged as a warning.
func listenLoop(ctx context.Context, w Waker, owner string, log *slog.Logger, maxPause time.Duration, wake func()) {
	pause := time.Duration(0)
	failing := false
	for {
		heard := false
		err := w.Listen(ctx, func(from string) {
			heard = true // Listen calls wake from its own goroutine only
			if from != owner {
				wake()
			}
		})
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errors.ErrUnsupported) {
			log.Info("outbox: not listening for the other instances' wake-ups; they reach this instance at its next poll", "reason", err)
			return
		}
		if heard { // it listened: a new failure, not the same outage
			pause, failing = 0, false
		}
		pause = min(max(2*pause, 100*time.Millisecond), maxPause)
		if !failing {
			failing = true
			log.Warn("outbox: listening for wake-ups failed; listening again", "error", err, "retry_in", pause)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
