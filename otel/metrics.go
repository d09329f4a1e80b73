package outboxotel

import (
	"context"
	"sync"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// EventTypeKey, TenantKey, PathKey, QueueKey, SubscriberKey, OutcomeKey
// and DataSourceKey are the attributes of the measurements: the event type,
// the event's tenant (with MetricsOptions.TenantAttribute), the path (hot,
// cold) of outbox.enqueued, the queue (hot, cold) of outbox.queue.depth,
// the subscriber and its outcome (ok, failed) of outbox.subscriber.runs,
// the Client's MetricsOptions.DataSource, a delivery's result (done,
// retry, dead, release) on outbox.delivery.duration, a circuit breaker's
// state (closed, half-open, open), a pause's scope, and the horizon
// guard's kind of holder and check (outbox.Metrics.Horizon).
const (
	EventTypeKey  = attribute.Key("outbox.event_type")
	TenantKey     = attribute.Key("outbox.tenant")
	PathKey       = attribute.Key("outbox.path")
	QueueKey      = attribute.Key("outbox.queue")
	SubscriberKey = attribute.Key("outbox.subscriber")
	OutcomeKey    = attribute.Key("outbox.outcome")
	DataSourceKey = attribute.Key("outbox.datasource")
	ResultKey     = attribute.Key("outbox.result")
	StateKey      = attribute.Key("outbox.breaker.state")
	ScopeKey      = attribute.Key("outbox.pause.scope")
	HolderKey     = attribute.Key("outbox.horizon.holder")
	CheckKey      = attribute.Key("outbox.horizon.check")
)

// results are the values of ResultKey (outbox.Metrics.DeliveryDuration).
var results = [...]string{"done", "retry", "dead", "release"}

// MetricsOptions configures NewMetrics.
type MetricsOptions struct {
	// DataSource, if set, is the outbox.datasource attribute of every
	// measurement: it tells apart the Clients that share a MeterProvider.
	DataSource string
	// Attributes are added to every measurement.
	Attributes []attribute.KeyValue
	// TenantAttribute adds TenantKey (the event's tenant, "" for none) to
	// the measurements that carry EventTypeKey. Off by default: every
	// tenant multiplies those series, so switch it on only for a bounded
	// number of tenants.
	TenantAttribute bool
}

// Metrics implements outbox.Metrics with OpenTelemetry instruments: the
// same measurements as the metrics/prometheus module, named outbox.* with
// dots (outbox.delivered, outbox.delivery.duration, …; see
// docs/observability.md). Durations are in seconds. It is safe for
// concurrent use.
type Metrics struct {
	outbox.NopMetrics // what Metrics gains later does nothing here until it is implemented

	written, enqueued, dropped, delivered, failed, dead metric.Int64Counter
	expired, subscriberRuns, breakerMoves               metric.Int64Counter
	stale, heartbeats, renewed, keyBlocked              metric.Int64Counter
	delivery, latency, claim                            metric.Float64Histogram
	claimSize, ackBatch                                 metric.Int64Histogram
	queue, pending, due, deadNow, blocked               metric.Int64Gauge
	retrying, inFlight, breaker, paused                 metric.Int64Gauge
	oldest                                              metric.Float64Gauge
	// The horizon guard's gauges (outbox.Metrics.Horizon).
	deadTuples, liveTuples, tableSize, holderXIDs, horizonWarn metric.Int64Gauge
	holderAge, vacuumed                                        metric.Float64Gauge

	base   []attribute.KeyValue
	common metric.MeasurementOption
	hot    metric.MeasurementOption
	cold   metric.MeasurementOption
	tenant bool     // MetricsOptions.TenantAttribute
	byType sync.Map // outbox.EventLabels (Tenant "" unless tenant) -> *typeAttrs
}

type typeAttrs struct {
	plain, hot, cold metric.MeasurementOption
	results          [len(results)]metric.MeasurementOption // plain with each ResultKey
	kv               []attribute.KeyValue                   // of plain
}

// NewMetrics creates the instruments on mp's meter for one Client; give
// the result to its Config.Metrics.
func NewMetrics(mp metric.MeterProvider, opts ...MetricsOptions) (*Metrics, error) {
	var o MetricsOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	meter := mp.Meter(ScopeName)
	m := &Metrics{tenant: o.TenantAttribute}
	m.base = append([]attribute.KeyValue(nil), o.Attributes...)
	if o.DataSource != "" {
		m.base = append(m.base, DataSourceKey.String(o.DataSource))
	}
	m.common = metric.WithAttributeSet(attribute.NewSet(m.base...))
	m.hot = metric.WithAttributeSet(attribute.NewSet(append(m.base[:len(m.base):len(m.base)], QueueKey.String("hot"))...))
	m.cold = metric.WithAttributeSet(attribute.NewSet(append(m.base[:len(m.base):len(m.base)], QueueKey.String("cold"))...))
	var err error
	counter := func(name, desc string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = meter.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit("{event}"))
		return c
	}
	seconds := func(name, desc string, buckets []float64) metric.Float64Histogram {
		if err != nil {
			return nil
		}
		var h metric.Float64Histogram
		h, err = meter.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(buckets...))
		return h
	}
	size := func(name, desc string) metric.Int64Histogram {
		if err != nil {
			return nil
		}
		var h metric.Int64Histogram
		h, err = meter.Int64Histogram(name, metric.WithDescription(desc), metric.WithUnit("{event}"),
			metric.WithExplicitBucketBoundaries(0, 1, 2, 5, 10, 25, 50, 100, 200, 400, 800, 2048))
		return h
	}
	gauge := func(name, desc, unit string) metric.Int64Gauge {
		if err != nil {
			return nil
		}
		var g metric.Int64Gauge
		g, err = meter.Int64Gauge(name, metric.WithDescription(desc), metric.WithUnit(unit))
		return g
	}
	latency := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
	m.written = counter("outbox.events.written", "Events inserted by transactions that committed.")
	m.enqueued = counter("outbox.enqueued", "Events queued for delivery in this process, by path (hot, cold).")
	m.dropped = counter("outbox.hot.dropped", "Committed events the hot path could not queue, left to a poller.")
	m.delivered = counter("outbox.delivered", "Deliveries whose listener succeeded.")
	m.failed = counter("outbox.failed", "Deliveries that failed and will be retried.")
	m.dead = counter("outbox.dead", "Events moved to DEAD.")
	m.expired = counter("outbox.expired", "Events that expired before their delivery and went to DEAD undelivered (counted in outbox.dead too).")
	m.breakerMoves = counter("outbox.breaker.transitions", "Moves of a route's circuit breaker into a state (open, half-open, closed).")
	m.subscriberRuns = counter("outbox.subscriber.runs", "Runs of the subscribers of fan-out deliveries (Client.Subscribe), by subscriber and outcome (ok, failed).")
	m.stale = counter("outbox.stale_updates", "Status updates that changed nothing because the claim had been taken over.")
	m.heartbeats = counter("outbox.heartbeats", "Heartbeats that renewed claims.")
	m.renewed = counter("outbox.renewed_claims", "Claims renewed by heartbeats.")
	m.keyBlocked = counter("outbox.key_blocked", "Ordered events that went DEAD and now hold back their ordering key.")
	m.delivery = seconds("outbox.delivery.duration", "Duration of one delivery: interceptors and listener, by result (done, retry, dead, release: cut off by Close).", latency[:14])
	m.latency = seconds("outbox.commit_to_delivery.duration", "Age of the event when its delivery starts.", latency)
	m.claim = seconds("outbox.claim.duration", "Duration of one claim query of the poller.", latency[:13])
	m.claimSize = size("outbox.claim.size", "Events claimed by one claim of the poller.")
	m.ackBatch = size("outbox.ack.batch.size", "Events marked DONE by one batched update.")
	m.queue = gauge("outbox.queue.depth", "Events waiting in the dispatcher's queues, at the last poll.", "{event}")
	m.pending = gauge("outbox.pending", "NEW and RETRY events in the table (due or not), at the last sample.", "{event}")
	m.due = gauge("outbox.due", "Pending events that are due (not waiting for a delay or a retry's backoff), at the last sample.", "{event}")
	m.deadNow = gauge("outbox.dead.current", "DEAD events in the table, at the last sample.", "{event}")
	m.blocked = gauge("outbox.blocked_keys", "Ordering keys held back by a DEAD event, at the last sample.", "{key}")
	m.retrying = gauge("outbox.retrying", "RETRY events in the table (counted in outbox.pending too), at the last sample.", "{event}")
	m.inFlight = gauge("outbox.in_flight", "Pending events claimed by some instance (queued or being delivered), at the last sample.", "{event}")
	m.breaker = gauge("outbox.breaker", "1 for the state a route's circuit breaker is in (closed, half-open, open), 0 for the others.", "1")
	m.paused = gauge("outbox.paused", "1 while this Client obeys a stored pause of the scope, 0 once it is removed.", "1")
	m.deadTuples = gauge("outbox.table.dead_tuples", "Dead row versions in the outbox table, which only vacuum reclaims (PostgreSQL; horizon guard).", "{tuple}")
	m.liveTuples = gauge("outbox.table.live_tuples", "Live rows in the outbox table, as the database's statistics count them (PostgreSQL; horizon guard).", "{tuple}")
	m.tableSize = gauge("outbox.table.size", "Size of the outbox table on disk, indexes and TOAST included (PostgreSQL; horizon guard).", "By")
	m.holderXIDs = gauge("outbox.horizon.holder.xid_age", "How many transactions old the horizon the oldest holder of a kind holds is (0: none of the kind).", "{transaction}")
	m.horizonWarn = gauge("outbox.horizon.warning", "1 while the horizon guard's check (dead_tuples, holder_age, table_size) passes its threshold, 0 otherwise.", "1")
	fgauge := func(name, desc string) metric.Float64Gauge {
		if err != nil {
			return nil
		}
		var g metric.Float64Gauge
		g, err = meter.Float64Gauge(name, metric.WithDescription(desc), metric.WithUnit("s"))
		return g
	}
	m.oldest = fgauge("outbox.oldest_pending.age", "Age of the oldest pending event, at the last sample.")
	m.holderAge = fgauge("outbox.horizon.holder.age", "How long the oldest holder of a kind (transaction, prepared transaction, replication slot, replication connection) has held the vacuum horizon back (0: none of the kind).")
	m.vacuumed = fgauge("outbox.table.last_vacuum", "When the outbox table was last vacuumed, by hand or by autovacuum (Unix time; 0: never) (PostgreSQL; horizon guard).")
	if err != nil {
		return nil, err
	}
	return m, nil
}

