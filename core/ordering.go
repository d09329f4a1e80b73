package outbox

import (
	"context"
	"fmt"
)

// DeadPolicy says what an ordered event that ends in DEAD does to the
// later events of its ordering key (see Config.Ordered).
type DeadPolicy int

const (
	// DeadBlocksKey keeps (the default) the later events of the key
	// waiting until the DEAD event is replayed (DeadEvents.Replay: it is
	// delivered first, then the rest) or skipped (DeadEvents.Skip). Other
	// keys are not affected. Stats.BlockedKeys counts such keys,
	// Query.Blocking lists their DEAD events, Metrics.KeyBlocked counts
	// each block and the dispatcher logs it.
	DeadBlocksKey DeadPolicy = iota
	// DeadSkipsKey lets the later events of the key go on: the DEAD event
	// gives up its place. Replayed, it becomes the first of its key that
	// is not DONE again, and the events after it that are not delivered
	// yet wait for it (one already in flight finishes meanwhile).
	DeadSkipsKey
)

// String returns "blocks-key" or "skips-key".
func (p DeadPolicy) String() string {
	switch p {
	case DeadBlocksKey:
		return "blocks-key"
	case DeadSkipsKey:
		return "skips-key"
	}
	return fmt.Sprintf("DeadPolicy(%d)", int(p))
}

// SkipNote is the start of the last error Client.Dead().Skip records on
// the events it skips.
const SkipNote = "outbox: skipped without delivery"

// orderedKeys returns the distinct ordering keys of the ordered events
// that are not delayed, in the order they first appear.
func orderedKeys(events []Envelope) []string {
	var keys []string
	seen := map[string]struct{}{}
	for _, e := range events {
		if !e.Ordered() || e.Delayed() {
			continue
		}
		k := e.OrderingKey()
		if _, dup := seen[k]; !dup {
			seen[k] = struct{}{}
			keys = append(keys, k)
		}
	}
	return keys
}

// hotSplit decides which events of one write an ordered Client's hot path
// delivers at once: those that are not delayed, and either unordered or
// the first of their key in events (a delayed one counts) while nothing
// of their key is pending in the table. The others it inserted claimed are
// released after commit (released), for the poller, which claims them in
// their key's order. With nothing hot, the write is inserted unclaimed.
func (w *writer) hotSplit(ctx context.Context, tx Tx, events []Envelope) (hot []Envelope, released []string, claim bool, err error) {
	keys := orderedKeys(events)
	pending := map[string]bool{}
	if len(keys) > 0 {
		got, err := w.store.PendingKeys(ctx, tx, keys)
		if err != nil {
			return nil, nil, false, fmt.Errorf("outbox: write: look for pending events of %d ordering key(s): %w", len(keys), err)
		}
		for _, k := range got {
			pending[k] = true
		}
	}
	for _, e := range events {
		switch {
		case e.Delayed():
			if e.Ordered() {
				pending[e.OrderingKey()] = true // the later events of its key wait for it
			}
		case !e.Ordered():
			hot = append(hot, e)
		case pending[e.OrderingKey()]:
			released = append(released, e.ID())
		default:
			hot = append(hot, e)
			pending[e.OrderingKey()] = true // its later events in this write wait for it
		}
	}
	return hot, released, len(hot) > 0, nil
}
