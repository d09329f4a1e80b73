package outbox

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Knob describes one tunable setting of Config: the field it sets, its
// default, its bounds, its environment variable and how a string sets it.
// Knobs lists them all; Config.Validate, Config.WithDefaults and
// Config.LoadEnv work from that list, so a setting is described once.
//
// A zero value in Config always means the default. A value that is not
// zero must lie within [Min, Max]; the few knobs whose default is "none"
// (SkipRecent, DeadRetention) take Min to Max when set.
type Knob struct {
	// Name is the Config field, e.g. "PollInterval".
	Name string
	// Env is the environment variable after its prefix, the field's name
	// in upper snake case, e.g. "POLL_INTERVAL" (OUTBOX_POLL_INTERVAL).
	Env string
	// Kind is what a value looks like: "int", "duration" (Go's syntax,
	// "500ms", "2h45m", or whole days, "7d"), "bool", "string", "mode"
	// (a Mode's name) or "dead-policy" (a DeadPolicy's name).
	Kind string
	// Doc says what the knob does, in one line.
	Doc string
	// Default, Min and Max are the default and the bounds, written the way
	// Set reads them; Min and Max are empty for knobs without bounds.
	Default, Min, Max string

	set   func(c *Config, v string) error
	check func(c Config) error // the knob's own bounds
	cross func(c Config) error // its relation to other knobs
	def   func(c *Config)
}

// Knobs returns the description of every tunable setting of Config, in
// the order of the fields. The settings that are not plain values (Store,
// TxContext, Purger, Waker, RetryPolicy, Interceptors, Hooks, Routes, EnvelopeOptions,
// Clock, Logger, Metrics) are not knobs.
func Knobs() []Knob { return slices.Clone(knobs) }

// Set parses value as Kind says and sets the knob in c. It checks the
// syntax only; Check (or Config.Validate) checks the bounds. Errors wrap
// ErrInvalidConfig and name the knob.
func (k Knob) Set(c *Config, value string) error {
	if k.set == nil {
		return configErr("%q is not one of Knobs", k.Name)
	}
	if err := k.set(c, strings.TrimSpace(value)); err != nil {
		return configErr("%s: %q: %v", k.Name, value, err)
	}
	return nil
}

// Check reports whether c's value of the knob is within its bounds, as an
// error wrapping ErrInvalidConfig that names the knob, its bounds and the
// value.
func (k Knob) Check(c Config) error {
	return checkKnobs(c, []Knob{k}, knobErr)
}

// knobErr is a knob's error as it is.
func knobErr(_ Knob, err error) error { return err }

// checkKnobs checks ks in c: first the bounds of each, then how they
// relate to other knobs, so that a value out of its bounds is reported as
// such. wrap adds to the error of a knob (LoadEnv: its variable).
func checkKnobs(c Config, ks []Knob, wrap func(Knob, error) error) error {
	for _, k := range ks {
		if k.check == nil {
			continue
		}
		if err := k.check(c); err != nil {
			return wrap(k, err)
		}
	}
	for _, k := range ks {
		if k.cross == nil {
			continue
		}
		if err := k.cross(c); err != nil {
			return wrap(k, err)
		}
	}
	return nil
}

// Bounds of the knobs. The queues and batches are sized so that their
// memory stays bounded (a queued event takes a few hundred bytes before
// its payload); the durations so that the engine works: a lease is renewed
// every Lease/3, which needs at least a second to outlast a pause of the
// process or of the database.
const (
	maxWorkers   = 10_000
	maxQueueSize = 100_000
	maxBatchSize = 10_000
	maxPurge     = 100_000
	maxAttempts  = 10_000
	day          = 24 * time.Hour
	maxKeep      = 3650 * day // ten years
	// The horizon guard's thresholds: from a thousand dead tuples (fewer
	// are the noise of any busy table) to two billion (an int on every
	// platform), up to a pebibyte.
	minDeadTuples = 1000
	maxDeadTuples = 2_000_000_000
	maxTableMB    = 1 << 30
	// maxOrderedRun bounds OrderedRun: a run's events are held, renewed
	// and given back together.
	maxOrderedRun = 1000
)

