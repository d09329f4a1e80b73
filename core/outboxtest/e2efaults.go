package outboxtest

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// e2ePoison: a listener that never ends its delivery — as when it kills
// its process (os.Exit, an out-of-memory kill) — must not be started
// forever. Each node here claims the event at its first poll and hangs in
// the listener like a dead process; after the lease the next node takes it
// over and counts an attempt before it starts it again. After MaxAttempts
// such attempts (MaxAttempts+1 starts: the first start of a fresh event
// counts only if it fails) the event is DEAD and says why, and the events
// claimed with it are delivered once.
func e2ePoison(t *testing.T, f Fixture) {
	const maxAttempts = 3
	clock := NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	block := make(chan struct{})
	var starts atomic.Int32
	started := make(chan struct{}, maxAttempts+1)
	mates := NewLedger()
	listener := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		if e.Type() != evtFail.Name() {
			mates.Record(e.ID())
			return nil
		}
		starts.Add(1)
		started <- struct{}{}
		<-block // the process "died": no outcome, whatever the context says
		return nil
	})
	poison := outbox.MustEnvelope(evtFail, outbox.WithJSON([]byte(`{}`)))
	writer := writerOnly(t, f, clock)
	var batchMates []outbox.Envelope
	for node := 0; ; node++ {
		// Each claim takes the poison with a new event.
		mate := ping(t)
		batchMates = append(batchMates, mate)
		if node == 0 {
			write(t, f, writer, poison, mate)
		} else {
			write(t, f, writer, mate)
			clock.Advance(time.Minute + time.Second) // the previous node's lease expires
		}
		// Each node stands for a process the poison killed: it polls once,
		// and hears no wake-ups (they would make it poll again).
		c := newClient(t, f, outbox.Config{Mode: outbox.ModePollerOnly, Clock: clock, Lease: time.Minute,
			MaxAttempts: maxAttempts, PollInterval: time.Hour, DrainTimeout: 10 * time.Millisecond, Waker: outbox.NoWaker})
		handle(t, c, evtFail, listener)
		handle(t, c, evtPing, listener)
		start(t, c) // claims at its first poll
		if node == maxAttempts+1 {
			break
		}
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatalf("node %d did not start the poison event", node)
		}
		// The process "dies" once the mate's outcome is stored: an
		// in-process test cannot crash between a delivery and its ack (the
		// fault harness does: cmd/outbox-torture).
		Eventually(t, 10*time.Second, "the batch-mate DONE", func() bool { return record(t, f, mate.ID()).Status == outbox.StatusDone })
	}
	t.Cleanup(func() { close(block) }) // before the nodes close (cleanups run last first)
	Eventually(t, 10*time.Second, "the poison event DEAD", func() bool { return record(t, f, poison.ID()).Status == outbox.StatusDead })
	r := record(t, f, poison.ID())
	if r.Attempts != maxAttempts || starts.Load() != maxAttempts+1 || !strings.Contains(r.LastError, outbox.ErrClaimExpired.Error()) {
		t.Fatalf("poison: attempts %d, started %d times, last error %q; want %d, %d and the take-over error",
			r.Attempts, starts.Load(), r.LastError, maxAttempts, maxAttempts+1)
	}
	for _, m := range batchMates {
		Eventually(t, 10*time.Second, "the batch-mates DONE", func() bool { return record(t, f, m.ID()).Status == outbox.StatusDone })
		if n := mates.Count(m.ID()); n != 1 {
			t.Fatalf("an event claimed with the poison was delivered %d times, want once", n)
		}
	}
}

// e2eHungListener: a listener that hangs must not hold its event forever.
// Its delivery is no longer renewed past ListenerTimeout, so once the lease
// has run out after that a claim takes the event over, counts the attempt,
// and delivers it again: with byOwnNode, the claim of the hung delivery's
// own node (which must not take the event back only to keep it held), else,
// with that node's poller idle, another node's.
func e2eHungListener(byOwnNode bool) func(t *testing.T, f Fixture) {
	return func(t *testing.T, f Fixture) {
		clock := NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
		block, hung := make(chan struct{}), make(chan struct{})
		var calls atomic.Int32
		l := NewLedger()
		listener := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
			if calls.Add(1) == 1 {
				close(hung)
				<-block // ignores its context
				return nil
			}
			return l.Listener().Handle(ctx, e)
		})
		cfg := outbox.Config{Clock: clock, Lease: time.Minute, ListenerTimeout: 10 * time.Second, PollInterval: 5 * time.Millisecond, DrainTimeout: 10 * time.Millisecond}
		first := cfg
		if !byOwnNode {
			first.PollInterval = time.Hour // it polls at start only: the take-over is the other node's
		}
		a := startNode(t, f, listener, first)
		e := ping(t)
		write(t, f, a, e) // the hot path delivers it at once, and hangs
		<-hung
		clock.Advance(10*time.Second + time.Minute)
		if !byOwnNode {
			cfg.Mode = outbox.ModePollerOnly
			startNode(t, f, listener, cfg)
		}
		t.Cleanup(func() { close(block) }) // before the nodes close
		// A poller recovers expired claims about once a second of its
		// clock, and a recovery skips a row that another transaction
		// holds at that moment (SKIP LOCKED; seen on MySQL through bun):
		// the clock moves on while the test waits, as time does, so that
		// a missed recovery comes round again.
		Eventually(t, 10*time.Second, "the hung event delivered again", func() bool {
			clock.Advance(100 * time.Millisecond)
			return l.Count(e.ID()) == 1
		})
		Eventually(t, 10*time.Second, "the event DONE", func() bool { return record(t, f, e.ID()).Status == outbox.StatusDone })
		if r := record(t, f, e.ID()); r.Attempts != 1 {
			t.Fatalf("attempts %d, want 1: the hung delivery counts", r.Attempts)
		}
	}
}

