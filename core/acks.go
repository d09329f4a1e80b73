package outbox

import (
	"time"
)

// maxAckGrowth bounds a DONE update at this many times AckBatchSize.
const maxAckGrowth = 8

// ackWriters is how many DONE updates may be in flight at once: during a
// backlog one connection writing acknowledgements one batch after the
// other would cap the drain at what a single connection can update.
const ackWriters = 2

// ackLoop batches DONE updates, which markDone writes. A batch is written
// when it is full (AckBatchSize), AckInterval after its first ack, when a
// flushAcksNow call waits for it, and on Close; a write takes every ack
// waiting then, up to maxAckGrowth batches: while the database is slow
// (SQLite's write lock), fewer, larger updates keep up with the workers.
//
// Up to ackWriters updates are in flight at once. The acks and flush
// requests that arrive while every writer is busy wait for the next free
// one and go out together — a group commit: the workers of ordered runs,
// each waiting for its round's DONE updates (see deliverRuns), share one
// update per round between them instead of queueing one each. So that
// they keep sharing it, a request waits for the others the last writes
// answered to ask again (their next rounds), for at most as long as the
// last write took and never longer than AckInterval: without it, the
// first worker back would take a writer alone, and the rounds would split
// into two half-empty writes. While a full write's worth of acks waits
// (maxAckGrowth batches), the loop takes no more: the workers wait for
// room in the channel instead of the acks piling up behind a slow
// database.
func (c *claims) ackLoop() {
	defer close(c.ackDone)
	w := ackWrites{c: c, limit: c.ackBatch * maxAckGrowth, finished: make(chan writeEnd, ackWriters)}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	align := time.NewTimer(time.Hour)
	align.Stop()
	acks := c.acks
	due := false     // the oldest ack waiting has waited AckInterval
	aligned := false // the requests waiting have waited for the others long enough
	for {
		in := acks
		if len(w.batch) >= w.limit {
			in = nil // a full write waits: the workers wait for room in the channel
		}
		select {
		case done := <-c.flushNow:
			// Its acks were sent before the request: they are in the
			// channel, in the batch, or in a write already.
			if w.take(acks) {
				acks = nil
			}
			w.waiting = append(w.waiting, request{need: w.taken, done: done})
			if w.away > 0 {
				w.away--
			}
		case hd, ok := <-in:
			if !ok {
				acks = nil
				break
			}
			if len(w.batch) == 0 {
				timer.Reset(c.ackInterval)
			}
			w.add(hd)
		case e := <-w.finished:
			w.ended(e)
		case <-timer.C:
			due = true
		case <-align.C:
			aligned = true
		}
		closing := acks == nil
		w.attach() // the requests whose acks are all in writes already need none
		// Requests go out once the others answered by the last writes are
		// back too (those workers' next rounds), or after as long as a
		// write takes (at most AckInterval): the rounds of several workers
		// then share a write instead of alternating between two half-empty
		// ones.
		asked := len(w.waiting) > 0 && (w.away == 0 || aligned)
		if len(w.waiting) > 0 && !asked && w.aligning == 0 {
			w.aligning = min(max(w.took, time.Microsecond), c.ackInterval)
			align.Reset(w.aligning)
		}
		for len(w.batch) > 0 && w.inFlight < ackWriters &&
			(asked || len(w.batch) >= c.ackBatch || due || closing) {
			w.start()
			if asked {
				w.away, aligned, w.aligning = 0, false, 0
				align.Stop()
			}
		}
		w.attach() // the requests whose acks are all in writes wait for those
		if len(w.waiting) == 0 {
			aligned, w.aligning = false, 0
			align.Stop()
		}
		if len(w.batch) == 0 {
			due = false
			timer.Stop()
		}
		if closing && len(w.batch) == 0 && w.inFlight == 0 {
			return
		}
	}
}

