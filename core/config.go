package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Mode selects which parts of the outbox run in a process.
type Mode int

const (
	// ModeFull writes, delivers committed events right after commit (the
	// hot path), polls for everything else and purges: the default.
	ModeFull Mode = iota
	// ModeWriterOnly only writes. Other processes, or a CDC pipeline, deliver.
	ModeWriterOnly
	// ModePollerOnly delivers what its poller claims and purges; Write
	// leaves its rows unclaimed for any poller. For worker processes, or
	// for services whose writes must never wait for a listener.
	ModePollerOnly
	// ModeHotPathOnly writes and delivers its own events right after commit,
	// with no poller: retries, delayed events and rows the full hot queue
	// refused wait for a poller in another process.
	ModeHotPathOnly
)

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case ModeFull:
		return "full"
	case ModeWriterOnly:
		return "writer-only"
	case ModePollerOnly:
		return "poller-only"
	case ModeHotPathOnly:
		return "hot-path-only"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Config configures a Client. Zero values take the documented defaults;
// negative numbers and durations are errors.
type Config struct {
	// Store holds the outbox table and owns its connection pool (required).
	Store Store
	// TxContext finds the caller's transaction for Write (required unless
	// Mode is ModePollerOnly).
	TxContext TxContext
	// Purger deletes old terminal events; default: Store, if it is one.
	Purger Purger
	// Mode selects what runs in this process (default ModeFull).
	Mode Mode

	// Owner identifies this process in claims (default NewOwnerID()). It
	// must be unique per process start.
	Owner string
	// Lease is how long a claim protects a row from other instances
	// without being renewed (default 15s). A heartbeat renews the claims of
	// the events this process holds every Lease/3, so a crashed instance's
	// events are taken over about one Lease after the crash.
	Lease time.Duration

	// Workers is the number of concurrent deliveries (default 4).
	Workers int
	// HotQueueSize and ColdQueueSize bound the queues (defaults 1000 and
	// 4000): events claimed or written but not yet being delivered.
	HotQueueSize  int
	ColdQueueSize int
	// MaxAttempts is the number of failed deliveries after which an event
	// is DEAD (default 10).
	MaxAttempts int
	// RetryPolicy spaces retries (default &ExponentialBackoff{}).
	RetryPolicy RetryPolicy
	// Interceptors run around every delivery.
	Interceptors []Interceptor
	// ListenerTimeout bounds one delivery: the listener's context carries
	// the deadline and ends then with context.DeadlineExceeded, and the
	// delivery counts as failed (default 30s). Its
	// claim is renewed until then, so it may exceed Lease; past it the
	// claim lapses and a listener that hangs loses the event to a
	// take-over.
	ListenerTimeout time.Duration
	// DrainTimeout bounds how long Close delivers what is queued (default 5s).
	DrainTimeout time.Duration
	// AckBatchSize and AckInterval bound the batching of DONE updates
	// (defaults 256 and 5ms).
	AckBatchSize int
	AckInterval  time.Duration
	// ListenerBatchSize bounds how many events a worker hands to a
	// BatchListener (such as a broker sink) in one HandleBatch (default
	// 100; 1 switches batching off): a worker takes the events queued
	// behind its event that route to the same listener, without waiting
	// for more. Each event's outcome is its own. See BatchListener.
	ListenerBatchSize int

	// PollInterval is the wait between polls when there is nothing to do
	// (default 5s). PollBatchSize is the smallest claim (default 50): a poll
	// claims as much as the cold queue has room for, up to 40 times that
	// (2000 events by default), so that a backlog drains in large claims.
	PollInterval  time.Duration
	PollBatchSize int
	// SkipRecent leaves events younger than this to the hot path (default 0).
	SkipRecent time.Duration
	// MaxPollBackoff caps the wait between polls after database errors (default 1m).
	MaxPollBackoff time.Duration

	// Retention keeps DONE events this long (default 7 days). DEAD events
	// are kept until replayed, unless DeadRetention is set. PurgeInterval
	// spaces purges (default 1h); PurgeBatchSize bounds each DELETE (default
	// 500). DisablePurge leaves purging to another process.
	Retention      time.Duration
	DeadRetention  time.Duration
	PurgeInterval  time.Duration
	PurgeBatchSize int
	DisablePurge   bool

	// Hooks shape writes and observe commits (see WriterHook).
	Hooks []WriterHook

	// Ordered delivers the events that share an ordering key (by default
	// their aggregate type and id, see Envelope.OrderingKey and
	// WithOrderingKey) one at a time, in the order they were written: a
	// listener is never started for an event while an earlier event of its
	// key is not DONE — in this process or any other, through the hot path
	// or a poller. Keys run in parallel; events without a key are not
	// ordered. "Earlier" is the table's insertion sequence (Record.Seq),
	// which is the commit order when the transactions that write the
	// events of one key are serialized, for example because each updates
	// the aggregate's row before it writes its events. A failing event is
	// retried as usual while the rest of its key waits; DeadPolicy says
	// what happens once it is DEAD. Delayed events and RetryAfter hold
	// back the rest of their key until they are delivered. Every Client
	// that delivers from one table must agree: a Client without Ordered
	// writes no ordering keys and never claims an event written with one
	// (default false: no ordering, and no cost). See docs/guarantees.md.
	Ordered bool
	// DeadPolicy says what an ordered event that ends in DEAD does to the
	// later events of its key (default DeadBlocksKey: they wait until it is
	// replayed or skipped).
	DeadPolicy DeadPolicy
	// EnvelopeOptions, if set, gives options that WriteFrom adds to every
	// envelope it builds from a domain event, drawn from the writer's
	// context: headers (a trace id, the operator), the tenant.
	EnvelopeOptions func(ctx context.Context) []EnvelopeOption

	// Clock, Logger and Metrics are shared by every part (defaults
	// SystemClock, slog.Default() and no-op metrics).
	Clock   Clock
	Logger  *slog.Logger
	Metrics Metrics
	// MetricsInterval spaces the samples of the table's backlog (pending,
	// dead, oldest pending age, blocked keys) that the Client reports to
	// Metrics.Backlog, one Store.Stats query each (default 15s; negative:
	// never). Without Metrics nothing is sampled. The first sample is
	// taken at Start.
	MetricsInterval time.Duration
}

