package outbox

import "time"

// Metrics receives the framework's counters and gauges. Embed NopMetrics to
// implement only some of them (and stay compatible when methods are added).
type Metrics interface {
	// HotEnqueued counts events queued by the hot path.
	HotEnqueued()
	// HotDropped counts events the hot path could not queue (left to the poller).
	HotDropped()
	// ColdEnqueued counts events queued by the poller.
	ColdEnqueued()
	// DispatchSuccess counts successful deliveries.
	DispatchSuccess()
	// DispatchFailure counts failed deliveries that will be retried.
	DispatchFailure()
	// DispatchDead counts events moved to DEAD.
	DispatchDead()
	// StaleUpdates counts status updates that changed nothing because the
	// claim had been taken over (fencing).
	StaleUpdates(n int)
	// QueueDepths reports the current hot and cold queue lengths.
	QueueDepths(hot, cold int)
	// OldestLag reports the age of the oldest event in the last claimed batch.
	OldestLag(d time.Duration)
	// KeyBlocked counts ordered events that went DEAD while a DEAD event
	// holds back the later events of its key (Config.Ordered with
	// DeadBlocksKey); Stats.BlockedKeys counts the keys blocked now.
	KeyBlocked()
}

// NopMetrics implements Metrics doing nothing.
type NopMetrics struct{}

// HotEnqueued does nothing.
func (NopMetrics) HotEnqueued() {}

// HotDropped does nothing.
func (NopMetrics) HotDropped() {}

// ColdEnqueued does nothing.
func (NopMetrics) ColdEnqueued() {}

// DispatchSuccess does nothing.
func (NopMetrics) DispatchSuccess() {}

// DispatchFailure does nothing.
func (NopMetrics) DispatchFailure() {}

// DispatchDead does nothing.
func (NopMetrics) DispatchDead() {}

// StaleUpdates does nothing.
func (NopMetrics) StaleUpdates(int) {}

// QueueDepths does nothing.
func (NopMetrics) QueueDepths(int, int) {}

// OldestLag does nothing.
func (NopMetrics) OldestLag(time.Duration) {}

// KeyBlocked does nothing.
func (NopMetrics) KeyBlocked() {}

func metricsOr(m Metrics) Metrics {
	if m == nil {
		return NopMetrics{}
	}
	return m
}