var knobs = []Knob{
	enumKnob("Mode", "mode", "what runs in this process", modes,
		func(c *Config) *Mode { return &c.Mode }),
	{Name: "Owner", Kind: "string", Doc: "identifies this process in claims; unique per process start",
		Default: "NewOwnerID()", Max: strconv.Itoa(maxOwnerLen) + " characters",
		set: func(c *Config, v string) error { c.Owner = v; return nil },
		check: func(c Config) error {
			if len(c.Owner) > maxOwnerLen {
				return configErr("Owner is %d characters long; want at most %d", len(c.Owner), maxOwnerLen)
			}
			return nil
		},
		def: func(c *Config) {
			if c.Owner == "" {
				c.Owner = NewOwnerID()
			}
		}},
	numKnob("Lease", "how long a claim protects a row from other instances without being renewed (renewed every Lease/3)",
		func(c *Config) *time.Duration { return &c.Lease }, DefaultLease, time.Second, day),
	numKnob("Workers", "the number of concurrent deliveries",
		func(c *Config) *int { return &c.Workers }, DefaultWorkers, 1, maxWorkers),
	numKnob("HotQueueSize", "events written by this process and waiting for a worker",
		func(c *Config) *int { return &c.HotQueueSize }, DefaultQueueSize, 1, maxQueueSize),
	numKnob("ColdQueueSize", "events claimed by the poller and waiting for a worker",
		func(c *Config) *int { return &c.ColdQueueSize }, DefaultColdQueueSize, 1, maxQueueSize),
	numKnob("MaxAttempts", "failed deliveries after which an event is DEAD",
		func(c *Config) *int { return &c.MaxAttempts }, DefaultMaxAttempts, 1, maxAttempts),
	withCross(numKnob("RetryBase", "the first retry delay of the default RetryPolicy (doubling, jittered ×0.5–1.5)",
		func(c *Config) *time.Duration { return &c.RetryBase }, DefaultRetryBase, time.Millisecond, day),
		func(c Config) error {
			base, maxD := orDefault(c.RetryBase, DefaultRetryBase), orDefault(c.RetryMax, DefaultRetryMax)
			if base > maxD {
				return configErr("RetryBase is %s; want at most RetryMax (%s)", fmtValue(base), fmtValue(maxD))
			}
			return nil
		}),
	numKnob("RetryMax", "the longest retry delay of the default RetryPolicy, before jitter",
		func(c *Config) *time.Duration { return &c.RetryMax }, DefaultRetryMax, time.Millisecond, 7*day),
	numKnob("ListenerTimeout", "bounds one delivery; the claim is renewed until then",
		func(c *Config) *time.Duration { return &c.ListenerTimeout }, DefaultListenerTimeout, time.Millisecond, day),
	numKnob("MaxClockSkew", "the most the instances' clocks differ: a claim is taken over once older than Lease+MaxClockSkew (0: synchronized clocks)",
		func(c *Config) *time.Duration { return &c.MaxClockSkew }, 0, time.Millisecond, day),
	numKnob("DrainTimeout", "how long Close delivers what is queued",
		func(c *Config) *time.Duration { return &c.DrainTimeout }, DefaultDrainTimeout, time.Millisecond, time.Hour),
	numKnob("AckBatchSize", "DONE updates written in one statement",
		func(c *Config) *int { return &c.AckBatchSize }, DefaultAckBatchSize, 1, maxBatchSize),
	numKnob("AckInterval", "the longest wait before DONE updates are written",
		func(c *Config) *time.Duration { return &c.AckInterval }, DefaultAckInterval, 100*time.Microsecond, time.Second),
	numKnob("ListenerBatchSize", "events handed to a BatchListener at once (1: no batching)",
		func(c *Config) *int { return &c.ListenerBatchSize }, DefaultListenerBatchSize, 1, maxBatchSize),
	numKnob("PollInterval", "the wait between polls when there is nothing to do",
		func(c *Config) *time.Duration { return &c.PollInterval }, DefaultPollInterval, time.Millisecond, day),
	numKnob("PollBatchSize", "the smallest claim of a poll (a poll claims up to 40 times that, as room allows)",
		func(c *Config) *int { return &c.PollBatchSize }, DefaultPollBatchSize, 1, maxBatchSize),
	numKnob("SkipRecent", "leaves events younger than this to the hot path (0: none)",
		func(c *Config) *time.Duration { return &c.SkipRecent }, 0, time.Millisecond, time.Hour),
	numKnob("MaxPollBackoff", "caps the wait between polls after database errors",
		func(c *Config) *time.Duration { return &c.MaxPollBackoff }, DefaultMaxPollBackoff, time.Millisecond, day),
	numKnob("Retention", "keeps DONE events this long",
		func(c *Config) *time.Duration { return &c.Retention }, DefaultRetention, time.Second, maxKeep),
	numKnob("DeadRetention", "purges DEAD events this long after they ended (0: keep them until replayed)",
		func(c *Config) *time.Duration { return &c.DeadRetention }, 0, time.Second, maxKeep),
	numKnob("PurgeInterval", "the wait between purges",
		func(c *Config) *time.Duration { return &c.PurgeInterval }, DefaultPurgeInterval, time.Second, 7*day),
	numKnob("PurgeBatchSize", "rows deleted by one statement of a purge",
		func(c *Config) *int { return &c.PurgeBatchSize }, DefaultPurgeBatch, 1, maxPurge),
	boolKnob("DisablePurge", "runs no purge in this process", func(c *Config) *bool { return &c.DisablePurge }),
	boolKnob("Ordered", "delivers the events of one ordering key one at a time, in order",
		func(c *Config) *bool { return &c.Ordered }),
	enumKnob("DeadPolicy", "dead-policy", "what an ordered DEAD event does to the later events of its key",
		[]DeadPolicy{DeadBlocksKey, DeadSkipsKey}, func(c *Config) *DeadPolicy { return &c.DeadPolicy }),
	numKnob("OrderedRun", "the most events of one ordering key an ordered claim takes, delivered in order by one worker (1: one at a time)",
		func(c *Config) *int { return &c.OrderedRun }, DefaultOrderedRun, 1, maxOrderedRun),
	withNegative(numKnob("UnroutedRetry", "leaves an event no route of this Client handles pending, offered again after this long, using no attempt (negative: DEAD at once)",
		func(c *Config) *time.Duration { return &c.UnroutedRetry }, DefaultUnroutedRetry, time.Second, day),
		"DEAD at once", func(c Config) bool { return c.UnroutedRetry < 0 }),
	boolKnob("ClaimAll", "claims events of every type, also those no route of this Client handles (see UnroutedRetry)",
		func(c *Config) *bool { return &c.ClaimAll }),
	numKnob("ControlInterval", "spaces the reads of the stored pauses (another instance's Pause is obeyed within about that long)",
		func(c *Config) *time.Duration { return &c.ControlInterval }, DefaultControlInterval, 10*time.Millisecond, time.Hour),
	numKnob("BreakerFailures", "consecutive failed deliveries of a route that open its circuit breaker (0: no breakers)",
		func(c *Config) *int { return &c.BreakerFailures }, 0, 1, maxAttempts),
	numKnob("BreakerInterval", "how long an open circuit breaker waits before it probes its route with one delivery",
		func(c *Config) *time.Duration { return &c.BreakerInterval }, DefaultBreakerInterval, time.Millisecond, day),
	withNegative(numKnob("MetricsInterval", "spaces the samples of the backlog reported to Metrics (negative: never)",
		func(c *Config) *time.Duration { return &c.MetricsInterval }, DefaultMetricsInterval, time.Millisecond, day),
		"off", func(c Config) bool { return c.MetricsInterval < 0 }),
	withNegative(numKnob("HorizonInterval", "spaces the horizon guard's samples of the table's dead tuples, size and oldest horizon holder (PostgreSQL; negative: no guard)",
		func(c *Config) *time.Duration { return &c.HorizonInterval }, DefaultHorizonInterval, time.Second, time.Hour),
		"off", func(c Config) bool { return c.HorizonInterval < 0 }),
	withNegative(numKnob("HorizonAge", "warns when a transaction, prepared transaction or replication slot has held the vacuum horizon back longer than this (negative: no check)",
		func(c *Config) *time.Duration { return &c.HorizonAge }, DefaultHorizonAge, time.Second, 7*day),
		"off", func(c Config) bool { return c.HorizonAge < 0 }),
	withNegative(numKnob("HorizonDeadTuples", "warns when the table has more dead tuples than this (negative: no check)",
		func(c *Config) *int { return &c.HorizonDeadTuples }, DefaultHorizonDeadTuples, minDeadTuples, maxDeadTuples),
		"off", func(c Config) bool { return c.HorizonDeadTuples < 0 }),
	numKnob("HorizonTableMegabytes", "warns when the table, indexes included, takes more megabytes than this (0: no check)",
		func(c *Config) *int { return &c.HorizonTableMegabytes }, 0, 1, maxTableMB),
}