// Validate reports the first setting of c that New would refuse, as an
// error wrapping ErrInvalidConfig. Zero values are valid: they take the
// documented defaults.
func (c Config) Validate() error {
	cfg := c
	if cfg.Store == nil {
		return configErr("client needs a Store")
	}
	if cfg.Mode < ModeFull || cfg.Mode > ModeHotPathOnly {
		return configErr("unknown mode %d", int(cfg.Mode))
	}
	if cfg.DeadPolicy != DeadBlocksKey && cfg.DeadPolicy != DeadSkipsKey {
		return configErr("unknown DeadPolicy %d", int(cfg.DeadPolicy))
	}
	if cfg.TxContext == nil && cfg.Mode != ModePollerOnly {
		return configErr("client needs a TxContext to write (or Mode: ModePollerOnly)")
	}
	// Every setting is checked, also those of parts this mode does not run.
	for name, v := range map[string]int{"Workers": cfg.Workers, "HotQueueSize": cfg.HotQueueSize, "ColdQueueSize": cfg.ColdQueueSize,
		"MaxAttempts": cfg.MaxAttempts, "AckBatchSize": cfg.AckBatchSize, "ListenerBatchSize": cfg.ListenerBatchSize, "PollBatchSize": cfg.PollBatchSize, "PurgeBatchSize": cfg.PurgeBatchSize} {
		if v < 0 {
			return configErr("%s must not be negative, got %d", name, v)
		}
	}
	for name, v := range map[string]time.Duration{"Lease": cfg.Lease, "ListenerTimeout": cfg.ListenerTimeout, "DrainTimeout": cfg.DrainTimeout, "AckInterval": cfg.AckInterval,
		"PollInterval": cfg.PollInterval, "SkipRecent": cfg.SkipRecent, "MaxPollBackoff": cfg.MaxPollBackoff,
		"Retention": cfg.Retention, "DeadRetention": cfg.DeadRetention, "PurgeInterval": cfg.PurgeInterval} {
		if v < 0 {
			return configErr("%s must not be negative, got %s", name, v)
		}
	}
	if len(cfg.Owner) > maxOwnerLen {
		return configErr("owner id longer than %d characters", maxOwnerLen)
	}
	return nil
}
