package outbox

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
)

// runOf puts n ordered events of key in the store, claimed by h's owner
// with sequence numbers 1..n, and returns their records.
func runOf(h *harness, key string, n int) []Record {
	var recs []Record
	for i := range n {
		e := MustEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithOrderingKey(key)).inOrder(true)
		r := Record{ID: e.ID(), Envelope: e, Status: StatusNew, LockedBy: h.d.Owner(), LockedAt: h.clk.Now(), Seq: int64(i + 1)}
		h.st.put(r)
		recs = append(recs, r)
	}
	return recs
}

// TestRunDeliveredInOrderUntilFailure: one worker delivers a run in order,
// each event once the one before it is stored DONE; at the first failure
// the rest is given back unstarted (no attempt used, no error recorded).
func TestRunDeliveredInOrderUntilFailure(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Workers = 3; c.Ordered = true })
	recs := runOf(h, "K", 5)
	var mu sync.Mutex
	var seen []string
	var notDone []string // events started while the one before was not stored DONE
	_ = h.reg.Handle(EventName("E"), func(_ context.Context, e Envelope) error {
		mu.Lock()
		defer mu.Unlock()
		i := slices.IndexFunc(recs, func(r Record) bool { return r.ID == e.ID() })
		if i > 0 && h.st.get(recs[i-1].ID).Status != StatusDone {
			notDone = append(notDone, e.ID())
		}
		seen = append(seen, e.ID())
		if i == 2 {
			return errors.New("fails")
		}
		return nil
	})
	h.start(t)
	if !h.d.enqueueClaimed(recs, nil) {
		t.Fatal("enqueueClaimed refused the run")
	}
	h.waitStatus(t, recs[2].ID, StatusRetry)
	waitFor(t, "the rest of the run given back", func() bool {
		return h.st.get(recs[3].ID).LockedBy == "" && h.st.get(recs[4].ID).LockedBy == ""
	})
	waitFor(t, "the holds let go", func() bool { return h.d.claims.held.len() == 0 })
	mu.Lock()
	defer mu.Unlock()
	if want := []string{recs[0].ID, recs[1].ID, recs[2].ID}; !slices.Equal(seen, want) {
		t.Errorf("delivered %v, want %v", seen, want)
	}
	if len(notDone) > 0 {
		t.Errorf("events started before the one before them was stored DONE: %v", notDone)
	}
	for _, r := range recs[:2] {
		if got := h.st.get(r.ID); got.Status != StatusDone {
			t.Errorf("%s is %s, want DONE", r.ID, got.Status)
		}
	}
	if got := h.st.get(recs[2].ID); got.Attempts != 1 || got.LastError == "" {
		t.Errorf("failed event: attempts %d, error %q; want 1 and the error", got.Attempts, got.LastError)
	}
	for _, r := range recs[3:] {
		got := h.st.get(r.ID)
		if got.Status != StatusNew || got.Attempts != 0 || got.LastError != "" {
			t.Errorf("given back %s: status %s, attempts %d, error %q; want NEW, 0, none", r.ID, got.Status, got.Attempts, got.LastError)
		}
	}
}

// TestRunStopsWhenDoneIsFencedOff: an event of a run whose claim was taken
// over meanwhile gets no DONE, and the rest of its run does not start.
func TestRunStopsWhenDoneIsFencedOff(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Ordered = true })
	recs := runOf(h, "K", 3)
	started := make(chan string, 3)
	_ = h.reg.Handle(EventName("E"), func(_ context.Context, e Envelope) error {
		started <- e.ID()
		if e.ID() == recs[0].ID {
			r := h.st.get(e.ID())
			r.LockedBy = "someone-else" // taken over while it ran
			h.st.put(r)
		}
		return nil
	})
	h.start(t)
	if !h.d.enqueueClaimed(recs, nil) {
		t.Fatal("enqueueClaimed refused the run")
	}
	waitFor(t, "the rest of the run given back", func() bool {
		return h.st.get(recs[1].ID).LockedBy == "" && h.st.get(recs[2].ID).LockedBy == ""
	})
	waitFor(t, "the holds let go", func() bool { return h.d.claims.held.len() == 0 })
	if got := <-started; got != recs[0].ID {
		t.Fatalf("first delivery %s, want %s", got, recs[0].ID)
	}
	select {
	case id := <-started:
		t.Errorf("%s started after the event before it lost its claim", id)
	default:
	}
	if got := h.st.get(recs[0].ID); got.Status == StatusDone || got.LockedBy != "someone-else" {
		t.Errorf("taken-over event: %s by %q; want it left to its new owner", got.Status, got.LockedBy)
	}
	if h.metrics.get("StaleUpdates") == 0 {
		t.Errorf("no stale update counted")
	}
}

