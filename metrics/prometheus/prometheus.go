package outboxprom

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	prom "github.com/prometheus/client_golang/prometheus"
)

// DataSourceLabel is the constant label that tells the Clients sharing a
// registry apart.
const DataSourceLabel = "datasource"

// TenantLabelName is the label of the event's tenant, added to the
// per-event series when Options.TenantLabel is set ("" for events without
// a tenant).
const TenantLabelName = "tenant"

// DefaultDataSource is the DataSourceLabel value of a Metrics whose
// Options name no data source.
const DefaultDataSource = "default"

// DefaultMaxEventTypes is the default of Options.MaxEventTypes.
const DefaultMaxEventTypes = 1000

// OverflowLabel is the event_type (and tenant) label value of the series
// that count the events of the types beyond Options.MaxEventTypes.
const OverflowLabel = "_other"

// Default buckets, in seconds and in events.
var (
	// DefaultDeliveryBuckets spans fast listeners (1ms) to the default
	// ListenerTimeout (30s).
	DefaultDeliveryBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	// DefaultLatencyBuckets spans the hot path (a few ms) to retries and
	// delayed events (an hour).
	DefaultLatencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
	// DefaultClaimBuckets spans claim queries from 1ms to 10s.
	DefaultClaimBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10}
	// DefaultSizeBuckets spans claim and ack batch sizes from 0 to the
	// largest claim (8 × PollBatchSize) and ack (8 × AckBatchSize) with
	// the defaults.
	DefaultSizeBuckets = []float64{0, 1, 2, 5, 10, 25, 50, 100, 200, 400, 800, 2048}
)

// Options configures New.
type Options struct {
	// Registerer receives the collector (default
	// prometheus.DefaultRegisterer).
	Registerer prom.Registerer
	// DataSource names the Client in the DataSourceLabel label (default
	// DefaultDataSource). Every Client registered on one Registerer needs
	// its own.
	DataSource string
	// ConstLabels are added to every series (for example the service's
	// name); they must not include DataSourceLabel.
	ConstLabels prom.Labels
	// Namespace prefixes every name (default "outbox").
	Namespace string
	// TenantLabel adds the TenantLabelName label (the event's tenant) to
	// the series that have an event_type label. Off by default: every
	// tenant multiplies those series, so switch it on only for a bounded
	// number of tenants.
	TenantLabel bool
	// MaxEventTypes caps the distinct event types (event type and tenant
	// pairs with TenantLabel) that get series of their own, in every
	// family with an event_type label (default DefaultMaxEventTypes; it
	// must not be negative). Each type is a few kilobytes of series in
	// every scrape and in the process, and a type made of request data
	// would grow them without end: the events of the types seen after the
	// first MaxEventTypes are counted under event_type="_other"
	// (OverflowLabel; its tenant label too), so that totals stay right,
	// and Logger gets one warning the first time.
	MaxEventTypes int
	// Logger receives the warning when MaxEventTypes is reached (default
	// slog.Default()).
	Logger *slog.Logger
	// DeliveryBuckets, LatencyBuckets, ClaimBuckets and SizeBuckets
	// override the histograms' buckets (defaults DefaultDeliveryBuckets,
	// DefaultLatencyBuckets, DefaultClaimBuckets and DefaultSizeBuckets).
	DeliveryBuckets, LatencyBuckets, ClaimBuckets, SizeBuckets []float64
}

