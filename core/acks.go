package outbox

import (
	"context"
	"sync"
	"time"
)

// maxAckGrowth bounds a DONE update at this many times AckBatchSize.
const maxAckGrowth = 8

// ackWriters is how many DONE updates may be in flight at once: during a
// backlog one connection writing acknowledgements one batch after the
// other would cap the drain at what a single connection can update.
const ackWriters = 2

// ackLoop batches DONE updates: a batch is written when full or AckInterval
// after its first id, and once more on Close. A batch also takes the acks
// that are waiting when it is written (up to maxAckGrowth batches): while
// the database is slow (SQLite's write lock), fewer, larger updates keep up
// with the workers. Up to ackWriters batches are written at once; flushNow
// and Close wait for every one.
func (d *Dispatcher) ackLoop() {
	defer close(d.ackDone)
	limit := d.cfg.AckBatchSize * maxAckGrowth
	batch := make([]*hold, 0, d.cfg.AckBatchSize)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	writers := make(chan struct{}, ackWriters)
	var writing sync.WaitGroup
	flush := func() {
		writers <- struct{}{} // while the writers are busy, acks wait in the channel and join this batch
	drain:
		for len(batch) < limit {
			select {
			case hd, ok := <-d.acks:
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
		batch = make([]*hold, 0, d.cfg.AckBatchSize)
		writing.Add(1)
		go func() {
			defer func() { <-writers; writing.Done() }()
			d.flushAcks(b)
			d.finish(b...)
		}()
	}
	// flushAll writes every ack that is waiting and waits until every
	// update in flight is done.
	flushAll := func() {
		for flush(); len(d.acks) > 0; {
			flush()
		}
		writing.Wait()
	}
	for {
		select {
		case done := <-d.flushNow:
			// flush takes what is waiting in the channel too: those
			// deliveries ended before the request.
			timer.Stop()
			flushAll()
			close(done)
		case hd, ok := <-d.acks:
			if !ok {
				flushAll()
				return
			}
			if len(batch) == 0 {
				timer.Reset(d.cfg.AckInterval)
			}
			batch = append(batch, hd)
			if len(batch) >= d.cfg.AckBatchSize {
				timer.Stop()
				flush()
			}
		case <-timer.C:
			flush()
		}
	}
}

// flushAcks writes one batch, retrying database errors (storeRetry). If it
// still fails the rows stay claimed by this owner and are delivered again.
func (d *Dispatcher) flushAcks(batch []*hold) {
	ids := make([]string, len(batch))
	for i, hd := range batch {
		ids[i] = hd.id
	}
	d.metrics.AckBatch(len(ids))
	var n int64
	err := storeRetry(context.Background(), func(ctx context.Context) (err error) {
		n, err = d.cfg.Store.MarkDone(ctx, d.owner, ids, utcNow(d.clock))
		return err
	})
	if err != nil {
		d.log.Error("outbox: could not mark events DONE; they will be delivered again", "count", len(ids), "error", err)
		return
	}
	if stale := len(ids) - int(n); stale > 0 {
		d.metrics.StaleUpdates(stale)
		d.log.Warn("outbox: some DONE updates found their claim taken over", "stale", stale, "batch", len(ids))
	}
	for _, hd := range batch {
		if hd.ordered { // the next event of its key may go out now
			d.wakePoller()
			break
		}
	}
}

// flushAcksNow writes the acknowledgements of every delivery that has
// ended, and returns when they are stored (or given up). A worker calls it
// before it starts an event that may kill the process (a take-over, see
// ErrClaimExpired), so that a crash costs only the deliveries in flight.
func (d *Dispatcher) flushAcksNow() {
	done := make(chan struct{})
	select {
	case d.flushNow <- done:
		<-done
	case <-d.ackDone:
	}
}
