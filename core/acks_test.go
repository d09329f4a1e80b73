package outbox

import (
	"fmt"
	"sync"
	"testing"
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
