package outboxtest

import (
	"context"
	"errors"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
)

// storeHorizon checks a HorizonReporter: a database without a vacuum
// horizon says ErrUnsupported; one with it reports the table's size, and
// counts as dead the versions the table's updates left (the statistics
// lag the writes: the count is checked only for what it can be).
func storeHorizon(t *testing.T, f Fixture) {
	hr, ok := f.Store.(outbox.HorizonReporter)
	if !ok {
		t.Skip("the store is no HorizonReporter")
	}
	ctx := context.Background()
	e := event(t)
	insert(t, f, t0, ownerA, e)
	mustDone(t, f, ownerA, e)
	h, err := hr.Horizon(ctx)
	if errors.Is(err, outbox.ErrUnsupported) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if h.TableSize <= 0 || h.DeadTuples < 0 || h.LiveTuples < 0 || h.Hidden < 0 {
		t.Errorf("horizon of a table with one event: %+v, want a size and no negative count", h)
	}
	for i, ho := range h.Holders {
		if ho.Kind == "" || ho.XIDAge < 0 || ho.Age < 0 || (i > 0 && ho.XIDAge > h.Holders[i-1].XIDAge) {
			t.Errorf("holders %+v: want a kind each, no negative age, oldest first", h.Holders)
		}
	}
}