// e2eHeartbeat: a listener that runs for several leases, within its
// ListenerTimeout, keeps its claim: the heartbeat renews it, so a second
// node polling all along never takes the event over.
func e2eHeartbeat(t *testing.T, f Fixture) {
	const lease = time.Second // renewed every 333ms: a take-over needs a whole second without one
	l := NewLedger()
	var slowRuns atomic.Int32
	slow := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		slowRuns.Add(1)
		select {
		case <-time.After(3 * lease):
		case <-ctx.Done():
			return ctx.Err()
		}
		return l.Listener().Handle(ctx, e)
	})
	cfg := outbox.Config{Lease: lease, ListenerTimeout: 20 * lease, PollInterval: 5 * time.Millisecond}
	a := startNode(t, f, slow, cfg)
	cfg.Mode = outbox.ModePollerOnly
	startNode(t, f, slow, cfg)
	e := ping(t)
	write(t, f, a, e)
	Eventually(t, 10*time.Second, "the slow event DONE", func() bool { return record(t, f, e.ID()).Status == outbox.StatusDone })
	r := record(t, f, e.ID())
	if n := slowRuns.Load(); n != 1 || r.Attempts != 0 || r.LastError != "" {
		t.Fatalf("the slow listener ran %d times, attempts %d, last error %q: its claim was taken over while it ran", n, r.Attempts, r.LastError)
	}
}

// e2eListenerTimeout: a listener that outlives ListenerTimeout sees its
// context cancelled, and its error is a failed attempt; the retry succeeds.
func e2eListenerTimeout(t *testing.T, f Fixture) {
	var calls atomic.Int32
	slow := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		if calls.Add(1) == 1 {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	c := startNode(t, f, slow, outbox.Config{ListenerTimeout: 50 * time.Millisecond})
	e := ping(t)
	write(t, f, c, e)
	Eventually(t, 10*time.Second, "the event DONE", func() bool { return record(t, f, e.ID()).Status == outbox.StatusDone })
	if r := record(t, f, e.ID()); r.Attempts != 1 || calls.Load() != 2 {
		t.Fatalf("attempts %d, calls %d; want 1 failed attempt and 2 calls", r.Attempts, calls.Load())
	}
}

// e2eClockSkew: a node whose clock is ahead of the owner's by more than a
// lease's renewal margin must not take over the owner's live claim while
// MaxClockSkew covers the difference (the claim time was written with the
// owner's clock), and must take it over once the claim is older than
// Lease+MaxClockSkew by its own clock.
func e2eClockSkew(t *testing.T, f Fixture) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clockA, clockB := NewClock(t0), NewClock(t0.Add(90*time.Second))
	started, unblock := make(chan struct{}), make(chan struct{})
	held := ping(t)
	l := NewLedger()
	stuck := outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		if e.ID() == held.ID() {
			close(started)
			<-unblock
		}
		return nil
	})
	writer := writerOnly(t, f, clockA)
	write(t, f, writer, held)
	// Node A claims the event at its first poll, at t0 by its clock; its
	// delivery runs on (its heartbeat would renew the claim every 20s).
	a := startNode(t, f, stuck, outbox.Config{Mode: outbox.ModePollerOnly, Clock: clockA, Lease: time.Minute,
		PollInterval: time.Hour, Waker: outbox.NoWaker})
	<-started
	t.Cleanup(func() { close(unblock) }) // before the nodes close
	fresh := ping(t)
	write(t, f, writer, fresh)
	// Node B's clock is 90s ahead: by it, A's claim is older than the
	// lease. Its first poll recovers expired claims and takes fresh events
	// in one claim, and delivers the fresh one only.
	startNode(t, f, l.Listener(), outbox.Config{Mode: outbox.ModePollerOnly, Clock: clockB, Lease: time.Minute,
		MaxClockSkew: time.Minute, PollInterval: 5 * time.Millisecond, Waker: outbox.NoWaker})
	Eventually(t, 10*time.Second, "B delivers the fresh event", func() bool { return record(t, f, fresh.ID()).Status == outbox.StatusDone })
	if n := l.Count(held.ID()); n != 0 {
		t.Fatalf("B delivered A's live claim %d times: taken over with A's claim 90s old by B's clock, within Lease+MaxClockSkew", n)
	}
	if r := record(t, f, held.ID()); r.LockedBy != a.Owner() || r.LastError != "" {
		t.Fatalf("A's claim: locked by %q, last error %q; want %q and none", r.LockedBy, r.LastError, a.Owner())
	}
	// Past Lease+MaxClockSkew by B's clock, the claim is B's to take.
	clockB.Advance(31 * time.Second)
	Eventually(t, 10*time.Second, "B takes the claim over", func() bool { return l.Count(held.ID()) == 1 })
}