// attrs returns the measurement options of l (its event type, and its
// tenant with MetricsOptions.TenantAttribute), built once.
func (m *Metrics) attrs(l outbox.EventLabels) *typeAttrs {
	if !m.tenant {
		l.Tenant = ""
	}
	if a, ok := m.byType.Load(l); ok {
		return a.(*typeAttrs)
	}
	kv := append(m.base[:len(m.base):len(m.base)], EventTypeKey.String(l.Type))
	if m.tenant {
		kv = append(kv, TenantKey.String(l.Tenant))
	}
	a := &typeAttrs{
		kv:    kv,
		plain: metric.WithAttributeSet(attribute.NewSet(kv...)),
		hot:   metric.WithAttributeSet(attribute.NewSet(append(kv[:len(kv):len(kv)], PathKey.String(outbox.PathHot.String()))...)),
		cold:  metric.WithAttributeSet(attribute.NewSet(append(kv[:len(kv):len(kv)], PathKey.String(outbox.PathCold.String()))...)),
	}
	for i, r := range results {
		a.results[i] = metric.WithAttributeSet(attribute.NewSet(append(kv[:len(kv):len(kv)], ResultKey.String(r))...))
	}
	actual, _ := m.byType.LoadOrStore(l, a)
	return actual.(*typeAttrs)
}