// Metrics implements outbox.Metrics with Prometheus collectors; it is
// itself a prometheus.Collector, registered by New. Give it to one
// Client's Config.Metrics. It is safe for concurrent use.
type Metrics struct {
	outbox.NopMetrics // what Metrics gains later does nothing here until it is implemented
	reg               prom.Registerer
	tenant            bool // Options.TenantLabel
	maxTypes          int64
	logger            *slog.Logger
	dataSource        string

	written, enqueued, dropped, delivered, failed, dead *prom.CounterVec
	expired, subscriberRuns                             *prom.CounterVec
	delivery, latency                                   *prom.HistogramVec
	claim, claimSize, ackBatch                          prom.Histogram
	stale, heartbeats, renewed, keyBlocked              prom.Counter
	queue                                               *prom.GaugeVec
	pending, due, oldest, deadNow, blocked, sampled     prom.Gauge
	retrying, inFlight                                  prom.Gauge
	// breaker is 1 for the state a route's circuit breaker is in and 0
	// for the others; breakerMoves counts the moves into each state;
	// paused is 1 for each scope this Client obeys a pause of.
	breaker, paused *prom.GaugeVec
	breakerMoves    *prom.CounterVec
	// The horizon guard's gauges (outbox.Metrics.Horizon).
	deadTuples, liveTuples, tableSize, vacuumed prom.Gauge
	holderAge, holderXIDs, horizonWarn          *prom.GaugeVec

	byType   sync.Map // outbox.EventLabels (Tenant "" unless tenant) -> *typeSeries
	mu       sync.Mutex
	types    int64                      // entries of byType, at most maxTypes (under mu)
	overflow atomic.Pointer[typeSeries] // the OverflowLabel series, made (under mu) with the first type over the cap
}

// typeSeries are the series of one event type (and tenant), looked up once.
type typeSeries struct {
	vals                                                 []string // the label values: event type, tenant with TenantLabel
	written, hot, cold, dropped, delivered, failed, dead prom.Counter
	expired                                              prom.Counter
	latency                                              prom.Observer
	// delivery holds the outbox_delivery_seconds series of each known
	// result (results), made at its first observation.
	delivery [len(results)]atomic.Pointer[prom.Observer]
}

// results are the values of the result label of outbox_delivery_seconds
// (see outbox.Metrics.DeliveryDuration).
var results = [...]string{"done", "retry", "dead", "release"}