// modes lists every Mode, in order.
var modes = []Mode{ModeFull, ModeWriterOnly, ModePollerOnly, ModeHotPathOnly}

// numKnob describes an int or duration field whose zero value means def
// and whose other values must lie in [lo, hi].
func numKnob[T int | time.Duration](name, doc string, field func(*Config) *T, def, lo, hi T) Knob {
	var zero T
	kind := "int"
	if _, ok := any(zero).(time.Duration); ok {
		kind = "duration"
	}
	k := Knob{Name: name, Kind: kind, Doc: doc, Default: fmtValue(def), Min: fmtValue(lo), Max: fmtValue(hi)}
	k.set = func(c *Config, v string) error {
		n, err := parseValue[T](v)
		if err == nil {
			*field(c) = n
		}
		return err
	}
	k.check = func(c Config) error {
		v := *field(&c)
		if v != zero && (v < lo || v > hi) {
			return configErr("%s is %s; want %s to %s, or 0 for the default (%s)", name, fmtValue(v), k.Min, k.Max, k.Default)
		}
		return nil
	}
	if def != zero {
		k.def = func(c *Config) {
			if p := field(c); *p == zero {
				*p = def
			}
		}
	}
	return k
}

// withNegative lets the values that neg reports through k's check: a
// negative value has the meaning what ("off": the knob's work is switched
// off).
func withNegative(k Knob, what string, neg func(Config) bool) Knob {
	inner := k.check
	k.Min = "negative (" + what + "), or " + k.Min
	k.check = func(c Config) error {
		if neg(c) {
			return nil
		}
		return inner(c)
	}
	return k
}

