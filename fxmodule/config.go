package outboxfx

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/sqlstore"
)

// Upper bounds that catch typos before they allocate gigabytes of queue.
const (
	maxWorkers   = 10_000
	maxQueueSize = 1_000_000
	maxBatchSize = 100_000
)

// Config configures one data source: its table, its outbox.Mode, and the
// knobs of its outbox.Client. Zero values take the documented defaults
// (the reference specification's); negative values are errors. The zero
// Config runs everything (outbox.ModeFull).
//
// Build one in code, start from a Preset, or load it from the environment
// with LoadEnv (see EnvPrefix for the variable names).
type Config struct {
	// Table is the outbox table, optionally schema-qualified
	// (default sqlstore.DefaultTable, "outbox_event").
	Table string
	// Migrate creates the table and its indexes, if missing, when the app
	// starts (default false: the schema is managed elsewhere).
	Migrate bool
	// Owner identifies this process in claims (default outbox.NewOwnerID():
	// host, pid and random bits). It must be unique per process start.
	Owner string

	// Mode selects what runs in this process (default outbox.ModeFull: hot
	// path, poller and purge). outbox.ModeWriterOnly delivers nothing:
	// events stay NEW for change data capture or a relay elsewhere.
	// outbox.ModePollerOnly leaves every event to the poller.
	// outbox.ModeHotPathOnly runs no poller: retries, delayed and replayed
	// events wait for pollers of other processes. Only ModeFull and
	// ModePollerOnly purge.
	Mode outbox.Mode
	// DisablePurge runs no purge scheduler in this process.
	DisablePurge bool

	// Ordered delivers the events of one ordering key (by default their
	// aggregate type and id) one at a time, in the order their
	// transactions committed, across every instance (see
	// outbox.Config.Ordered; default false). Every process of the data
	// source must set it alike.
	Ordered bool
	// DeadPolicy says what an ordered event that ends in DEAD does to the
	// later events of its key (default outbox.DeadBlocksKey: they wait until
	// it is replayed or skipped; outbox.DeadSkipsKey: they go on).
	DeadPolicy outbox.DeadPolicy

	// Workers is the number of concurrent deliveries (default 4, at most 10000).
	Workers int
	// HotQueueSize and ColdQueueSize bound the dispatcher's queues
	// (defaults 1000 and 4000, at most 1000000).
	HotQueueSize  int
	ColdQueueSize int
	// MaxAttempts is the number of failed deliveries after which an event
	// is DEAD (default 10).
	MaxAttempts int
	// RetryBase and RetryMax shape the exponential backoff between attempts
	// (defaults 200ms and 60s, jittered ×0.5–1.5).
	RetryBase time.Duration
	RetryMax  time.Duration
	// DrainTimeout bounds how long stopping delivers what is queued (default 5s).
	DrainTimeout time.Duration
	// ListenerTimeout cancels a listener's context; its error is then a
	// failed attempt (default 30s). Until then the claim is renewed by the
	// heartbeat, so it may exceed Lease.
	ListenerTimeout time.Duration
	// AckBatchSize and AckInterval bound the batching of DONE updates
	// (defaults 256 and 5ms).
	AckBatchSize int
	AckInterval  time.Duration

	// PollInterval is the wait between idle polls (default 5s).
	PollInterval time.Duration
	// PollBatchSize is the smallest claim (default 50): a poll claims as
	// much as the cold queue has room for, up to 40 times that.
	PollBatchSize int
	// SkipRecent leaves events younger than this to the hot path (default 0).
	SkipRecent time.Duration
	// Lease is how long a claim protects a row from other instances
	// without being renewed (default 15s), for the hot path and the poller
	// alike: a heartbeat renews held claims every Lease/3, and a crashed
	// instance's events are taken over about one Lease after the crash.
	Lease time.Duration
	// PollMaxBackoff caps the wait between polls after database errors (default 1m).
	PollMaxBackoff time.Duration

	// Retention keeps DONE events this long (default 7 days).
	Retention time.Duration
	// DeadRetention purges DEAD events this long after they ended; zero
	// (the default) keeps them until they are replayed.
	DeadRetention time.Duration
	// PurgeBatchSize bounds each DELETE (default 500).
	PurgeBatchSize int
	// PurgeInterval is the wait between purges (default 1h).
	PurgeInterval time.Duration

	// MetricsInterval is how often the Client samples the table's backlog
	// for the metrics set with WithMetrics (default 15s).
	MetricsInterval time.Duration
}