// The framework gives no context to metrics: measurements use
// context.Background() (no exemplars).
var bg = context.Background()

// EventsWritten adds n to outbox.events.written.
func (m *Metrics) EventsWritten(l outbox.EventLabels, n int) {
	m.written.Add(bg, int64(n), m.attrs(l).plain)
}

// EventEnqueued adds 1 to outbox.enqueued.
func (m *Metrics) EventEnqueued(l outbox.EventLabels, p outbox.Path) {
	a := m.attrs(l)
	if p == outbox.PathHot {
		m.enqueued.Add(bg, 1, a.hot)
	} else {
		m.enqueued.Add(bg, 1, a.cold)
	}
}

// EventDropped adds 1 to outbox.hot.dropped.
func (m *Metrics) EventDropped(l outbox.EventLabels) { m.dropped.Add(bg, 1, m.attrs(l).plain) }

// Delivered adds 1 to outbox.delivered.
func (m *Metrics) Delivered(l outbox.EventLabels) { m.delivered.Add(bg, 1, m.attrs(l).plain) }

// SubscriberRun adds 1 to outbox.subscriber.runs with the subscriber and
// the outcome (ok, failed).
func (m *Metrics) SubscriberRun(l outbox.EventLabels, name string, ok bool) {
	outcome := "failed"
	if ok {
		outcome = "ok"
	}
	kv := m.attrs(l).kv
	kv = append(kv[:len(kv):len(kv)], SubscriberKey.String(name), OutcomeKey.String(outcome))
	m.subscriberRuns.Add(bg, 1, metric.WithAttributes(kv...))
}

