package outbox

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// putAbandoned stores e as a row claimed by an owner that stopped an hour
// ago: the next claim takes it over. lastError is what that owner left:
// "" (its delivery never started), or ErrInFlight's text (it had).
func putAbandoned(h *harness, e Envelope, attempts int, lastError string) {
	past := h.clk.Now().Add(-time.Hour)
	h.st.put(Record{ID: e.ID(), Envelope: e, Status: StatusNew, Attempts: attempts, LastError: lastError,
		LockedBy: "stopped-owner", LockedAt: past, CreatedAt: past, AvailableAt: past})
}

// Rows taken over that their owner never started are no suspects, even
// after earlier attempts: they run on the workers side by side, not one
// at a time.
func TestTakenOverRowsThatNeverStartedRunSideBySide(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Workers, c.MaxAttempts = 4, 10 })
	var running atomic.Int32
	together := make(chan struct{})
	var once sync.Once
	_ = h.reg.Handle(EventName("E"), func(ctx context.Context, _ Envelope) error {
		if running.Add(1) == 2 {
			once.Do(func() { close(together) })
		}
		select {
		case <-together:
		case <-ctx.Done():
		}
		return nil
	})
	h.start(t)
	var ids []string
	for range 4 {
		e := evt("E")
		putAbandoned(h, e, 3, "")
		ids = append(ids, e.ID())
	}
	if _, _, err := newTestPoller(t, h, nil).PollOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two taken-over deliveries running at once", func() bool { return isClosed(together) })
	for _, id := range ids {
		if r := h.waitStatus(t, id, StatusDone); r.Attempts != 4 {
			t.Errorf("%s: %d attempts; want 4 (the take-over's start counted)", id, r.Attempts)
		}
	}
}

// waitingForMates reports whether the suspect lane waits for the mates of
// a suspect (see dispatcher.waitMates).
func waitingForMates() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "core.(*dispatcher).waitMates")
}

// An event that was in flight when its owner stopped (ErrInFlight) may be
// what stopped it: it starts only once the events claimed with it have
// ended (their DONE stored), so that if it stops this process too, it
// takes none of them along.
func TestInFlightRowStartsAfterItsClaimMates(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Workers, c.MaxAttempts = 4, 10 })
	mate, suspect := evt("Mate"), evt("Suspect")
	gate := make(chan struct{})
	var closeGate sync.Once
	mateStarted := make(chan struct{})
	_ = h.reg.Handle(EventName("Mate"), func(ctx context.Context, _ Envelope) error {
		close(mateStarted)
		select {
		case <-gate:
		case <-ctx.Done():
		}
		return nil
	})
	var mateAtSuspectStart Status
	_ = h.reg.Handle(EventName("Suspect"), func(context.Context, Envelope) error {
		mateAtSuspectStart = h.st.get(mate.ID()).Status
		closeGate.Do(func() { close(gate) })
		return nil
	})
	h.start(t)
	putAbandoned(h, mate, 0, "")
	putAbandoned(h, suspect, 2, ErrInFlight.Error())
	if _, _, err := newTestPoller(t, h, nil).PollOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-mateStarted
	// The suspect either starts (and opens the gate itself) or waits for
	// its mate; then the mate may end.
	waitFor(t, "the suspect to start or to wait for its mate", func() bool {
		return h.st.get(suspect.ID()).Status == StatusDone || waitingForMates()
	})
	closeGate.Do(func() { close(gate) })
	r := h.waitStatus(t, suspect.ID(), StatusDone)
	if mateAtSuspectStart != StatusDone {
		t.Errorf("the suspect started while the event claimed with it was %s; want it DONE first", mateAtSuspectStart)
	}
	if r.Attempts != 3 {
		t.Errorf("suspect: %d attempts; want 3 (counted before it started)", r.Attempts)
	}
}

// A suspect whose mate hangs does not wait for it forever: it starts
// after ListenerTimeout, when the mate's claim is no longer renewed.
func TestInFlightRowDoesNotWaitForAHungMateForever(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Workers, c.MaxAttempts, c.ListenerTimeout = 2, 10, 50*time.Millisecond })
	mate, suspect := evt("Mate"), evt("Suspect")
	hung := make(chan struct{})
	_ = h.reg.Handle(EventName("Mate"), func(context.Context, Envelope) error { <-hung; return nil })
	_ = h.reg.Handle(EventName("Suspect"), func(context.Context, Envelope) error { return nil })
	h.start(t)
	t.Cleanup(func() { close(hung) }) // before Close, which waits for it
	putAbandoned(h, mate, 0, "")
	putAbandoned(h, suspect, 2, ErrInFlight.Error())
	if _, _, err := newTestPoller(t, h, nil).PollOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(t, suspect.ID(), StatusDone)
}