// ackWrites is the state of ackLoop: the acks not written yet, the DONE
// updates in flight and the flushAcksNow calls waiting for them. Acks are
// counted as they come in (taken) and as writes take them (sent); writes
// are numbered from 1 as they start. A request waits until the acks that
// came in before it are all in writes, then for those writes to end.
type ackWrites struct {
	c           *claims
	limit       int     // the largest write
	batch       []*hold // acks not written yet
	taken, sent uint64
	inFlight    int
	started     uint64 // writes started
	// done is how many writes, counted from the first, have all ended;
	// out lists those ended beyond it.
	done uint64
	out  map[uint64]bool
	// waiting are requests whose acks are not all in a write yet; after
	// are the others, each with the write it waits for.
	waiting  []request
	after    []waiter
	finished chan writeEnd
	// away counts the requests answered by the last writes that have not
	// asked again; took is how long the last write took; aligning is how
	// long the requests waiting wait for those (0: they do not).
	away     int
	took     time.Duration
	aligning time.Duration
}

// request is a flushAcksNow call that waits until need acks are in
// writes.
type request struct {
	need uint64
	done chan struct{}
}

// waiter is a flushAcksNow call waiting for the writes up to upTo.
type waiter struct {
	upTo uint64
	done chan struct{}
}

// writeEnd is a write's number and how long it took, as it ends.
type writeEnd struct {
	n    uint64
	took time.Duration
}

// add puts hd in the batch.
func (w *ackWrites) add(hd *hold) {
	w.batch = append(w.batch, hd)
	w.taken++
}

// take moves the acks waiting in acks into the batch, and reports
// whether acks is closed.
func (w *ackWrites) take(acks chan *hold) (closed bool) {
	for {
		select {
		case hd, ok := <-acks:
			if !ok {
				return true
			}
			w.add(hd)
		default:
			return false
		}
	}
}

// start writes the oldest acks of the batch, up to limit.
func (w *ackWrites) start() {
	n, all := min(len(w.batch), w.limit), len(w.batch)
	b := make([]*hold, n)
	copy(b, w.batch)
	w.batch = append(w.batch[:0], w.batch[n:]...)
	clear(w.batch[len(w.batch):all]) // hold nothing in the unused tail
	w.sent += uint64(n)
	w.started++
	w.inFlight++
	num := w.started
	go func() {
		began := time.Now()
		w.c.markDone(b)
		w.finished <- writeEnd{n: num, took: time.Since(began)}
	}()
}

// attach makes the waiting requests whose acks are all in writes wait for
// the writes started so far (or answers them at once if those have ended).
func (w *ackWrites) attach() {
	kept := w.waiting[:0]
	for _, r := range w.waiting {
		switch {
		case r.need > w.sent:
			kept = append(kept, r)
		case w.done >= w.started:
			close(r.done)
		default:
			w.after = append(w.after, waiter{upTo: w.started, done: r.done})
		}
	}
	clear(w.waiting[len(kept):])
	w.waiting = kept
}

// ended records that a write ended and answers the requests whose writes
// have all ended.
func (w *ackWrites) ended(e writeEnd) {
	n := e.n
	w.took = e.took
	w.inFlight--
	if w.out == nil {
		w.out = map[uint64]bool{}
	}
	w.out[n] = true
	for w.out[w.done+1] {
		delete(w.out, w.done+1)
		w.done++
	}
	kept := w.after[:0]
	for _, a := range w.after {
		if a.upTo <= w.done {
			close(a.done)
			w.away++
			continue
		}
		kept = append(kept, a)
	}
	clear(w.after[len(kept):])
	w.after = kept
}

// flushAcksNow writes the acknowledgements of every delivery that has
// ended, and returns when they are stored (or given up): a worker of
// ordered runs waits so for its round's DONE updates, and countAttempt
// before an event that may kill the process starts (a take-over, see
// ErrClaimExpired), so that a crash costs only the deliveries in flight.
func (c *claims) flushAcksNow() {
	done := make(chan struct{})
	select {
	case c.flushNow <- done:
		<-done
	case <-c.ackDone:
	}
}

// closeAcks writes the acknowledgements still waiting and stops ackLoop;
// no delivery may settle after it.
func (c *claims) closeAcks() {
	close(c.acks)
	<-c.ackDone
}