// Failed adds 1 to outbox.failed.
func (m *Metrics) Failed(l outbox.EventLabels) { m.failed.Add(bg, 1, m.attrs(l).plain) }

// Dead adds 1 to outbox.dead.
func (m *Metrics) Dead(l outbox.EventLabels) { m.dead.Add(bg, 1, m.attrs(l).plain) }

// Expired adds 1 to outbox.expired.
func (m *Metrics) Expired(l outbox.EventLabels) { m.expired.Add(bg, 1, m.attrs(l).plain) }

// ListenerDuration does nothing: DeliveryDuration, called for the same
// delivery with its result, records outbox.delivery.duration.
func (m *Metrics) ListenerDuration(outbox.EventLabels, time.Duration) {}

// DeliveryDuration records outbox.delivery.duration with the delivery's
// result (an unknown result is recorded without one).
func (m *Metrics) DeliveryDuration(l outbox.EventLabels, result string, d time.Duration) {
	a := m.attrs(l)
	opt := a.plain
	for i, r := range results {
		if r == result {
			opt = a.results[i]
		}
	}
	m.delivery.Record(bg, d.Seconds(), opt)
}

// breakerStates are the states of a circuit breaker, for outbox.breaker.
var breakerStates = [...]string{outbox.BreakerClosed, outbox.BreakerHalfOpen, outbox.BreakerOpen}

// BreakerState sets outbox.breaker of eventType's route to 1 for state
// and 0 for the others, and adds 1 to outbox.breaker.transitions.
func (m *Metrics) BreakerState(eventType, state string) {
	kv := m.attrs(outbox.EventLabels{Type: eventType}).kv
	for _, st := range breakerStates {
		v := int64(0)
		if st == state {
			v = 1
		}
		m.breaker.Record(bg, v, metric.WithAttributes(append(kv[:len(kv):len(kv)], StateKey.String(st))...))
	}
	m.breakerMoves.Add(bg, 1, metric.WithAttributes(append(kv[:len(kv):len(kv)], StateKey.String(state))...))
}

// Paused sets outbox.paused of scope to 1 while paused, else 0. A
// scope's series stays, at 0, once its pause is removed: scopes are the
// event types operators paused, few.
func (m *Metrics) Paused(scope string, paused bool) {
	v := int64(0)
	if paused {
		v = 1
	}
	m.paused.Record(bg, v, metric.WithAttributes(append(m.base[:len(m.base):len(m.base)], ScopeKey.String(scope))...))
}

// CommitToDelivery records outbox.commit_to_delivery.duration.
func (m *Metrics) CommitToDelivery(l outbox.EventLabels, d time.Duration) {
	m.latency.Record(bg, d.Seconds(), m.attrs(l).plain)
}