// New creates the collectors of one Client and registers them on
// opts.Registerer. Registering a second Metrics with the same DataSource
// (and ConstLabels) on one Registerer fails.
func New(opts Options) (*Metrics, error) {
	if opts.Registerer == nil {
		opts.Registerer = prom.DefaultRegisterer
	}
	if opts.Namespace == "" {
		opts.Namespace = "outbox"
	}
	if opts.DataSource == "" {
		opts.DataSource = DefaultDataSource
	}
	if opts.MaxEventTypes < 0 {
		return nil, fmt.Errorf("outbox prometheus: MaxEventTypes %d: want 0 (the default, %d) or more", opts.MaxEventTypes, DefaultMaxEventTypes)
	}
	if opts.MaxEventTypes == 0 {
		opts.MaxEventTypes = DefaultMaxEventTypes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if _, ok := opts.ConstLabels[DataSourceLabel]; ok {
		return nil, fmt.Errorf("outbox prometheus: ConstLabels must not set %q: use Options.DataSource", DataSourceLabel)
	}
	labels := prom.Labels{DataSourceLabel: opts.DataSource}
	for k, v := range opts.ConstLabels {
		labels[k] = v
	}
	ns := opts.Namespace
	// The labels of the per-event series: event_type, the tenant if asked
	// for, then extra.
	event := func(extra ...string) []string {
		vars := []string{"event_type"}
		if opts.TenantLabel {
			vars = append(vars, TenantLabelName)
		}
		return append(vars, extra...)
	}
	counter := func(name, help string, extra ...string) *prom.CounterVec {
		return prom.NewCounterVec(prom.CounterOpts{Namespace: ns, Name: name, Help: help, ConstLabels: labels}, event(extra...))
	}
	hist := func(name, help string, buckets, def []float64) *prom.HistogramVec {
		return prom.NewHistogramVec(prom.HistogramOpts{Namespace: ns, Name: name, Help: help, ConstLabels: labels, Buckets: or(buckets, def)}, event())
	}
	gauge := func(name, help string) prom.Gauge {
		return prom.NewGauge(prom.GaugeOpts{Namespace: ns, Name: name, Help: help, ConstLabels: labels})
	}
	single := func(name, help string, buckets, def []float64) prom.Histogram {
		return prom.NewHistogram(prom.HistogramOpts{Namespace: ns, Name: name, Help: help, ConstLabels: labels, Buckets: or(buckets, def)})
	}
	one := func(name, help string) prom.Counter {
		return prom.NewCounter(prom.CounterOpts{Namespace: ns, Name: name, Help: help, ConstLabels: labels})
	}
	m := &Metrics{
		reg:        opts.Registerer,
		tenant:     opts.TenantLabel,
		maxTypes:   int64(opts.MaxEventTypes),
		logger:     opts.Logger,
		dataSource: opts.DataSource,
		written:    counter("events_written_total", "Events inserted by transactions that committed."),
		enqueued:   counter("enqueued_total", "Events queued for delivery in this process, by path (hot: right after commit, cold: claimed by the poller).", "path"),
		dropped:    counter("hot_dropped_total", "Committed events the hot path could not queue, left to a poller."),
		delivered:  counter("delivered_total", "Deliveries whose listener succeeded."),
		failed:     counter("failed_total", "Deliveries that failed and will be retried."),
		dead:       counter("dead_total", "Events moved to DEAD."),
		expired:    counter("expired_total", "Events that expired before their delivery and went to DEAD undelivered (counted in dead_total too)."),
		subscriberRuns: counter("subscriber_runs_total", "Runs of the subscribers of fan-out deliveries (Client.Subscribe), by subscriber and outcome (ok, failed).",
			"subscriber", "outcome"),
		delivery: prom.NewHistogramVec(prom.HistogramOpts{Namespace: ns, Name: "delivery_seconds", ConstLabels: labels, Buckets: or(opts.DeliveryBuckets, DefaultDeliveryBuckets),
			Help: "Duration of one delivery: interceptors and listener, by result (done, retry, dead, release: cut off by Close)."}, event("result")),
		latency:    hist("commit_to_delivery_seconds", "Age of the event when its delivery starts: from insert (commit) to delivery.", opts.LatencyBuckets, DefaultLatencyBuckets),
		claim:      single("claim_seconds", "Duration of one claim query of the poller.", opts.ClaimBuckets, DefaultClaimBuckets),
		claimSize:  single("claim_size", "Events claimed by one claim of the poller.", opts.SizeBuckets, DefaultSizeBuckets),
		ackBatch:   single("ack_batch_size", "Events marked DONE by one batched update.", opts.SizeBuckets, DefaultSizeBuckets),
		stale:      one("stale_updates_total", "Status updates that changed nothing because the claim had been taken over."),
		heartbeats: one("heartbeats_total", "Heartbeats that renewed claims."),
		renewed:    one("renewed_claims_total", "Claims renewed by heartbeats."),
		keyBlocked: one("key_blocked_total", "Ordered events that went DEAD and now hold back their ordering key."),
		queue: prom.NewGaugeVec(prom.GaugeOpts{Namespace: ns, Name: "queue_depth", Help: "Events waiting in the dispatcher's queues, at the last poll.", ConstLabels: labels},
			[]string{"queue"}),
		pending:  gauge("pending", "NEW and RETRY events in the table (due or not), at the last sample."),
		due:      gauge("due", "Pending events that are due (not waiting for a delay or a retry's backoff), at the last sample."),
		oldest:   gauge("oldest_pending_seconds", "Age of the oldest pending event, at the last sample (0 if none)."),
		deadNow:  gauge("dead", "DEAD events in the table, at the last sample."),
		blocked:  gauge("blocked_keys", "Ordering keys held back by a DEAD event, at the last sample."),
		sampled:  gauge("backlog_sampled_timestamp_seconds", "When the backlog gauges were last sampled (Unix time)."),
		retrying: gauge("retrying", "RETRY events in the table (counted in pending too), at the last sample."),
		inFlight: gauge("in_flight", "Pending events claimed by some instance on the table (queued or being delivered), at the last sample."),
		breaker: prom.NewGaugeVec(prom.GaugeOpts{Namespace: ns, Name: "breaker_state", ConstLabels: labels,
			Help: "The state of a route's circuit breaker in this Client: 1 for its state (closed, half-open, open), 0 for the others."}, []string{"event_type", "state"}),
		breakerMoves: prom.NewCounterVec(prom.CounterOpts{Namespace: ns, Name: "breaker_transitions_total", ConstLabels: labels,
			Help: "Moves of a route's circuit breaker into state (open, half-open, closed)."}, []string{"event_type", "state"}),
		paused: prom.NewGaugeVec(prom.GaugeOpts{Namespace: ns, Name: "paused", ConstLabels: labels,
			Help: "1 for each scope (an event type, or * for every type) of a stored pause this Client obeys; the series goes with the pause."}, []string{"scope"}),
		deadTuples: gauge("table_dead_tuples", "Dead row versions in the outbox table, which only vacuum reclaims (PostgreSQL; horizon guard)."),
		liveTuples: gauge("table_live_tuples", "Live rows in the outbox table, as the database's statistics count them (PostgreSQL; horizon guard)."),
		tableSize:  gauge("table_size_bytes", "Size of the outbox table on disk, indexes and TOAST included (PostgreSQL; horizon guard)."),
		vacuumed: gauge("table_last_vacuum_timestamp_seconds",
			"When the outbox table was last vacuumed, by hand or by autovacuum (Unix time; 0: never) (PostgreSQL; horizon guard)."),
		holderAge: prom.NewGaugeVec(prom.GaugeOpts{Namespace: ns, Name: "horizon_holder_age_seconds", ConstLabels: labels,
			Help: "How long the oldest holder of each kind (transaction, prepared transaction, replication slot, replication connection) has held the vacuum horizon back; a kind with none has no series."}, []string{"kind"}),
		holderXIDs: prom.NewGaugeVec(prom.GaugeOpts{Namespace: ns, Name: "horizon_holder_xid_age", ConstLabels: labels,
			Help: "How many transactions old the horizon the oldest holder of each kind holds is; a kind with none has no series."}, []string{"kind"}),
		horizonWarn: prom.NewGaugeVec(prom.GaugeOpts{Namespace: ns, Name: "horizon_warning", ConstLabels: labels,
			Help: "1 while the horizon guard's check (dead_tuples, holder_age, table_size) passes its threshold, 0 otherwise."}, []string{"check"}),
	}
	if err := opts.Registerer.Register(m); err != nil {
		var are prom.AlreadyRegisteredError
		if errors.As(err, &are) {
			return nil, fmt.Errorf("outbox prometheus: data source %q is registered already: give each Client its own Options.DataSource: %w", opts.DataSource, err)
		}
		return nil, fmt.Errorf("outbox prometheus: register: %w", err)
	}
	return m, nil
}

// or returns buckets, or def when there are none.
func or(buckets, def []float64) []float64 {
	if buckets == nil {
		return def
	}
	return buckets
}

// Unregister removes the collector from the Registerer New used.
func (m *Metrics) Unregister() bool { return m.reg.Unregister(m) }

func (m *Metrics) collectors() []prom.Collector {
	return []prom.Collector{m.written, m.enqueued, m.dropped, m.delivered, m.failed, m.dead, m.expired, m.subscriberRuns, m.delivery, m.latency,
		m.claim, m.claimSize, m.ackBatch, m.stale, m.heartbeats, m.renewed, m.keyBlocked, m.queue,
		m.pending, m.due, m.oldest, m.deadNow, m.blocked, m.sampled, m.retrying, m.inFlight, m.breaker, m.breakerMoves, m.paused,
		m.deadTuples, m.liveTuples, m.tableSize, m.vacuumed, m.holderAge, m.holderXIDs, m.horizonWarn}
}

// Describe sends the descriptors of every series.
func (m *Metrics) Describe(ch chan<- *prom.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect sends the current values of every series.
func (m *Metrics) Collect(ch chan<- prom.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// series returns the series of l (its event type, and its tenant with
// Options.TenantLabel), creating them once; beyond Options.MaxEventTypes,
// the OverflowLabel series.
func (m *Metrics) series(l outbox.EventLabels) *typeSeries {
	if !m.tenant {
		l.Tenant = ""
	}
	if s, ok := m.byType.Load(l); ok {
		return s.(*typeSeries)
	}
	if s := m.overflow.Load(); s != nil { // full: no new type gets series
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.byType.Load(l); ok {
		return s.(*typeSeries)
	}
	if m.types >= m.maxTypes {
		return m.overflowSeries()
	}
	s := m.newSeries(l)
	m.byType.Store(l, s)
	m.types++
	return s
}

// overflowSeries returns the OverflowLabel series, and warns once. The
// caller holds mu.
func (m *Metrics) overflowSeries() *typeSeries {
	s := m.overflow.Load()
	if s == nil {
		s = m.newSeries(outbox.EventLabels{Type: OverflowLabel, Tenant: OverflowLabel})
		m.overflow.Store(s)
		m.logger.Warn("outbox prometheus: more distinct event types than Options.MaxEventTypes; the events of the others are counted under event_type=\""+OverflowLabel+"\"",
			"datasource", m.dataSource, "max_event_types", m.maxTypes)
	}
	return s
}

// newSeries makes the series of l.
func (m *Metrics) newSeries(l outbox.EventLabels) *typeSeries {
	vals := []string{l.Type}
	if m.tenant {
		vals = append(vals, l.Tenant)
	}
	path := func(p outbox.Path) []string { return append(vals[:len(vals):len(vals)], p.String()) }
	return &typeSeries{
		vals:    vals,
		written: m.written.WithLabelValues(vals...), hot: m.enqueued.WithLabelValues(path(outbox.PathHot)...),
		cold: m.enqueued.WithLabelValues(path(outbox.PathCold)...), dropped: m.dropped.WithLabelValues(vals...),
		delivered: m.delivered.WithLabelValues(vals...), failed: m.failed.WithLabelValues(vals...), dead: m.dead.WithLabelValues(vals...),
		expired: m.expired.WithLabelValues(vals...), latency: m.latency.WithLabelValues(vals...),
	}
}

// EventsWritten adds n to outbox_events_written_total.
func (m *Metrics) EventsWritten(l outbox.EventLabels, n int) { m.series(l).written.Add(float64(n)) }

// EventEnqueued increments outbox_enqueued_total.
func (m *Metrics) EventEnqueued(l outbox.EventLabels, p outbox.Path) {
	s := m.series(l)
	if p == outbox.PathHot {
		s.hot.Inc()
	} else {
		s.cold.Inc()
	}
}

// EventDropped increments outbox_hot_dropped_total.
func (m *Metrics) EventDropped(l outbox.EventLabels) { m.series(l).dropped.Inc() }

// Delivered increments outbox_delivered_total.
func (m *Metrics) Delivered(l outbox.EventLabels) { m.series(l).delivered.Inc() }

// SubscriberRun increments outbox_subscriber_runs_total of the subscriber
// and outcome.
func (m *Metrics) SubscriberRun(l outbox.EventLabels, name string, ok bool) {
	vals := m.series(l).vals
	outcome := "failed"
	if ok {
		outcome = "ok"
	}
	m.subscriberRuns.WithLabelValues(append(vals[:len(vals):len(vals)], name, outcome)...).Inc()
}

// Failed increments outbox_failed_total.
func (m *Metrics) Failed(l outbox.EventLabels) { m.series(l).failed.Inc() }

// Dead increments outbox_dead_total.
func (m *Metrics) Dead(l outbox.EventLabels) { m.series(l).dead.Inc() }

// Expired increments outbox_expired_total.
func (m *Metrics) Expired(l outbox.EventLabels) { m.series(l).expired.Inc() }

// ListenerDuration does nothing: DeliveryDuration, which the Client calls
// for the same delivery with its result, observes outbox_delivery_seconds.
func (m *Metrics) ListenerDuration(outbox.EventLabels, time.Duration) {}

// DeliveryDuration observes outbox_delivery_seconds of the delivery's
// result.
func (m *Metrics) DeliveryDuration(l outbox.EventLabels, result string, d time.Duration) {
	s := m.series(l)
	i := 0
	for i < len(results) && results[i] != result {
		i++
	}
	if i == len(results) { // a result this version does not know: no cache
		m.delivery.WithLabelValues(append(s.vals[:len(s.vals):len(s.vals)], result)...).Observe(d.Seconds())
		return
	}
	o := s.delivery[i].Load()
	if o == nil {
		obs := m.delivery.WithLabelValues(append(s.vals[:len(s.vals):len(s.vals)], result)...)
		s.delivery[i].CompareAndSwap(nil, &obs)
		o = s.delivery[i].Load()
	}
	(*o).Observe(d.Seconds())
}

// BreakerState sets outbox_breaker_state of eventType's route to 1 for
// state and 0 for the other states, and increments
// outbox_breaker_transitions_total of state.
func (m *Metrics) BreakerState(eventType, state string) {
	for _, s := range []string{outbox.BreakerClosed, outbox.BreakerHalfOpen, outbox.BreakerOpen} {
		v := 0.0
		if s == state {
			v = 1
		}
		m.breaker.WithLabelValues(eventType, s).Set(v)
	}
	m.breakerMoves.WithLabelValues(eventType, state).Inc()
}

// Paused sets outbox_paused of scope to 1 while this Client obeys its
// pause, and removes the series when it no longer does.
func (m *Metrics) Paused(scope string, paused bool) {
	if paused {
		m.paused.WithLabelValues(scope).Set(1)
		return
	}
	m.paused.DeleteLabelValues(scope)
}

// CommitToDelivery observes outbox_commit_to_delivery_seconds.
func (m *Metrics) CommitToDelivery(l outbox.EventLabels, d time.Duration) {
	m.series(l).latency.Observe(d.Seconds())
}

// Claimed observes outbox_claim_seconds and outbox_claim_size.
func (m *Metrics) Claimed(d time.Duration, n int) {
	m.claim.Observe(d.Seconds())
	m.claimSize.Observe(float64(n))
}

// AckBatch observes outbox_ack_batch_size.
func (m *Metrics) AckBatch(n int) { m.ackBatch.Observe(float64(n)) }

// Renewed increments outbox_heartbeats_total and adds the changed rows to
// outbox_renewed_claims_total.
func (m *Metrics) Renewed(_ int, rows int64) {
	m.heartbeats.Inc()
	m.renewed.Add(float64(rows))
}

// StaleUpdates adds n to outbox_stale_updates_total.
func (m *Metrics) StaleUpdates(n int) { m.stale.Add(float64(n)) }

// QueueDepths sets outbox_queue_depth.
func (m *Metrics) QueueDepths(hot, cold int) {
	m.queue.WithLabelValues("hot").Set(float64(hot))
	m.queue.WithLabelValues("cold").Set(float64(cold))
}

// KeyBlocked increments outbox_key_blocked_total.
func (m *Metrics) KeyBlocked() { m.keyBlocked.Inc() }

// Backlog sets outbox_pending, outbox_due, outbox_oldest_pending_seconds,
// outbox_dead, outbox_blocked_keys, outbox_retrying and outbox_in_flight.
func (m *Metrics) Backlog(b outbox.Backlog) {
	m.retrying.Set(float64(b.Retrying))
	m.inFlight.Set(float64(b.InFlight))
	m.pending.Set(float64(b.Pending))
	m.due.Set(float64(b.Due))
	m.oldest.Set(b.OldestPending.Seconds())
	m.deadNow.Set(float64(b.Dead))
	m.blocked.Set(float64(b.BlockedKeys))
	m.sampled.SetToCurrentTime()
}

// horizonChecks are the values of the check label of outbox_horizon_warning.
var horizonChecks = [...]string{outbox.CheckDeadTuples, outbox.CheckHolderAge, outbox.CheckTableSize}

// Horizon sets the horizon guard's gauges: outbox_table_dead_tuples,
// outbox_table_live_tuples, outbox_table_size_bytes,
// outbox_table_last_vacuum_timestamp_seconds, outbox_horizon_holder_age_seconds
// and outbox_horizon_holder_xid_age of each kind of holder there is, and
// outbox_horizon_warning of each check.
func (m *Metrics) Horizon(r outbox.HorizonReport) {
	m.deadTuples.Set(float64(r.DeadTuples))
	m.liveTuples.Set(float64(r.LiveTuples))
	m.tableSize.Set(float64(r.TableSize))
	last := r.LastVacuum
	if r.LastAutovacuum.After(last) {
		last = r.LastAutovacuum
	}
	if last.IsZero() {
		m.vacuumed.Set(0)
	} else {
		m.vacuumed.Set(float64(last.UnixNano()) / 1e9)
	}
	m.holderAge.Reset()
	m.holderXIDs.Reset()
	for _, h := range r.Holders {
		m.holderAge.WithLabelValues(h.Kind).Set(h.Age.Seconds())
		m.holderXIDs.WithLabelValues(h.Kind).Set(float64(h.XIDAge))
	}
	for _, c := range horizonChecks {
		v := 0.0
		for _, w := range r.Warnings {
			if w.Check == c {
				v = 1
			}
		}
		m.horizonWarn.WithLabelValues(c).Set(v)
	}
}

var _ outbox.Metrics = (*Metrics)(nil)
