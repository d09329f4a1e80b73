// Package outboxprom exports the outbox's metrics to Prometheus: New
// returns an outbox.Metrics for one Client's Config.Metrics, registered as
// a prometheus.Collector on the Registerer the application serves (with
// promhttp). Several Clients (one per data source) share a registry, each
// with its own Options.DataSource, which every series carries as the
// "datasource" label.
//
//	reg := prometheus.NewRegistry()
//	m, _ := outboxprom.New(outboxprom.Options{Registerer: reg, DataSource: "orders"})
//	client, _ := outbox.New(outbox.Config{Store: store, TxContext: txm, Metrics: m})
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// Counters and histograms carry the event type ("event_type"), and
// outbox_delivery_seconds the delivery's result ("result": done, retry,
// dead, release); the backlog gauges (outbox_pending, outbox_retrying,
// outbox_in_flight, outbox_oldest_pending_seconds, outbox_dead,
// outbox_blocked_keys) are sampled by the Client every
// Config.MetricsInterval. outbox_breaker_state and
// outbox_breaker_transitions_total follow the routes' circuit breakers,
// outbox_paused the stored pauses the Client obeys. docs/observability.md lists every series with a
// query per dashboard panel.
//
// Event types get series of their own up to Options.MaxEventTypes
// (default DefaultMaxEventTypes, 1,000) per Metrics; the events of the
// types beyond are counted under event_type="_other" (OverflowLabel), with
// one warning, so that a type made of request data cannot grow the
// series without end.
//
// The package is named outboxprom, not prometheus, so that it never
// shadows github.com/prometheus/client_golang/prometheus in the files that
// import both; its module path stays
// github.com/go-outbox/outbox/metrics/prometheus:
//
//	import outboxprom "github.com/go-outbox/outbox/metrics/prometheus"
package outboxprom