// TestRunGroupsAClaim: the events of one key in a claim are grouped, in
// Seq order, also one that carries a take-over's mark; runs and single
// events are ordered by suspicion, a run by its most suspect event's.
func TestRunGroupsAClaim(t *testing.T) {
	mk := func(key string, seq int64, lastError string) Record {
		e := MustEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithOrderingKey(key)).inOrder(key != "")
		return Record{ID: e.ID(), Envelope: e, Seq: seq, LastError: lastError}
	}
	a3, u, b1, a1, a2, c1 := mk("A", 3, ""), mk("", 4, ""), mk("B", 5, ""), mk("A", 1, ""), mk("A", 2, ""), mk("C", 9, ErrClaimExpired.Error())
	a4 := mk("A", 6, ErrClaimExpired.Error()) // given back taken over once: still of the run
	recs := []Record{a3, u, b1, a1, c1, a4, a2}
	groupRuns(recs)
	var got []string
	for i, n := 0, 0; i < len(recs); i += n {
		n = runLen(recs[i:])
		got = append(got, recs[i].ID+"×"+string(rune('0'+n)))
	}
	want := []string{u.ID + "×1", b1.ID + "×1", a1.ID + "×4", c1.ID + "×1"} // taken-over events after fresh ones
	if !slices.Equal(got, want) {
		t.Errorf("runs %v, want %v", got, want)
	}
}

// TestRunsSideBySide: one worker delivers several runs (in rounds, when
// they are queued together), each key's events in order, each once the
// one before it on its key is stored DONE.
func TestRunsSideBySide(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Workers = 1; c.Ordered = true })
	runs := [][]Record{runOf(h, "K1", 4), runOf(h, "K2", 3), runOf(h, "K3", 5)}
	prev := map[string]string{}
	for _, run := range runs {
		for i, r := range run[1:] {
			prev[r.ID] = run[i].ID
		}
	}
	var mu sync.Mutex
	var early []string
	seen := map[string][]string{}
	_ = h.reg.Handle(EventName("E"), func(_ context.Context, e Envelope) error {
		mu.Lock()
		defer mu.Unlock()
		if p, ok := prev[e.ID()]; ok && h.st.get(p).Status != StatusDone {
			early = append(early, e.ID())
		}
		seen[e.OrderingKey()] = append(seen[e.OrderingKey()], e.ID())
		return nil
	})
	h.start(t)
	for _, run := range runs {
		if !h.d.enqueueClaimed(run, nil) {
			t.Fatal("enqueueClaimed refused a run")
		}
	}
	for _, run := range runs {
		for _, r := range run {
			h.waitStatus(t, r.ID, StatusDone)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(early) > 0 {
		t.Errorf("events started before the one before them on their key was stored DONE: %v", early)
	}
	for _, run := range runs {
		k := run[0].Envelope.OrderingKey()
		var want []string
		for _, r := range run {
			want = append(want, r.ID)
		}
		if !slices.Equal(seen[k], want) {
			t.Errorf("key %s delivered %v, want %v", k, seen[k], want)
		}
	}
}

// TestStaleDoneStopsOnlyItsRun: a DONE update in which one event's claim
// was taken over stops that event's run only; the runs of the other
// events of the write, stored DONE, go on.
func TestStaleDoneStopsOnlyItsRun(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Ordered = true })
	k, l := runOf(h, "K", 1)[0], runOf(h, "L", 1)[0]
	hk, hl := h.d.claims.hold(k.Envelope, h.clk.Now(), nil), h.d.claims.hold(l.Envelope, h.clk.Now(), nil)
	hk.midRun, hl.midRun = true, true
	taken := h.st.get(k.ID)
	taken.LockedBy = "someone-else"
	h.st.put(taken)
	h.d.claims.markDone([]*hold{hk, hl})
	if hk.done.Load() {
		t.Error("the taken-over event's run may go on")
	}
	if !hl.done.Load() || h.st.get(l.ID).Status != StatusDone {
		t.Error("the other event, stored DONE, stops its run")
	}
	if h.metrics.get("StaleUpdates") != 1 {
		t.Errorf("stale updates counted: %d, want 1", h.metrics.get("StaleUpdates"))
	}
}
