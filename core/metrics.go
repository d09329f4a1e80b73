package outbox

import "time"

// Metrics receives the framework's counters, observations and gauges. The
// framework calls it from many goroutines at once: implementations must be
// safe for concurrent use, and fast (they run on the write and delivery
// paths).
//
// Metrics grows: a release may add a method. Every implementation embeds
// NopMetrics, which the interface requires (its unexported method is
// NopMetrics's), so that a method added later does nothing until the
// implementation overrides it, and no implementation stops compiling:
//
//	type myMetrics struct {
//		outbox.NopMetrics // the methods this type does not override
//		delivered atomic.Int64
//	}
//
//	func (m *myMetrics) Delivered(outbox.EventLabels) { m.delivered.Add(1) }
//
// Counters and observations about events carry the event's EventLabels:
// its type (Envelope.Type) and its tenant (Envelope.TenantID), where there
// is one. A Client has no name of its own: a Metrics shared by
// several Clients (one per data source) tells them apart by being one
// instance per Client, each with its own constant label (see the
// metrics/prometheus and otel modules).
type Metrics interface {
	// EventsWritten counts n events of l inserted by a transaction
	// that committed.
	EventsWritten(l EventLabels, n int)
	// EventEnqueued counts an event queued for delivery in this process,
	// by the hot path right after commit (PathHot) or by the poller
	// (PathCold).
	EventEnqueued(l EventLabels, path Path)
	// EventDropped counts a committed event the hot path could not queue
	// (its queue was full, or the dispatcher was closing): it is left to a
	// poller.
	EventDropped(l EventLabels)
	// Delivered counts a delivery whose listener succeeded.
	Delivered(l EventLabels)
	// Failed counts a delivery that failed and will be retried. A
	// listener's RetryAfter is not a failure and is not counted.
	Failed(l EventLabels)
	// SubscriberRun counts one subscriber's part of a fan-out delivery
	// (Registry.Subscribe): whether the subscriber called name succeeded.
	// The event's own outcome is counted by Delivered, Failed or Dead.
	SubscriberRun(l EventLabels, name string, ok bool)
	// Dead counts an event moved to DEAD: its last attempt failed, it has
	// no listener, it cannot be decoded, it expired, or its deliveries
	// kept ending without an outcome.
	Dead(l EventLabels)
	// Expired counts an event that expired before its delivery
	// (WithExpiresAt): it went to DEAD, undelivered, and is counted by
	// Dead too.
	Expired(l EventLabels)
	// ListenerDuration observes how long one delivery ran: interceptors
	// and listener, whatever its outcome.
	ListenerDuration(l EventLabels, d time.Duration)
	// CommitToDelivery observes, when a delivery starts, how long ago its
	// event was inserted (now minus its created_at): the time from commit
	// to delivery, plus the length of the writing transaction after the
	// insert. Retries and delayed events report their whole age.
	CommitToDelivery(l EventLabels, d time.Duration)
	// Claimed observes one claim: a poller's, or a worker's that continues
	// runs (RunContinuer): how long the query took and how many events it
	// claimed (also 0).
	Claimed(d time.Duration, n int)
	// AckBatch observes the size of one batched DONE update.
	AckBatch(n int)
	// Renewed counts one heartbeat: the claims it renewed (held) and the
	// rows the update changed.
	Renewed(held int, rows int64)
	// StaleUpdates counts status updates that changed nothing because the
	// claim had been taken over (fencing).
	StaleUpdates(n int)
	// QueueDepths reports the current hot and cold queue lengths, at each
	// poll.
	QueueDepths(hot, cold int)
	// KeyBlocked counts ordered events that went DEAD while a DEAD event
	// holds back the later events of its key (Config.Ordered with
	// DeadBlocksKey); Backlog.BlockedKeys counts the keys blocked now.
	KeyBlocked()
	// Backlog reports the state of the table, sampled by the Client every
	// Config.MetricsInterval.
	Backlog(b Backlog)
	// DeliveryDuration observes how long one delivery ran, as
	// ListenerDuration does, with its result: "done", "retry", "dead" or
	// "release" (cut off by Close).
	DeliveryDuration(l EventLabels, result string, d time.Duration)
	// BreakerState reports that the circuit breaker of the route of
	// eventType moved to state (BreakerOpen, BreakerHalfOpen,
	// BreakerClosed).
	BreakerState(eventType, state string)
	// Paused reports that this Client started (paused) or stopped
	// obeying a stored pause of scope (an event type, or PauseAll).
	Paused(scope string, paused bool)
	// Horizon reports a sample of the horizon guard (Config.HorizonInterval):
	// the table's dead and live tuples, its size, what holds the vacuum
	// horizon back, and the thresholds passed. Like Backlog, every Client
	// on a table sees the same: aggregate with max.
	Horizon(r HorizonReport)

	// embedsNopMetrics is NopMetrics's: implementations embed it (see
	// above).
	embedsNopMetrics()
}