// withCross adds a check of k's relation to other knobs.
func withCross(k Knob, cross func(Config) error) Knob {
	k.cross = cross
	return k
}

func boolKnob(name, doc string, field func(*Config) *bool) Knob {
	return Knob{Name: name, Kind: "bool", Doc: doc, Default: "false", set: func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		*field(c) = b
		return nil
	}}
}

// enumKnob describes a field whose values are named by their String method.
func enumKnob[T interface {
	~int
	fmt.Stringer
}](name, kind, doc string, values []T, field func(*Config) *T) Knob {
	names := make([]string, len(values))
	for i, v := range values {
		names[i] = v.String()
	}
	want := "want one of " + strings.Join(names, ", ")
	return Knob{Name: name, Kind: kind, Doc: doc, Default: names[0],
		set: func(c *Config, v string) error {
			for _, x := range values {
				if strings.EqualFold(v, x.String()) {
					*field(c) = x
					return nil
				}
			}
			return fmt.Errorf("%s", want)
		},
		check: func(c Config) error {
			if v := *field(&c); !slices.Contains(values, v) {
				return configErr("%s is %d; %s", name, int(v), want)
			}
			return nil
		}}
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// parseValue reads an int, or a duration in Go's syntax or in whole days ("7d").
func parseValue[T int | time.Duration](v string) (T, error) {
	var zero T
	if _, ok := any(zero).(time.Duration); ok {
		d, err := parseDuration(v)
		return T(d), err
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return zero, fmt.Errorf("want a whole number")
	}
	return T(n), nil
}

func parseDuration(v string) (time.Duration, error) {
	bad := fmt.Errorf(`want a duration such as "500ms", "5s", "2h" or "7d"`)
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < -100_000 || n > 100_000 {
			return 0, bad
		}
		return time.Duration(n) * day, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, bad
	}
	return d, nil
}

