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