// Validate reports the first invalid value, wrapped in
// outbox.ErrInvalidConfig, naming the field.
func (c Config) Validate() error {
	if c.Table != "" {
		if err := sqlstore.ValidateTableName(c.Table); err != nil {
			return err
		}
	}
	if c.Mode < outbox.ModeFull || c.Mode > outbox.ModeHotPathOnly {
		return invalid("Mode", "is unknown (%d)", int(c.Mode))
	}
	if c.DeadPolicy != outbox.DeadBlocksKey && c.DeadPolicy != outbox.DeadSkipsKey {
		return invalid("DeadPolicy", "is unknown (%d)", int(c.DeadPolicy))
	}
	if len(c.Owner) > 128 {
		return invalid("Owner", "is longer than 128 characters")
	}
	for _, f := range []struct {
		name  string
		v     int
		limit int
	}{
		{"Workers", c.Workers, maxWorkers},
		{"HotQueueSize", c.HotQueueSize, maxQueueSize},
		{"ColdQueueSize", c.ColdQueueSize, maxQueueSize},
		{"MaxAttempts", c.MaxAttempts, 1 << 30},
		{"AckBatchSize", c.AckBatchSize, maxBatchSize},
		{"PollBatchSize", c.PollBatchSize, maxBatchSize},
		{"PurgeBatchSize", c.PurgeBatchSize, maxBatchSize},
	} {
		if f.v < 0 {
			return invalid(f.name, "must not be negative, got %d", f.v)
		}
		if f.v > f.limit {
			return invalid(f.name, "must be at most %d, got %d", f.limit, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"RetryBase", c.RetryBase}, {"RetryMax", c.RetryMax}, {"DrainTimeout", c.DrainTimeout}, {"ListenerTimeout", c.ListenerTimeout},
		{"AckInterval", c.AckInterval}, {"PollInterval", c.PollInterval}, {"SkipRecent", c.SkipRecent},
		{"Lease", c.Lease}, {"PollMaxBackoff", c.PollMaxBackoff},
		{"Retention", c.Retention}, {"DeadRetention", c.DeadRetention}, {"PurgeInterval", c.PurgeInterval},
		{"MetricsInterval", c.MetricsInterval},
	} {
		if f.v < 0 {
			return invalid(f.name, "must not be negative, got %s", f.v)
		}
	}
	if c.RetryBase > 0 && c.RetryMax > 0 && c.RetryBase > c.RetryMax {
		return invalid("RetryBase", "(%s) must not exceed RetryMax (%s)", c.RetryBase, c.RetryMax)
	}
	return nil
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s %s", outbox.ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// WithDefaults returns c with every zero value replaced by its default, as
// the Client will run it. Owner stays empty if unset: each start draws
// a fresh one.
func (c Config) WithDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if c.Table == "" {
		c.Table = sqlstore.DefaultTable
	}
	defInt(&c.Workers, outbox.DefaultWorkers)
	defInt(&c.HotQueueSize, outbox.DefaultQueueSize)
	defInt(&c.ColdQueueSize, outbox.DefaultColdQueueSize)
	defInt(&c.MaxAttempts, outbox.DefaultMaxAttempts)
	def(&c.RetryBase, 200*time.Millisecond)
	def(&c.RetryMax, 60*time.Second)
	def(&c.DrainTimeout, outbox.DefaultDrainTimeout)
	defInt(&c.AckBatchSize, outbox.DefaultAckBatchSize)
	def(&c.AckInterval, outbox.DefaultAckInterval)
	def(&c.PollInterval, outbox.DefaultPollInterval)
	defInt(&c.PollBatchSize, outbox.DefaultPollBatchSize)
	def(&c.Lease, outbox.DefaultLease)
	def(&c.ListenerTimeout, outbox.DefaultListenerTimeout)
	def(&c.PollMaxBackoff, outbox.DefaultMaxPollBackoff)
	def(&c.Retention, outbox.DefaultRetention)
	defInt(&c.PurgeBatchSize, outbox.DefaultPurgeBatch)
	def(&c.PurgeInterval, outbox.DefaultPurgeInterval)
	def(&c.MetricsInterval, outbox.DefaultMetricsInterval)
	return c
}

// purges reports whether a Client with this Config runs a purge scheduler.
func (c Config) purges() bool {
	return (c.Mode == outbox.ModeFull || c.Mode == outbox.ModePollerOnly) && !c.DisablePurge
}

// Preset names a starting Config for a kind of deployment.
type Preset string

// The presets. Every one is a plain Config; fields set afterwards (in code
// or from the environment) override it.
const (
	// PresetDefault is the zero Config: the specification's defaults, safe
	// for one instance or many (claims with owner and a 5 minute lease).
	PresetDefault Preset = "default"
	// PresetSingleNode is for an application that runs as exactly one
	// process: a 1s poll interval, and a 30s lease so that rows claimed by
	// a crashed previous run are taken back soon after a restart (no other
	// instance can be holding them).
	PresetSingleNode Preset = "single-node"
	// PresetMultiNode is for many instances on one table: the owner id is
	// drawn once from outbox.NewOwnerID (host, pid, random bits) and the
	// lease is pinned at the default 5 minutes, which must exceed the
	// longest listener run; pollers of all instances claim side by side.
	PresetMultiNode Preset = "multi-node"
	// PresetWriterOnly writes events and delivers none (outbox.ModeWriterOnly):
	// no hot path, no poller, no purge. For change data capture (Debezium
	// reading the table) or for a separate relay process.
	PresetWriterOnly Preset = "writer-only"
)

// Presets lists the known presets.
func Presets() []Preset {
	return []Preset{PresetDefault, PresetSingleNode, PresetMultiNode, PresetWriterOnly}
}

// Config returns the preset's configuration, or an error wrapping
// outbox.ErrInvalidConfig for an unknown preset.
func (p Preset) Config() (Config, error) {
	switch p {
	case PresetDefault, "":
		return Config{}, nil
	case PresetSingleNode:
		return Config{PollInterval: time.Second, Lease: 30 * time.Second}, nil
	case PresetMultiNode:
		return Config{Owner: outbox.NewOwnerID(), Lease: outbox.DefaultLease}, nil
	case PresetWriterOnly:
		return Config{Mode: outbox.ModeWriterOnly}, nil
	}
	names := make([]string, 0, 4)
	for _, q := range Presets() {
		names = append(names, string(q))
	}
	return Config{}, fmt.Errorf("%w: outboxfx: unknown preset %q (want one of %s)", outbox.ErrInvalidConfig, string(p), strings.Join(names, ", "))
}

// EnvPrefix returns the prefix of a data source's environment variables:
// "OUTBOX_" for the default data source (name ""), and "OUTBOX_ORDERS_" for
// one named "orders" (upper-cased, '-' and '.' become '_'). A named data
// source reads only its own prefix, never the default's.
func EnvPrefix(dataSource string) string {
	if dataSource == "" {
		return "OUTBOX_"
	}
	return "OUTBOX_" + strings.NewReplacer("-", "_", ".", "_").Replace(strings.ToUpper(dataSource)) + "_"
}

// EnvVar documents one environment variable (without its prefix).
type EnvVar struct {
	// Name is the variable's name after the prefix, e.g. "POLL_INTERVAL".
	Name string
	// Field is the Config field it sets.
	Field string
	// Kind is "bool", "int", "duration", "string", "mode", "dead-policy"
	// or "preset".
	Kind string
	set  func(c *Config, v string) error
}

// EnvVars lists every variable LoadEnv reads, in the order it applies them
// (PRESET first: it replaces the base Config).
func EnvVars() []EnvVar {
	str := func(name, field string, p func(*Config) *string) EnvVar {
		return EnvVar{name, field, "string", func(c *Config, v string) error { *p(c) = v; return nil }}
	}
	// boolean sets a bool field; with negate, a variable that says
	// "enabled" sets a field that says "disable".
	boolean := func(name, field string, negate bool, p func(*Config) *bool) EnvVar {
		return EnvVar{name, field, "bool", func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errors.New("want true or false")
			}
			*p(c) = b != negate
			return nil
		}}
	}
	integer := func(name, field string, p func(*Config) *int) EnvVar {
		return EnvVar{name, field, "int", func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return errors.New("want an integer")
			}
			*p(c) = n
			return nil
		}}
	}
	duration := func(name, field string, p func(*Config) *time.Duration) EnvVar {
		return EnvVar{name, field, "duration", func(c *Config, v string) error {
			d, err := parseDuration(v)
			if err != nil {
				return err
			}
			*p(c) = d
			return nil
		}}
	}
	return []EnvVar{
		{"PRESET", "(base Config)", "preset", func(c *Config, v string) error {
			base, err := Preset(strings.ToLower(v)).Config()
			if err != nil {
				return err
			}
			*c = base
			return nil
		}},
		str("TABLE", "Table", func(c *Config) *string { return &c.Table }),
		boolean("MIGRATE", "Migrate", false, func(c *Config) *bool { return &c.Migrate }),
		str("OWNER", "Owner", func(c *Config) *string { return &c.Owner }),
		{"MODE", "Mode", "mode", func(c *Config, v string) error {
			m, ok := parseMode(v)
			if !ok {
				return fmt.Errorf("want one of %s", strings.Join(modeNames(), ", "))
			}
			c.Mode = m
			return nil
		}},
		boolean("PURGE_ENABLED", "DisablePurge", true, func(c *Config) *bool { return &c.DisablePurge }),
		boolean("ORDERED", "Ordered", false, func(c *Config) *bool { return &c.Ordered }),
		{"DEAD_POLICY", "DeadPolicy", "dead-policy", func(c *Config, v string) error {
			for _, p := range []outbox.DeadPolicy{outbox.DeadBlocksKey, outbox.DeadSkipsKey} {
				if strings.EqualFold(v, p.String()) {
					c.DeadPolicy = p
					return nil
				}
			}
			return fmt.Errorf("want %s or %s", outbox.DeadBlocksKey, outbox.DeadSkipsKey)
		}},
		integer("WORKERS", "Workers", func(c *Config) *int { return &c.Workers }),
		integer("HOT_QUEUE_SIZE", "HotQueueSize", func(c *Config) *int { return &c.HotQueueSize }),
		integer("COLD_QUEUE_SIZE", "ColdQueueSize", func(c *Config) *int { return &c.ColdQueueSize }),
		integer("MAX_ATTEMPTS", "MaxAttempts", func(c *Config) *int { return &c.MaxAttempts }),
		duration("RETRY_BASE", "RetryBase", func(c *Config) *time.Duration { return &c.RetryBase }),
		duration("RETRY_MAX", "RetryMax", func(c *Config) *time.Duration { return &c.RetryMax }),
		duration("DRAIN_TIMEOUT", "DrainTimeout", func(c *Config) *time.Duration { return &c.DrainTimeout }),
		duration("LISTENER_TIMEOUT", "ListenerTimeout", func(c *Config) *time.Duration { return &c.ListenerTimeout }),
		integer("ACK_BATCH_SIZE", "AckBatchSize", func(c *Config) *int { return &c.AckBatchSize }),
		duration("ACK_INTERVAL", "AckInterval", func(c *Config) *time.Duration { return &c.AckInterval }),
		duration("POLL_INTERVAL", "PollInterval", func(c *Config) *time.Duration { return &c.PollInterval }),
		integer("BATCH_SIZE", "PollBatchSize", func(c *Config) *int { return &c.PollBatchSize }),
		duration("SKIP_RECENT", "SkipRecent", func(c *Config) *time.Duration { return &c.SkipRecent }),
		duration("LEASE", "Lease", func(c *Config) *time.Duration { return &c.Lease }),
		duration("POLL_MAX_BACKOFF", "PollMaxBackoff", func(c *Config) *time.Duration { return &c.PollMaxBackoff }),
		duration("RETENTION", "Retention", func(c *Config) *time.Duration { return &c.Retention }),
		duration("DEAD_RETENTION", "DeadRetention", func(c *Config) *time.Duration { return &c.DeadRetention }),
		integer("PURGE_BATCH_SIZE", "PurgeBatchSize", func(c *Config) *int { return &c.PurgeBatchSize }),
		duration("PURGE_INTERVAL", "PurgeInterval", func(c *Config) *time.Duration { return &c.PurgeInterval }),
		duration("METRICS_INTERVAL", "MetricsInterval", func(c *Config) *time.Duration { return &c.MetricsInterval }),
	}
}

