package outbox

import (
	"cmp"
	"context"
	"fmt"
	"slices"
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

// DefaultOrderedRun is how many events of one ordering key an ordered
// claim takes at most unless Config.OrderedRun sets another number (see
// ClaimRequest.Run). It is large enough that a key with a backlog costs
// a claim per run rather than per event, and small enough that a run
// holds little in memory and a crashed process leaves few claims behind
// (see docs/benchmarks.md).
const DefaultOrderedRun = 32

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

// Runs (see ClaimRequest.Run). An ordered claim may return several events
// of one key: the head and the events after it, in Seq order. One worker
// delivers them in order (dispatcher.deliverRuns), writing each one's DONE
// before the next starts, and gives back the rest unstarted at the first
// that does not succeed.

// groupRuns orders the records of a claim for the queues: the events of
// one key follow each other in Seq order (a run: the store returns several
// events of a key only as a run), where the first of them was; then the
// runs and single events are ordered, stably, by suspicion (fresh, taken
// over, in flight when their owner stopped), a run by its most suspect
// event's.
func groupRuns(recs []Record) {
	units := make([][]Record, 0, len(recs))
	at := map[string]int{} // key → its unit
	for _, r := range recs {
		if !inRun(r) {
			units = append(units, []Record{r})
			continue
		}
		k := r.Envelope.OrderingKey()
		if i, ok := at[k]; ok {
			units[i] = append(units[i], r)
			continue
		}
		at[k] = len(units)
		units = append(units, []Record{r})
	}
	worst := func(u []Record) int {
		w := 0
		for _, r := range u {
			w = max(w, suspicion(r))
		}
		return w
	}
	slices.SortStableFunc(units, func(a, b []Record) int { return worst(a) - worst(b) })
	out := recs[:0:0]
	for _, u := range units {
		slices.SortFunc(u, func(a, b Record) int { return cmp.Compare(a.Seq, b.Seq) })
		out = append(out, u...)
	}
	copy(recs, out)
}

// inRun reports whether r may be an event of a run: an ordered event.
func inRun(r Record) bool { return r.Err == nil && r.Envelope.Ordered() }

// runLen returns how many records at the start of recs (at least one)
// form a run: the first, and those after it of the same key (see
// groupRuns).
func runLen(recs []Record) int {
	n := 1
	if !inRun(recs[0]) {
		return n
	}
	k := recs[0].Envelope.OrderingKey()
	for n < len(recs) && inRun(recs[n]) && recs[n].Envelope.OrderingKey() == k && recs[n].Seq > recs[n-1].Seq {
		n++
	}
	return n
}
