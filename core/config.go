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
// every other value of a knob must lie within its bounds (Knobs lists each
// knob with its default, bounds and environment variable; LoadEnv reads
// them from the environment).
type Config struct {
	// Store holds the outbox table and owns its connection pool (required).
	Store Store
	// TxContext finds the caller's transaction for Write (required unless
	// Mode is ModePollerOnly).
	TxContext TxContext
	// Purger deletes old terminal events; default: Store, if it is one.
	Purger Purger
	// Waker carries wake-ups between the instances on the table, so that
	// a poller claims an event another instance left in the table at once
	// rather than at its next poll; default: Store, if it is one. NoWaker
	// turns them off.
	Waker Waker
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
	// RetryPolicy spaces retries (default an ExponentialBackoff of
	// RetryBase and RetryMax).
	RetryPolicy RetryPolicy
	// RetryBase and RetryMax shape the default RetryPolicy: the first
	// delay and the cap of the doubling delays before jitter (defaults
	// 200ms and 60s). A RetryPolicy that is set replaces them.
	RetryBase time.Duration
	RetryMax  time.Duration
	// Interceptors run around every delivery.
	Interceptors []Interceptor
	// ListenerTimeout bounds one delivery: the listener's context carries
	// the deadline and ends then with context.DeadlineExceeded, and the
	// delivery counts as failed (default 30s). Its
	// claim is renewed until then, so it may exceed Lease; past it the
	// claim lapses and a listener that hangs loses the event to a
	// take-over.
	ListenerTimeout time.Duration
	// MaxClockSkew is the most the clocks of the instances sharing the
	// table may differ from each other (default 0: synchronized clocks).
	// The locked_at of a claim is written with its owner's clock and
	// compared with the claimer's: a claimer whose clock is ahead by S
	// sees every lease expire S early, and takes over the events of a live
	// owner once S exceeds the renewal's margin (Lease minus the Lease/3
	// between renewals, minus how long a renewal takes). A claim is
	// therefore taken over only when it is older than Lease+MaxClockSkew
	// by the claimer's clock, and an instance's Node counts as live as long
	// (RoutePolicy). Set it to the skew the hosts' clock synchronization
	// guarantees; it delays the recovery of a crashed instance's events by
	// as much. See docs/guarantees.md, "Clocks".
	MaxClockSkew time.Duration
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
	// OrderedRun is the most events of one ordering key an ordered claim
	// takes at once (default DefaultOrderedRun; 1: the head alone): one
	// worker delivers them in order, each once the one before it is DONE,
	// and gives back the rest unstarted at the first that does not succeed.
	// A key with a backlog then drains without a claim per event.
	OrderedRun int
	// UnroutedRetry is how long an event that no route of this Client
	// handles is left pending before it is offered again, without using an
	// attempt, so that another program sharing the table — or a later
	// version of this one — can deliver it (default DefaultUnroutedRetry).
	// The first event of each type a Client cannot route is logged as a
	// warning. A Client meets such events only if it claims every type
	// (ClaimAll, or a negative UnroutedRetry). A negative value sends them
	// to DEAD at once instead, and claims every type, for a table that
	// this Client alone delivers from.
	UnroutedRetry time.Duration
	// ClaimAll claims events of every type, as a Client did before it
	// claimed only the types it routes (default false): an event no route
	// handles is then left pending for UnroutedRetry by each Client that
	// claims it. Without it, a Client claims only the event types it
	// routes (every type with a catch-all HandleAll), so that services
	// with different routes share a table, and an event nobody routes
	// stays pending, visible in Client.Stats as Unrouted. A negative
	// UnroutedRetry (DEAD at once) claims every type too.
	ClaimAll bool
	// ControlInterval spaces this Client's reads of the stored pauses
	// (default 1s): another instance's Pause is obeyed within about that
	// long. The heartbeat that reports this Client as a live Node runs
	// every Lease/3.
	ControlInterval time.Duration
	// BreakerFailures opens a route's circuit breaker after that many
	// consecutive failed deliveries of its event type (default 0: no
	// breakers). An open route's events are left pending, their attempts
	// unused; every BreakerInterval (default 30s) one probe event is
	// delivered, and its success closes the breaker. See
	// docs/operations.md.
	BreakerFailures int
	BreakerInterval time.Duration
	// Routes limits the delivery of event types across every instance on
	// the table (see RoutePolicy): each live instance that routes a type
	// takes an equal share of its limits.
	Routes map[string]RoutePolicy
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

	// HorizonInterval spaces the samples of the horizon guard (default
	// 1m; negative: no guard), which runs when the Store is a
	// HorizonReporter (PostgreSQL): it reads the table's dead tuples and
	// size and what holds the database's vacuum horizon back (the oldest
	// transaction, prepared transaction or replication slot), reports them
	// in Stats, Health and Metrics.Horizon, and logs a warning when a
	// threshold below is passed. See docs/operations.md.
	HorizonInterval time.Duration
	// HorizonAge warns when something has held the horizon back longer
	// than this (default 15m; negative: no check). HorizonDeadTuples warns
	// when the table has more dead tuples than this (default 10,000,000;
	// negative: no check). HorizonTableMegabytes warns when the table, its
	// indexes included, takes more megabytes than this (default 0: no
	// check; the right size depends on the write rate and the Retention).
	HorizonAge            time.Duration
	HorizonDeadTuples     int
	HorizonTableMegabytes int
}