// Claimed records outbox.claim.duration and outbox.claim.size.
func (m *Metrics) Claimed(d time.Duration, n int) {
	m.claim.Record(bg, d.Seconds(), m.common)
	m.claimSize.Record(bg, int64(n), m.common)
}

// AckBatch records outbox.ack.batch.size.
func (m *Metrics) AckBatch(n int) { m.ackBatch.Record(bg, int64(n), m.common) }

// Renewed adds 1 to outbox.heartbeats and rows to outbox.renewed_claims.
func (m *Metrics) Renewed(_ int, rows int64) {
	m.heartbeats.Add(bg, 1, m.common)
	m.renewed.Add(bg, rows, m.common)
}

// StaleUpdates adds n to outbox.stale_updates.
func (m *Metrics) StaleUpdates(n int) { m.stale.Add(bg, int64(n), m.common) }

// QueueDepths records outbox.queue.depth.
func (m *Metrics) QueueDepths(hot, cold int) {
	m.queue.Record(bg, int64(hot), m.hot)
	m.queue.Record(bg, int64(cold), m.cold)
}

// KeyBlocked adds 1 to outbox.key_blocked.
func (m *Metrics) KeyBlocked() { m.keyBlocked.Add(bg, 1, m.common) }

// Backlog records outbox.pending, outbox.due, outbox.oldest_pending.age,
// outbox.dead.current, outbox.blocked_keys, outbox.retrying and
// outbox.in_flight.
func (m *Metrics) Backlog(b outbox.Backlog) {
	m.retrying.Record(bg, b.Retrying, m.common)
	m.inFlight.Record(bg, b.InFlight, m.common)
	m.pending.Record(bg, b.Pending, m.common)
	m.due.Record(bg, b.Due, m.common)
	m.oldest.Record(bg, b.OldestPending.Seconds(), m.common)
	m.deadNow.Record(bg, b.Dead, m.common)
	m.blocked.Record(bg, b.BlockedKeys, m.common)
}

// holderKinds and horizonChecks are the values of HolderKey and CheckKey.
var (
	holderKinds   = [...]string{outbox.HolderTransaction, outbox.HolderPrepared, outbox.HolderSlot, outbox.HolderReplication}
	horizonChecks = [...]string{outbox.CheckDeadTuples, outbox.CheckHolderAge, outbox.CheckTableSize}
)

// Horizon records the horizon guard's gauges: outbox.table.dead_tuples,
// outbox.table.live_tuples, outbox.table.size, outbox.table.last_vacuum,
// outbox.horizon.holder.age and outbox.horizon.holder.xid_age of each kind
// of holder (0 for a kind with none), and outbox.horizon.warning of each
// check.
func (m *Metrics) Horizon(r outbox.HorizonReport) {
	m.deadTuples.Record(bg, r.DeadTuples, m.common)
	m.liveTuples.Record(bg, r.LiveTuples, m.common)
	m.tableSize.Record(bg, r.TableSize, m.common)
	last := r.LastVacuum
	if r.LastAutovacuum.After(last) {
		last = r.LastAutovacuum
	}
	at := 0.0
	if !last.IsZero() {
		at = float64(last.UnixNano()) / 1e9
	}
	m.vacuumed.Record(bg, at, m.common)
	for _, kind := range holderKinds {
		var age time.Duration
		var xids int64
		for _, h := range r.Holders {
			if h.Kind == kind {
				age, xids = h.Age, h.XIDAge
				break
			}
		}
		opt := metric.WithAttributes(append(m.base[:len(m.base):len(m.base)], HolderKey.String(kind))...)
		m.holderAge.Record(bg, age.Seconds(), opt)
		m.holderXIDs.Record(bg, xids, opt)
	}
	for _, c := range horizonChecks {
		v := int64(0)
		for _, w := range r.Warnings {
			if w.Check == c {
				v = 1
			}
		}
		m.horizonWarn.Record(bg, v, metric.WithAttributes(append(m.base[:len(m.base):len(m.base)], CheckKey.String(c))...))
	}
}

var _ outbox.Metrics = (*Metrics)(nil)