// EventLabels are what a counter or an observation about events knows of
// them: their type and their tenant. An implementation picks which become
// labels; the tenant is best left out unless asked for (tenants can be
// many, and every one multiplies the series), as the metrics/prometheus
// and otel modules do.
type EventLabels struct {
	// Type is the event type (Envelope.Type); "" for a stored event that
	// cannot be decoded.
	Type string
	// Tenant is the event's tenant (Envelope.TenantID); "" for none.
	Tenant string
}

// labelsOf returns the EventLabels of e.
func labelsOf(e Envelope) EventLabels { return EventLabels{Type: e.Type(), Tenant: e.TenantID()} }

// Path says how an event reached the dispatcher.
type Path uint8

const (
	// PathHot is the hot path: queued in the writing process right after
	// commit.
	PathHot Path = iota
	// PathCold is the poller: claimed from the table.
	PathCold
)

// String returns "hot" or "cold".
func (p Path) String() string {
	if p == PathHot {
		return "hot"
	}
	return "cold"
}

// Backlog is a sample of the outbox table's state, taken with Store.Stats.
// Every Client on a table sees the same table: aggregate these gauges with
// max, not sum, across instances.
type Backlog struct {
	// Pending counts NEW and RETRY events, due or not yet due (delayed
	// events and retries waiting for their backoff included).
	Pending int64
	// Due counts the pending events that are due (Stats.Due): Pending
	// minus those waiting for a delay or a retry's backoff. A Due that
	// stays high means delivery does not keep up.
	Due int64
	// Dead counts DEAD events.
	Dead int64
	// OldestPending is the age of the oldest pending event (0 if none).
	OldestPending time.Duration
	// BlockedKeys counts the ordering keys held back by a DEAD event (see
	// Stats.BlockedKeys); 0 unless the table has ordered events.
	BlockedKeys int64
	// Retrying counts the RETRY events (Pending includes them), InFlight
	// the pending events claimed by some instance: queued or being
	// delivered (Stats.Claimed).
	Retrying int64
	InFlight int64
}

// NopMetrics implements Metrics doing nothing. Every implementation of
// Metrics embeds it: the methods it does not override, and those added to
// Metrics later, do nothing.
type NopMetrics struct{}

func (NopMetrics) embedsNopMetrics() {}

// EventsWritten does nothing.
func (NopMetrics) EventsWritten(EventLabels, int) {}

// EventEnqueued does nothing.
func (NopMetrics) EventEnqueued(EventLabels, Path) {}

// EventDropped does nothing.
func (NopMetrics) EventDropped(EventLabels) {}

// Delivered does nothing.
func (NopMetrics) Delivered(EventLabels) {}

// Failed does nothing.
func (NopMetrics) Failed(EventLabels) {}

// SubscriberRun does nothing.
func (NopMetrics) SubscriberRun(EventLabels, string, bool) {}

// Dead does nothing.
func (NopMetrics) Dead(EventLabels) {}

// Expired does nothing.
func (NopMetrics) Expired(EventLabels) {}

// ListenerDuration does nothing.
func (NopMetrics) ListenerDuration(EventLabels, time.Duration) {}

// CommitToDelivery does nothing.
func (NopMetrics) CommitToDelivery(EventLabels, time.Duration) {}

// Claimed does nothing.
func (NopMetrics) Claimed(time.Duration, int) {}

// AckBatch does nothing.
func (NopMetrics) AckBatch(int) {}

// Renewed does nothing.
func (NopMetrics) Renewed(int, int64) {}

// StaleUpdates does nothing.
func (NopMetrics) StaleUpdates(int) {}

// QueueDepths does nothing.
func (NopMetrics) QueueDepths(int, int) {}

// KeyBlocked does nothing.
func (NopMetrics) KeyBlocked() {}

// Backlog does nothing.
func (NopMetrics) Backlog(Backlog) {}

// DeliveryDuration does nothing.
func (NopMetrics) DeliveryDuration(EventLabels, string, time.Duration) {}

// BreakerState does nothing.
func (NopMetrics) BreakerState(string, string) {}

// Paused does nothing.
func (NopMetrics) Paused(string, bool) {}

// Horizon does nothing.
func (NopMetrics) Horizon(HorizonReport) {}

// metricsOr returns m, or NopMetrics if m is nil.
func metricsOr(m Metrics) Metrics {
	if m == nil {
		return NopMetrics{}
	}
	return m
}

// isNop reports whether m records nothing, so the Client need not sample
// the table for it.
func isNop(m Metrics) bool {
	switch m.(type) {
	case NopMetrics, *NopMetrics:
		return true
	}
	return false
}