// modes lists every outbox.Mode, in order.
var modes = []outbox.Mode{outbox.ModeFull, outbox.ModeWriterOnly, outbox.ModePollerOnly, outbox.ModeHotPathOnly}

func modeNames() []string {
	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = m.String()
	}
	return names
}

// parseMode maps a mode's name ("full", "writer-only", "poller-only",
// "hot-path-only", any case) to the mode.
func parseMode(v string) (outbox.Mode, bool) {
	for _, m := range modes {
		if strings.EqualFold(v, m.String()) {
			return m, true
		}
	}
	return 0, false
}

// removedEnv lists the variables earlier versions read that no longer
// exist, with what replaces them. LoadEnv rejects them rather than ignore
// a setting an operator relies on.
var removedEnv = []struct{ name, hint string }{
	{"RELAY_ENABLED", "set MODE=writer-only instead of RELAY_ENABLED=false"},
	{"HOT_PATH_ENABLED", "set MODE=poller-only instead of HOT_PATH_ENABLED=false"},
	{"POLLER_ENABLED", "set MODE=hot-path-only instead of POLLER_ENABLED=false"},
	{"OWN_RECLAIM_AFTER", "the poller no longer has this delay (stopping hands claims back at once); remove it"},
}

// parseDuration accepts Go durations ("1.5s", "2h45m") and whole days ("7d").
func parseDuration(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 100_000 {
			return 0, errors.New(`want a duration such as "500ms", "5s", "2h" or "7d"`)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, errors.New(`want a duration such as "500ms", "5s", "2h" or "7d"`)
	}
	return d, nil
}

