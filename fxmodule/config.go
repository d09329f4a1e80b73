package outboxfx

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/sqlstore"
)

// Config configures one data source: the knobs of its outbox.Client (the
// embedded outbox.Config, whose zero values take the defaults and whose
// bounds outbox.Knobs lists) and what is the module's own: the table and
// whether to create it. The zero Config runs everything (outbox.ModeFull)
// on sqlstore.DefaultTable.
//
// The data source sets the Client's Store, TxContext and Logger itself;
// options set its Clock, Metrics, RetryPolicy, Interceptors, Hooks and
// EnvelopeOptions (WithClock, WithMetrics, …).
//
// Build one in code, start from a Preset, or load it from the environment
// with LoadEnv (see EnvPrefix and EnvVars for the variable names).
type Config struct {
	outbox.Config
	// Table is the outbox table, optionally schema-qualified
	// (default sqlstore.DefaultTable, "outbox_event").
	Table string
	// Migrate creates the table and its indexes, if missing, when the app
	// starts (default false: the schema is managed elsewhere).
	Migrate bool
}

// Validate reports the first invalid value, as an error wrapping
// outbox.ErrInvalidConfig that names it: the table name, or a knob outside
// its bounds (outbox.Knob.Check).
func (c Config) Validate() error {
	if c.Table != "" {
		if err := sqlstore.ValidateTableName(c.Table); err != nil {
			return err
		}
	}
	for _, k := range outbox.Knobs() {
		if err := k.Check(c.Config); err != nil {
			return err
		}
	}
	return nil
}

// WithDefaults returns c with every zero value replaced by its default, as
// the Client will run it (outbox.Config.WithDefaults; Owner is drawn anew
// on each call, and the Client draws its own when none is set).
func (c Config) WithDefaults() Config {
	c.Config = c.Config.WithDefaults()
	if c.Table == "" {
		c.Table = sqlstore.DefaultTable
	}
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
	// for one instance or many (claims with an owner and a 15s lease,
	// renewed while a listener runs).
	PresetDefault Preset = "default"
	// PresetSingleNode is for an application that runs as exactly one
	// process: a 1s poll interval, and a 30s lease so that rows claimed by
	// a crashed previous run are taken back soon after a restart (no other
	// instance can be holding them).
	PresetSingleNode Preset = "single-node"
	// PresetMultiNode is for many instances on one table: the owner id is
	// drawn once from outbox.NewOwnerID (host, pid, random bits) and the
	// lease is pinned at the default 15s (renewed every 5s while a
	// listener runs, so a crashed instance's events are taken over about
	// 15s later); pollers of all instances claim side by side.
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
		return Config{Config: outbox.Config{PollInterval: time.Second, Lease: 30 * time.Second}}, nil
	case PresetMultiNode:
		return Config{Config: outbox.Config{Owner: outbox.NewOwnerID(), Lease: outbox.DefaultLease}}, nil
	case PresetWriterOnly:
		return Config{Config: outbox.Config{Mode: outbox.ModeWriterOnly}}, nil
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

// EnvVar documents one environment variable of a data source.
type EnvVar struct {
	// Name is the variable's name after the prefix, e.g. "POLL_INTERVAL".
	Name string
	// Field is the Config field it sets ("(base Config)" for PRESET).
	Field string
	// Kind is what a value looks like: "preset", "string", "bool", or an
	// outbox.Knob's Kind.
	Kind string
	// Doc, Default, Min and Max are the knob's (outbox.Knob); Min and Max
	// are empty where there are no bounds.
	Doc, Default, Min, Max string
}

// own are the variables of a data source that are not outbox knobs, in
// the order LoadEnv applies them (PRESET first: it replaces the base).
var own = []struct {
	EnvVar
	set func(c *Config, v string) error
}{
	{EnvVar{Name: "PRESET", Field: "(base Config)", Kind: "preset", Doc: "the base Config, before the other variables", Default: string(PresetDefault)},
		func(c *Config, v string) error {
			base, err := Preset(strings.ToLower(v)).Config()
			*c = base
			return err
		}},
	{EnvVar{Name: "TABLE", Field: "Table", Kind: "string", Doc: "the outbox table, optionally schema-qualified", Default: sqlstore.DefaultTable},
		func(c *Config, v string) error {
			c.Table = v
			return sqlstore.ValidateTableName(v)
		}},
	{EnvVar{Name: "MIGRATE", Field: "Migrate", Kind: "bool", Doc: "creates the table and its indexes at start", Default: "false"},
		func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%w: want true or false", outbox.ErrInvalidConfig)
			}
			c.Migrate = b
			return nil
		}},
}

