package outbox

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFlushAcksNowGroupCommit: workers that queue acknowledgements and
// flush them side by side (the rounds of ordered runs) each return only
// once their own are stored DONE, whichever write took them; the writes
// are shared (never more writes than flushes).
func TestFlushAcksNowGroupCommit(t *testing.T) {
	h := newHarness(t, nil)
	h.start(t)
	const workers, perWorker, rounds = 8, 3, 20
	holds := make([][]*hold, workers)
	for w := range workers {
		for _, r := range runOf(h, fmt.Sprint("k", w), perWorker*rounds) {
			hd := h.d.claims.hold(r.Envelope, h.clk.Now(), nil)
			if hd == nil {
				t.Fatalf("event %s is held already", r.ID)
			}
			holds[w] = append(holds[w], hd)
		}
	}
	before := h.metrics.get("AckBatch")
	var wg sync.WaitGroup
	errs := make(chan string, workers*rounds)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range rounds {
				mine := holds[w][round*perWorker : (round+1)*perWorker]
				for _, hd := range mine {
					h.d.claims.acks <- hd
				}
				h.d.claims.flushAcksNow()
				for _, hd := range mine {
					if !hd.done.Load() || h.st.get(hd.id).Status != StatusDone {
						errs <- fmt.Sprintf("worker %d round %d: %s not stored DONE when its flush returned", w, round, hd.id)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if writes := h.metrics.get("AckBatch") - before; writes > workers*rounds {
		t.Errorf("%d DONE writes for %d flushes", writes, workers*rounds)
	}
}

// gatedDone is a memStore whose DONE updates each wait for a value on
// gate (closing it lets every one through); entered counts those that
// started.
type gatedDone struct {
	*memStore
	gate    chan struct{}
	entered atomic.Int64
}

func (g *gatedDone) MarkDone(ctx context.Context, owner string, ids []string, now time.Time) (int64, error) {
	g.entered.Add(1)
	<-g.gate
	return g.memStore.MarkDone(ctx, owner, ids, now)
}

// gatedHarness is a started harness whose DONE updates wait for its gate,
// with small ack batches, and count holds of events ready to ack.
func gatedHarness(t *testing.T, count int) (*harness, *gatedDone, []*hold) {
	var g *gatedDone
	h := newHarness(t, func(c *Config) {
		g = &gatedDone{memStore: c.Store.(*memStore), gate: make(chan struct{})}
		c.Store, c.AckBatchSize, c.AckInterval, c.HotQueueSize, c.ColdQueueSize = g, 4, time.Hour, 8, 8
	})
	h.start(t)
	t.Cleanup(func() { close(g.gate) }) // before the harness's Close (cleanups run last first)
	var holds []*hold
	for _, r := range runOf(h, "K", count) {
		holds = append(holds, h.d.claims.hold(r.Envelope, h.clk.Now(), nil))
	}
	return h, g, holds
}

// feed sends holds to the ack writer of c until they are all sent or stop
// is called; stop waits for it and returns how many it sent.
func feed(c *claims, holds []*hold) (stop func() int) {
	done, quit := make(chan struct{}), make(chan struct{})
	sent := 0
	go func() {
		defer close(done)
		for _, hd := range holds {
			select {
			case c.acks <- hd:
				sent++
			case <-quit:
				return
			}
		}
	}()
	return func() int { close(quit); <-done; return sent }
}

// TestFlushAnsweredBeforeLaterAcks: a flush waits for the writes of the
// acks that came before it, not for those that keep coming after it (a
// flush that waited for an empty batch would wait as long as the workers
// keep acknowledging).
func TestFlushAnsweredBeforeLaterAcks(t *testing.T) {
	const count = 1000
	h, g, holds := gatedHarness(t, count)
	c := h.d.claims
	limit := h.cfg.AckBatchSize * maxAckGrowth
	// Both writers busy, a full batch waiting, the channel full.
	first := ackRoom(h.cfg) + (ackWriters+1)*limit
	stop := feed(c, holds[:first])
	waitFor(t, "the ack channel to fill", func() bool { return len(c.acks) == cap(c.acks) })
	before := holds[:stop()]
	done := make(chan struct{}) // what flushAcksNow sends, watched here
	c.flushNow <- done
	stop = feed(c, holds[first:]) // acks after the request
	defer stop()
	writes := 0
	for !isClosed(done) {
		if writes++; writes > count/limit {
			t.Fatalf("the flush is not answered after %d writes", writes)
		}
		n := g.entered.Load()
		g.gate <- struct{}{} // a write ends; the loop answers what it may, then starts the next
		waitFor(t, "the next write", func() bool { return g.entered.Load() > n || isClosed(done) })
	}
	if emptied := count / limit; writes >= emptied/2 {
		t.Errorf("the flush was answered after %d writes; the batch empties after about %d", writes, emptied)
	}
	for _, hd := range before {
		if !hd.done.Load() {
			t.Fatalf("the flush was answered before %s, acknowledged before it, was stored", hd.id)
		}
	}
}

// TestAcksBackPressure: while the DONE updates cannot be written, the
// ack writer takes a bounded number of acks and the channel fills: the
// workers wait instead of the acks piling up in memory.
func TestAcksBackPressure(t *testing.T) {
	c0 := (Config{Store: newMemStore(), TxContext: fakeTxContext{}, AckBatchSize: 4, HotQueueSize: 8, ColdQueueSize: 8}).WithDefaults()
	limit := c0.AckBatchSize * maxAckGrowth
	h, _, holds := gatedHarness(t, ackRoom(c0)+(ackWriters+2)*limit+10)
	c := h.d.claims
	defer feed(c, holds)()
	waitFor(t, "the ack channel to fill while no DONE update can be written", func() bool { return len(c.acks) == cap(c.acks) })
}