// fmtValue writes v the way parseValue reads it, durations without their
// zero tails ("1h", not "1h0m0s") and whole days as days.
func fmtValue[T int | time.Duration](v T) string {
	d, ok := any(v).(time.Duration)
	if !ok {
		return strconv.Itoa(int(v))
	}
	if d == 0 {
		return "0"
	}
	if d%day == 0 && d >= 2*day {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// envName is a field's name in upper snake case: MaxPollBackoff → MAX_POLL_BACKOFF.
func envName(field string) string {
	var b strings.Builder
	for i, r := range field {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

func init() {
	for i := range knobs {
		knobs[i].Env = envName(knobs[i].Name)
	}
}

// reservedEnv reports whether a variable belongs to another tool of this
// module rather than to a Config: outboxctl's OUTBOX_DB and the test
// suites' OUTBOX_TEST_… and OUTBOX_SCREENSHOT.
func reservedEnv(name string) bool {
	return name == "OUTBOX_DB" || name == "OUTBOX_SCREENSHOT" || strings.HasPrefix(name, "OUTBOX_TEST_")
}

// LoadEnv sets c's knobs from the variables of environ ("NAME=value"
// entries, as os.Environ returns them; nil reads os.Environ()) named
// prefix + Knob.Env, for example OUTBOX_POLL_INTERVAL=1s with prefix
// "OUTBOX_", then checks the bounds of every knob it set. Variables that
// are not set leave their knob alone.
//
// The names of DEV-PLAN-017 (OUTBOX_RELAY_POLL_INTERVAL, …) are accepted
// as aliases of the knobs they mean (see EnvAliases).
//
// Every variable that starts with prefix must be a knob's, or one of also
// (names after the prefix that the caller reads itself). Any other fails
// with an error that names the closest known variable, so that a misspelt
// setting is never ignored; so does a variable that is set but empty, or
// whose value does not parse or is out of bounds. OUTBOX_DB (outboxctl's),
// OUTBOX_TEST_… and OUTBOX_SCREENSHOT (the test suites') are left alone.
// Errors wrap ErrInvalidConfig and name the variable.
func (c *Config) LoadEnv(prefix string, environ []string, also ...string) error {
	if environ == nil {
		environ = os.Environ()
	}
	var set []Knob
	setBy := make(map[string]string) // knob name -> the variable that set it
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		key, ok := strings.CutPrefix(name, prefix)
		if !ok || reservedEnv(name) || slices.Contains(also, key) {
			continue
		}
		a, aliased := envAlias(key)
		i := slices.IndexFunc(knobs, func(k Knob) bool { return k.Env == key || aliased && k.Name == a.Knob })
		if i < 0 {
			return unknownEnv(prefix, name, also)
		}
		if strings.TrimSpace(value) == "" {
			return configErr("%s is set but empty", name)
		}
		if aliased {
			var err error
			if value, err = a.value(value); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if value == "" {
				continue // a switch left on: nothing to set
			}
		}
		if other, dup := setBy[knobs[i].Name]; dup {
			return configErr("%s and %s both set %s: keep one", other, name, knobs[i].Name)
		}
		setBy[knobs[i].Name] = name
		if err := knobs[i].Set(c, value); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		set = append(set, knobs[i])
	}
	return checkKnobs(*c, set, func(k Knob, err error) error { return fmt.Errorf("%s: %w", setBy[k.Name], err) })
}

// unknownEnv is the error for a variable, with the given prefix, that
// names no knob and none of also: it names the closest known variable when
// one is close.
func unknownEnv(prefix, name string, also []string) error {
	key := strings.TrimPrefix(name, prefix)
	best, bestDist := "", len(key)/2+1
	for _, cand := range append(envNames(), also...) {
		if d := editDistance(key, cand); d < bestDist {
			best, bestDist = cand, d
		}
	}
	if best == "" {
		return configErr("%s: unknown variable (see outbox.Knobs)", name)
	}
	return configErr("%s: unknown variable; did you mean %s?", name, prefix+best)
}

func envNames() []string {
	names := make([]string, 0, len(knobs)+len(envAliases))
	for _, k := range knobs {
		names = append(names, k.Env)
	}
	for _, a := range envAliases {
		names = append(names, a.Env)
	}
	return names
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
