package outbox

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A fan-out goes DEAD at once only when every failing subscriber failed
// permanently; a subscriber that may yet succeed keeps the event pending.
func TestPermanentSubscribers(t *testing.T) {
	permanent := ListenerFunc(func(context.Context, Envelope) error { return Permanent(errors.New("never")) })
	transient := ListenerFunc(func(context.Context, Envelope) error { return errors.New("later") })
	ok := ListenerFunc(func(context.Context, Envelope) error { return nil })
	tests := []struct {
		name string
		subs map[string]Listener
		want Status
	}{
		{"every failure permanent", map[string]Listener{"a": permanent, "b": permanent, "c": ok}, StatusDead},
		{"one failure transient", map[string]Listener{"a": permanent, "b": transient, "c": ok}, StatusRetry},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			for name, l := range tc.subs {
				if err := h.reg.Subscribe(name, EventName("E"), l); err != nil {
					t.Fatal(err)
				}
			}
			h.start(t)
			r := h.waitStatus(t, h.commit(t, evt("E"))[0], tc.want)
			if r.Attempts != 1 || !strings.Contains(r.LastError, "subscriber a: never") {
				t.Errorf("record = %d attempts, error %q; want 1 attempt, subscriber a's error", r.Attempts, r.LastError)
			}
		})
	}
	if !errors.Is(Permanent(ErrNoResult), ErrNoResult) || Permanent(nil) != nil || Permanent(errors.New("x")).Error() != "x" {
		t.Error("Permanent must keep its error's identity and text, and be nil for nil")
	}
}
