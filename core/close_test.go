package outbox_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
)

// engineGoroutines returns the stacks of the running goroutines that run
// code of package outbox, by goroutine header ("goroutine 12 [select]:"
// without its state), leaving out those in skip.
func engineGoroutines(skip map[string]bool) map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		id, _, _ := strings.Cut(g, " [")
		if !skip[id] && strings.Contains(g, "github.com/go-outbox/outbox/core.") {
			out[id] = g
		}
	}
	return out
}

// A Close whose context has ended while a listener runs (and ignores its
// cancelled context) returns an error wrapping the context's; so does
// every later Close while the listener still runs. Once it returns, the
// next Close returns nil, its acknowledgement is stored, and no goroutine
// of the Client is left.
func TestCloseWaitsEveryTimeForEveryGoroutine(t *testing.T) {
	before := engineGoroutines(nil)
	skip := map[string]bool{}
	for id := range before {
		skip[id] = true
	}
	store := outboxmem.New()
	c, err := outbox.New(outbox.Config{Store: store, TxContext: store, Logger: quiet, DrainTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	if err := c.Handle(outbox.EventName("Slow"), func(context.Context, outbox.Envelope) error {
		close(started)
		<-release // ignores its context
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ids, err := writeIn(store, c, outbox.MustEnvelope(outbox.EventName("Slow"), outbox.WithJSON([]byte(`{}`))))
	if err != nil {
		t.Fatal(err)
	}
	<-started

	expired, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 2 {
		if err := c.Close(expired); !errors.Is(err, context.Canceled) {
			t.Fatalf("Close %d with an ended context while a listener runs = %v; want an error wrapping context.Canceled", i+1, err)
		}
	}
	if len(engineGoroutines(skip)) == 0 {
		t.Fatal("no goroutine of the Client left while its listener still runs")
	}
	close(release)
	if err := c.Close(context.Background()); err != nil {
		t.Fatalf("Close once the listener returned = %v; want nil", err)
	}
	// A goroutine that has signalled its end may still be returning:
	// poll until they are gone, or report what is left.
	var left map[string]string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); runtime.Gosched() {
		if left = engineGoroutines(skip); len(left) == 0 {
			break
		}
	}
	for _, g := range left {
		t.Errorf("goroutine left after Close returned nil:\n%s", g)
	}
	r, err := store.Get(context.Background(), ids[0])
	if err != nil || r.Status != outbox.StatusDone {
		t.Errorf("the late listener's event = %v, %v; want DONE (its ack written before Close returned)", r.Status, err)
	}
	if err := c.Close(expired); err != nil {
		t.Errorf("Close after everything stopped, with an ended context = %v; want nil", err)
	}
}
