package outboxtest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// wakeTimeout is how long the wake-up cases wait for a delivery that only a
// wake-up can bring: their pollers poll once an hour.
const wakeTimeout = 60 * time.Second

// needWakeups skips the test when the fixture's Store carries no wake-ups
// between instances (outbox.Waker), or cannot hear them.
func needWakeups(t *testing.T, f Fixture) {
	t.Helper()
	w, ok := f.Store.(outbox.Waker)
	if !ok {
		t.Skipf("the Store (%T) carries no wake-ups between instances", f.Store)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Listen(ctx, func(string) {}); errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("the Store cannot hear wake-ups: %v", err)
	}
}

// e2eWakeUpReachesPollerOnlyNode: a writer-only instance's events reach a
// poller-only instance, whose next poll is an hour away, through wake-ups.
// Each event is written once the previous one was delivered, so all but
// the first are written after the poller polled and listens.
func e2eWakeUpReachesPollerOnlyNode(t *testing.T, f Fixture) {
	needWakeups(t, f)
	l := NewLedger()
	startNode(t, f, l.Listener(), outbox.Config{Mode: outbox.ModePollerOnly, PollInterval: time.Hour})
	w := writerOnly(t, f, nil)
	for i := range 5 {
		write(t, f, w, ping(t))
		Eventually(t, wakeTimeout, "the poller-only node's delivery, woken by the writer", func() bool {
			total, _, _ := l.Summary()
			return total == i+1
		})
	}
	if total, distinct, dups := l.Summary(); total != 5 || distinct != 5 || dups != 0 {
		t.Errorf("deliveries %d of %d events (%d duplicates); want 5 of 5", total, distinct, dups)
	}
}

// e2eWakeUpHandsOnOrderedKey: an ordered event delivered by a hot-path-only
// instance (it has no poller) wakes another instance's poller, which takes
// the next events of the key at once.
func e2eWakeUpHandsOnOrderedKey(t *testing.T, f Fixture) {
	needWakeups(t, f)
	var mu sync.Mutex
	var got []string
	seen := outbox.ListenerFunc(func(_ context.Context, e outbox.Envelope) error {
		mu.Lock()
		got = append(got, string(e.Payload()))
		mu.Unlock()
		return nil
	})
	delivered := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	startNode(t, f, seen, outbox.Config{Mode: outbox.ModePollerOnly, Ordered: true, PollInterval: time.Hour})
	hot := startNode(t, f, seen, outbox.Config{Mode: outbox.ModeHotPathOnly, Ordered: true})
	events := make([]outbox.Envelope, 3)
	for i := range events {
		e, err := outbox.NewEnvelope(evtPing, outbox.WithJSON([]byte{'0' + byte(i)}), outbox.WithOrderingKey("wake-key"))
		if err != nil {
			t.Fatal(err)
		}
		events[i] = e
	}
	write(t, f, hot, events...) // the first takes the hot path, the others wait for it
	Eventually(t, wakeTimeout, "the key's three events, the last two through the woken node", func() bool { return len(delivered()) == 3 })
	if got, want := delivered(), []string{"0", "1", "2"}; !slices.Equal(got, want) {
		t.Errorf("delivered %v; want %v", got, want)
	}
}