// Validate reports the first setting of c that New would refuse, as an
// error wrapping ErrInvalidConfig that names it: a missing Store, or
// TxContext (needed unless Mode is ModePollerOnly), or a knob outside its
// bounds (see Knobs). Zero values are valid: they take the documented
// defaults. Every knob is checked, also those of parts the Mode does not
// run.
func (c Config) Validate() error {
	if c.Store == nil {
		return configErr("client needs a Store")
	}
	if err := checkKnobs(c, knobs, knobErr); err != nil {
		return err
	}
	if err := validRoutes(c.Routes); err != nil {
		return err
	}
	if c.TxContext == nil && c.Mode != ModePollerOnly {
		return configErr("client needs a TxContext to write (or Mode: ModePollerOnly)")
	}
	return nil
}

// WithDefaults returns a copy of c with every zero value replaced by its
// default, as New runs it: each knob's (see Knobs; Owner draws a fresh
// NewOwnerID), RetryPolicy an ExponentialBackoff of RetryBase and
// RetryMax, Clock SystemClock, Logger slog.Default(), Metrics none, and
// Purger the Store if it is one.
func (c Config) WithDefaults() Config {
	for _, k := range knobs {
		if k.def != nil {
			k.def(&c)
		}
	}
	if c.RetryPolicy == nil {
		c.RetryPolicy = &ExponentialBackoff{Base: c.RetryBase, Max: c.RetryMax}
	}
	c.Clock = clockOr(c.Clock)
	c.Logger = loggerOr(c.Logger)
	c.Metrics = metricsOr(c.Metrics)
	if c.Purger == nil {
		c.Purger, _ = c.Store.(Purger)
	}
	if c.Waker == nil {
		c.Waker, _ = c.Store.(Waker)
	}
	return c
}

// Defaults of the control knobs.
const (
	// DefaultControlInterval spaces the reads of the stored pauses unless
	// Config.ControlInterval sets another interval.
	DefaultControlInterval = time.Second
	// DefaultBreakerInterval is how long an open circuit breaker waits
	// before its probe unless Config.BreakerInterval sets another wait.
	DefaultBreakerInterval = 30 * time.Second
)

// RoutePolicy limits the deliveries of one event type across every
// instance on the table (Config.Routes). Each live instance that routes
// the type (see Node) takes an equal share: Rate/n deliveries a second and
// Concurrency/n at once, the remainder of Concurrency going to the first
// instances by owner id; an instance whose share of Concurrency is 0
// delivers none of the type. When an instance stops without Close, the
// others take its share once its node ages out, one Lease after its last
// report (its row is deleted after three).
type RoutePolicy struct {
	// Rate is the most deliveries a second across all instances (0: no
	// rate limit); Burst how many may start at once after a quiet spell
	// (default: a second's worth, at least 1).
	Rate  float64
	Burst int
	// Concurrency is the most deliveries running at once across all
	// instances (0: no limit).
	Concurrency int
	// TTL makes the events of the type that this Client writes without an
	// expiry of their own expire TTL after they occurred (see WithTTL): a
	// time-to-live per type, set by the writer (0: none).
	TTL time.Duration
}

// limits reports whether p limits deliveries (a Rate or a Concurrency),
// as opposed to setting a TTL only.
func (p RoutePolicy) limits() bool { return p.Rate > 0 || p.Concurrency > 0 }

// maxRoutes bounds Config.Routes.
const maxRoutes = 1000

// validRoutes checks Config.Routes.
func validRoutes(rs map[string]RoutePolicy) error {
	if len(rs) > maxRoutes {
		return configErr("Routes has %d entries; want at most %d", len(rs), maxRoutes)
	}
	if n := len(limitingRoutes(rs)); n > MaxClaimTypes {
		return configErr("Routes limits %d event types; want at most MaxClaimTypes (%d): a claim leaves each out", n, MaxClaimTypes)
	}
	for t, p := range rs {
		switch {
		case t == "" || len(t) > MaxEventTypeLen:
			return configErr("Routes: event type %q: want 1 to %d bytes", t, MaxEventTypeLen)
		case p.Rate < 0 || p.Rate > 1e6 || p.Rate != p.Rate:
			return configErr("Routes[%q].Rate is %v; want 0 (none) to 1000000 a second", t, p.Rate)
		case p.Burst < 0 || p.Burst > maxQueueSize:
			return configErr("Routes[%q].Burst is %d; want 0 (the default) to %d", t, p.Burst, maxQueueSize)
		case p.Concurrency < 0 || p.Concurrency > maxWorkers:
			return configErr("Routes[%q].Concurrency is %d; want 0 (none) to %d", t, p.Concurrency, maxWorkers)
		case p.TTL < 0 || p.TTL > maxKeep:
			return configErr("Routes[%q].TTL is %s; want 0 (none) to %s", t, fmtValue(p.TTL), fmtValue(maxKeep))
		case !p.limits() && p.TTL == 0:
			return configErr("Routes[%q] sets nothing: want a Rate, a Concurrency or a TTL", t)
		}
	}
	return nil
}