// LoadEnv returns c overlaid with the variables named prefix+EnvVar.Name
// that lookup finds (os.LookupEnv if nil), then validated. Unset variables
// leave their field alone; a set but empty variable is an error, as is any
// value that does not parse, and so is a variable that earlier versions
// read and that no longer exists (RELAY_ENABLED, HOT_PATH_ENABLED,
// POLLER_ENABLED: use MODE; OWN_RECLAIM_AFTER). Errors name the variable
// and its value and wrap outbox.ErrInvalidConfig.
func (c Config) LoadEnv(prefix string, lookup func(string) (string, bool)) (Config, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	for _, r := range removedEnv {
		if _, ok := lookup(prefix + r.name); ok {
			return c, fmt.Errorf("outboxfx: %s is no longer supported: %s: %w", prefix+r.name, r.hint, outbox.ErrInvalidConfig)
		}
	}
	for _, ev := range EnvVars() {
		key := prefix + ev.Name
		v, ok := lookup(key)
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if v == "" {
			return c, fmt.Errorf("outboxfx: %s is set but empty: %w", key, outbox.ErrInvalidConfig)
		}
		err := ev.set(&c, v)
		if err == nil {
			err = c.Validate()
		}
		switch {
		case err == nil:
		case errors.Is(err, outbox.ErrInvalidConfig):
			return c, fmt.Errorf("outboxfx: %s=%q: %w", key, v, err)
		default:
			return c, fmt.Errorf("outboxfx: %s=%q: %w: %w", key, v, outbox.ErrInvalidConfig, err)
		}
	}
	return c, nil
}
