package outbox

import (
	"sync"
	"time"
)

// maxAckGrowth bounds a DONE update at this many times AckBatchSize.
const maxAckGrowth = 8

// ackWriters is how many DONE updates may be in flight at once: during a
// backlog one connection writing acknowledgements one batch after the
// other would cap the drain at what a single connection can update.
const ackWriters = 2

// ackLoop batches DONE updates, which markDone writes: a batch is written
// when full or AckInterval after its first id, and once more on Close. A batch also takes the acks
// that are waiting when it is written (up to maxAckGrowth batches): while
// the database is slow (SQLite's write lock), fewer, larger updates keep up
// with the workers. Up to ackWriters batches are written at once; flushNow
// and Close wait for every one.
func (c *claims) ackLoop() {
	defer close(c.ackDone)
	limit := c.ackBatch * maxAckGrowth
	batch := make([]*hold, 0, c.ackBatch)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	writers := make(chan struct{}, ackWriters)
	var writing sync.WaitGroup
	flush := func() {
		writers <- struct{}{} // while the writers are busy, acks wait in the channel and join this batch
	drain:
		for len(batch) < limit {
			select {
			case hd, ok := <-c.acks:
				if !ok {
					break drain
				}
				batch = append(batch, hd)
			default:
				break drain
			}
		}
		if len(batch) == 0 {
			<-writers
			return
		}
		b := batch
		batch = make([]*hold, 0, c.ackBatch)
		writing.Add(1)
		go func() {
			defer func() { <-writers; writing.Done() }()
			c.markDone(b)
		}()
	}
	// flushAll writes every ack that is waiting and waits until every
	// update in flight is done.
	flushAll := func() {
		for flush(); len(c.acks) > 0; {
			flush()
		}
		writing.Wait()
	}
	for {
		select {
		case done := <-c.flushNow:
			// flush takes what is waiting in the channel too: those
			// deliveries ended before the request.
			timer.Stop()
			flushAll()
			close(done)
		case hd, ok := <-c.acks:
			if !ok {
				flushAll()
				return
			}
			if len(batch) == 0 {
				timer.Reset(c.ackInterval)
			}
			batch = append(batch, hd)
			if len(batch) >= c.ackBatch {
				timer.Stop()
				flush()
			}
		case <-timer.C:
			flush()
		}
	}
}

// flushAcksNow writes the acknowledgements of every delivery that has
// ended, and returns when they are stored (or given up): countAttempt
// calls it before an event that may kill the process starts (a take-over,
// see ErrClaimExpired), so that a crash costs only the deliveries in
// flight.
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