// EnvVars lists every variable LoadEnv reads: the module's own (PRESET,
// TABLE, MIGRATE), then one per outbox knob (outbox.Knobs).
func EnvVars() []EnvVar {
	vars := make([]EnvVar, 0, len(own)+len(outbox.Knobs()))
	for _, o := range own {
		vars = append(vars, o.EnvVar)
	}
	for _, k := range outbox.Knobs() {
		vars = append(vars, EnvVar{Name: k.Env, Field: k.Name, Kind: k.Kind, Doc: k.Doc, Default: k.Default, Min: k.Min, Max: k.Max})
	}
	return vars
}

// removedEnv lists the variables earlier versions read that no longer
// exist, with what replaces them. LoadEnv rejects them rather than ignore
// a setting an operator relies on.
var removedEnv = map[string]string{
	"HOT_PATH_ENABLED":  "set MODE=poller-only instead of HOT_PATH_ENABLED=false",
	"POLLER_ENABLED":    "set MODE=hot-path-only instead of POLLER_ENABLED=false",
	"OWN_RECLAIM_AFTER": "the poller no longer has this delay (stopping hands claims back at once); remove it",
	"PURGE_ENABLED":     "set DISABLE_PURGE=true instead of PURGE_ENABLED=false",
	"BATCH_SIZE":        "it is called POLL_BATCH_SIZE now",
	"POLL_MAX_BACKOFF":  "it is called MAX_POLL_BACKOFF now",
}

// LoadEnv overlays c with the data source's variables in environ ("NAME=value"
// entries; nil reads os.Environ()) named prefix + an EnvVars name: PRESET
// first (it replaces c), then TABLE and MIGRATE, then the outbox knobs
// (outbox.Config.LoadEnv). Unset variables leave their field alone.
//
// Every other variable that starts with prefix fails, with an error
// naming the closest known one (a misspelt OUTBOX_POLL_INTERVL is never
// ignored), and so does a variable that earlier versions read
// (HOT_PATH_ENABLED, POLLER_ENABLED: use MODE;
// PURGE_ENABLED: DISABLE_PURGE; BATCH_SIZE: POLL_BATCH_SIZE;
// POLL_MAX_BACKOFF: MAX_POLL_BACKOFF; OWN_RECLAIM_AFTER), an empty one, or
// one whose value does not parse or is out of bounds. The names of
// DEV-PLAN-017 (RELAY_ENABLED, RELAY_POLL_INTERVAL, CLEANER_RETENTION, …)
// are read as aliases of the knobs they mean (outbox.EnvAliases). With the default
// data source's prefix, OUTBOX_, the variables of named data sources
// (OUTBOX_ORDERS_WORKERS) are left to them. Errors name the variable and
// wrap outbox.ErrInvalidConfig.
func (c *Config) LoadEnv(prefix string, environ []string) error {
	if environ == nil {
		environ = os.Environ()
	}
	ownNames := make([]string, len(own))
	for i, o := range own {
		ownNames[i] = o.Name
	}
	known := func(key string) bool {
		return slices.Contains(ownNames, key) || slices.ContainsFunc(outbox.Knobs(), func(k outbox.Knob) bool { return k.Env == key }) ||
			slices.ContainsFunc(outbox.EnvAliases(), func(a outbox.EnvAlias) bool { return a.Env == key })
	}
	values := map[string]string{}
	var knobs []string
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		key, ok := strings.CutPrefix(name, prefix)
		switch {
		case !ok:
		case removedEnv[key] != "":
			return fmt.Errorf("outboxfx: %s is no longer supported: %s: %w", name, removedEnv[key], outbox.ErrInvalidConfig)
		case slices.Contains(ownNames, key):
			values[key] = value
		case prefix == EnvPrefix(DefaultName) && !known(key) && ofNamedDataSource(key, known):
		default:
			knobs = append(knobs, kv)
		}
	}
	for _, o := range own {
		v, ok := values[o.Name]
		if !ok {
			continue
		}
		if strings.TrimSpace(v) == "" {
			return fmt.Errorf("outboxfx: %s%s is set but empty: %w", prefix, o.Name, outbox.ErrInvalidConfig)
		}
		if err := o.set(c, strings.TrimSpace(v)); err != nil {
			return fmt.Errorf("outboxfx: %s%s=%q: %w", prefix, o.Name, v, err)
		}
	}
	if err := c.Config.LoadEnv(prefix, knobs, ownNames...); err != nil {
		return fmt.Errorf("outboxfx: %w", err)
	}
	return nil
}

// ofNamedDataSource reports whether key, a variable of the default data
// source's prefix, is a named data source's: NAME_ followed by a known
// variable or one earlier versions read.
func ofNamedDataSource(key string, known func(string) bool) bool {
	for i := 1; i < len(key); i++ {
		if key[i] == '_' && (known(key[i+1:]) || removedEnv[key[i+1:]] != "") {
			return true
		}
	}
	return false
}
