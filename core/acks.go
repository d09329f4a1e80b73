package outbox

import (
	"context"
	"time"
)

// ackLoop batches DONE updates: a batch is written when full or AckInterval
// after its first id, and once more on Close.
func (d *Dispatcher) ackLoop() {
	defer close(d.ackDone)
	batch := make([]string, 0, d.cfg.AckBatchSize)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	flush := func() {
		if len(batch) == 0 {
			return
		}
		d.flushAcks(batch)
		d.finish(batch...)
		batch = batch[:0]
	}
	for {
		select {
		case done := <-d.flushNow:
			// Take what is waiting in the channel too: those deliveries
			// ended before the request.
		drain:
			for {
				select {
				case id := <-d.acks:
					batch = append(batch, id)
				default:
					break drain
				}
			}
			timer.Stop()
			flush()
			close(done)
		case id, ok := <-d.acks:
			if !ok {
				flush()
				return
			}
			if len(batch) == 0 {
				timer.Reset(d.cfg.AckInterval)
			}
			batch = append(batch, id)
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
func (d *Dispatcher) flushAcks(ids []string) {
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
