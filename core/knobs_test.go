package outbox_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
)

// field returns the Config field a knob sets.
func field(c *outbox.Config, k outbox.Knob) reflect.Value {
	return reflect.ValueOf(c).Elem().FieldByName(k.Name)
}

// knobValue returns what Set makes of s for k, as a value of its field.
func knobValue(t *testing.T, k outbox.Knob, s string) reflect.Value {
	t.Helper()
	var c outbox.Config
	if err := k.Set(&c, s); err != nil {
		t.Fatalf("%s.Set(%q): %v", k.Name, s, err)
	}
	return field(&c, k)
}

// bound is Min or Max without the words around it ("negative (off), or 1ms").
func bound(s string) string {
	if _, after, ok := strings.Cut(s, ", or "); ok {
		return after
	}
	return s
}

func validConfig() outbox.Config {
	store := outboxmem.New()
	return outbox.Config{Store: store, TxContext: store, Logger: quiet}
}

// TestKnobsDescribeEveryField checks that the table and Config agree: a
// knob per plain field, named after it, with an environment name in upper
// snake case, a doc line and a default that Set reads.
func TestKnobsDescribeEveryField(t *testing.T) {
	notKnobs := map[string]bool{"Store": true, "TxContext": true, "Purger": true, "Waker": true, "RetryPolicy": true, "Interceptors": true,
		"Hooks": true, "EnvelopeOptions": true, "Clock": true, "Logger": true, "Metrics": true, "Routes": true}
	typ := reflect.TypeFor[outbox.Config]()
	knobs := outbox.Knobs()
	var want []string
	for i := range typ.NumField() {
		if !notKnobs[typ.Field(i).Name] {
			want = append(want, typ.Field(i).Name)
		}
	}
	var got []string
	envs := map[string]bool{}
	for _, k := range knobs {
		got = append(got, k.Name)
		if envs[k.Env] || k.Doc == "" || k.Kind == "" || k.Default == "" {
			t.Errorf("knob %+v: repeated environment name, or no doc, kind or default", k)
		}
		envs[k.Env] = true
		if snake := strings.ToUpper(strings.Join(splitCamel(k.Name), "_")); k.Env != snake {
			t.Errorf("%s: Env = %q, want %q", k.Name, k.Env, snake)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("knobs\n %v\nwant the plain fields of Config, in order\n %v", got, want)
	}
}

func splitCamel(s string) []string {
	var words []string
	start := 0
	for i := 1; i < len(s); i++ {
		if s[i] >= 'A' && s[i] <= 'Z' {
			words, start = append(words, s[start:i]), i
		}
	}
	return append(words, s[start:])
}

// TestKnobBounds runs every knob through its default, its bounds and one
// step past each bound, and reads it from its environment variable.
func TestKnobBounds(t *testing.T) {
	defaults := outbox.Config{}.WithDefaults()
	// RetryBase must not exceed RetryMax: each is tried with the other
	// out of its way.
	companion := map[string]func(*outbox.Config){
		"RetryBase": func(c *outbox.Config) { c.RetryMax = 7 * 24 * time.Hour },
		"RetryMax":  func(c *outbox.Config) { c.RetryBase = time.Millisecond },
	}
	with := func(k outbox.Knob, c outbox.Config) outbox.Config {
		if f := companion[k.Name]; f != nil {
			f(&c)
		}
		return c
	}
	for _, k := range outbox.Knobs() {
		t.Run(k.Name, func(t *testing.T) {
			// The default is applied, and is what the table says.
			if got := field(&defaults, k); k.Name != "Owner" && !got.Equal(knobValue(t, k, k.Default)) {
				t.Errorf("WithDefaults set %v, want the documented default %s", got, k.Default)
			}
			if k.Name == "Owner" && defaults.Owner == "" {
				t.Error("WithDefaults drew no Owner")
			}
			// The zero value is valid.
			if err := validConfig().Validate(); err != nil {
				t.Fatal(err)
			}
			if k.Min != "" && k.Kind != "string" {
				lo, hi := knobValue(t, k, bound(k.Min)), knobValue(t, k, k.Max)
				below := lo.Int() - 1
				if below == 0 { // zero is the default
					below = -1
				}
				for _, tc := range []struct {
					v  int64
					ok bool
				}{{lo.Int(), true}, {hi.Int(), true}, {below, false}, {hi.Int() + 1, false}} {
					c := with(k, validConfig())
					field(&c, k).SetInt(tc.v)
					err := c.Validate()
					if tc.ok != (err == nil) {
						t.Errorf("%s = %v: Validate = %v, want ok %v", k.Name, field(&c, k), err, tc.ok)
						continue
					}
					if err == nil {
						continue
					}
					if !errors.Is(err, outbox.ErrInvalidConfig) || !strings.Contains(err.Error(), k.Name+" is ") ||
						!strings.Contains(err.Error(), bound(k.Min)+" to "+k.Max) {
						t.Errorf("error %q does not wrap ErrInvalidConfig, or names not the knob and its bounds", err)
					}
					if _, err := outbox.New(c); !errors.Is(err, outbox.ErrInvalidConfig) {
						t.Errorf("New accepted %s = %v: %v", k.Name, field(&c, k), err)
					}
				}
			}
			// The environment variable sets it.
			value := map[string]string{"int": k.Max, "duration": k.Max, "bool": "true", "string": "node-7",
				"mode": outbox.ModePollerOnly.String(), "dead-policy": outbox.DeadSkipsKey.String()}[k.Kind]
			c := with(k, outbox.Config{})
			if err := c.LoadEnv("APP_OUTBOX_", []string{"PATH=/bin", "APP_OUTBOX_" + k.Env + "=" + value}); err != nil {
				t.Fatal(err)
			}
			if got, want := field(&c, k), knobValue(t, k, value); !got.Equal(want) || got.IsZero() {
				t.Errorf("APP_OUTBOX_%s=%s set %v, want %v", k.Env, value, got, want)
			}
		})
	}
}

// The lease, queue and worker values that broke the engine are refused by
// New, which names the knob.
func TestNewRefusesValuesThatBreakTheEngine(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(*outbox.Config)
	}{
		{"Lease", func(c *outbox.Config) { c.Lease = 2 }},
		{"Lease", func(c *outbox.Config) { c.Lease = 15 }},
		{"Lease", func(c *outbox.Config) { c.Lease = 999 * time.Millisecond }},
		{"Workers", func(c *outbox.Config) { c.Workers = 1 << 40 }},
		{"HotQueueSize", func(c *outbox.Config) { c.HotQueueSize = 1 << 40 }},
		{"ColdQueueSize", func(c *outbox.Config) { c.ColdQueueSize = 1 << 40 }},
		{"PollBatchSize", func(c *outbox.Config) { c.PollBatchSize = 1 << 40 }},
		{"AckBatchSize", func(c *outbox.Config) { c.AckBatchSize = 1 << 40 }},
		{"ListenerBatchSize", func(c *outbox.Config) { c.ListenerBatchSize = 1 << 40 }},
		{"PurgeBatchSize", func(c *outbox.Config) { c.PurgeBatchSize = 1 << 40 }},
		{"AckInterval", func(c *outbox.Config) { c.AckInterval = 1 }},
		{"RetryBase", func(c *outbox.Config) { c.RetryBase = 2 * time.Minute }}, // over the default RetryMax
	} {
		c := validConfig()
		tc.mut(&c)
		_, err := outbox.New(c)
		if !errors.Is(err, outbox.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.name+" is ") {
			t.Errorf("%s: New = %v, want ErrInvalidConfig naming it", tc.name, err)
		}
	}
}

func TestWithDefaultsKeepsWhatIsSet(t *testing.T) {
	c := validConfig()
	c.Lease, c.Workers, c.Owner, c.MetricsInterval = time.Minute, 3, "node-1", -1
	d := c.WithDefaults()
	if d.Lease != time.Minute || d.Workers != 3 || d.Owner != "node-1" || d.MetricsInterval != -1 || d.PollInterval != outbox.DefaultPollInterval {
		t.Errorf("WithDefaults = %+v", d)
	}
	if p, ok := d.RetryPolicy.(*outbox.ExponentialBackoff); !ok || p.Base != outbox.DefaultRetryBase || p.Max != outbox.DefaultRetryMax {
		t.Errorf("default RetryPolicy = %#v", d.RetryPolicy)
	}
	if d.Purger == nil || d.Clock == nil || d.Logger != quiet || d.Metrics == nil {
		t.Errorf("Purger, Clock, Logger or Metrics not defaulted: %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
}

func TestLoadEnvErrors(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"OUTBOX_POLL_INTERVL=1s"}, "OUTBOX_POLL_INTERVL: unknown variable; did you mean OUTBOX_POLL_INTERVAL?"},
		{[]string{"OUTBOX_LEASE_TIME=1s"}, "OUTBOX_LEASE_TIME: unknown variable; did you mean OUTBOX_LEASE?"},
		{[]string{"OUTBOX_TABEL=x"}, "did you mean OUTBOX_TABLE?"}, // one of also
		{[]string{"OUTBOX_SOMETHING_ELSE_ENTIRELY=1"}, "OUTBOX_SOMETHING_ELSE_ENTIRELY: unknown variable (see outbox.Knobs)"},
		{[]string{"OUTBOX_POLL_INTERVAL=often"}, `OUTBOX_POLL_INTERVAL: outbox: invalid configuration: PollInterval: "often": want a duration`},
		{[]string{"OUTBOX_WORKERS=four"}, `OUTBOX_WORKERS: outbox: invalid configuration: Workers: "four": want a whole number`},
		{[]string{"OUTBOX_WORKERS=-1"}, "OUTBOX_WORKERS: outbox: invalid configuration: Workers is -1; want 1 to 10000, or 0 for the default (4)"},
		{[]string{"OUTBOX_LEASE=15ns"}, "OUTBOX_LEASE: outbox: invalid configuration: Lease is 15ns; want 1s to 24h, or 0 for the default (15s)"},
		{[]string{"OUTBOX_MODE=sometimes"}, "want one of full, writer-only, poller-only, hot-path-only"},
		{[]string{"OUTBOX_ORDERED="}, "OUTBOX_ORDERED is set but empty"},
		{[]string{"OUTBOX_RETRY_BASE=2m", "OUTBOX_RETRY_MAX=1m"}, "OUTBOX_RETRY_BASE: outbox: invalid configuration: RetryBase is 2m; want at most RetryMax (1m)"},
	} {
		var c outbox.Config
		err := c.LoadEnv("OUTBOX_", tc.env, "TABLE")
		if !errors.Is(err, outbox.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want ErrInvalidConfig with %q", tc.env, err, tc.want)
		}
	}
	// The order of the variables does not matter: both are set before
	// either is checked.
	var c outbox.Config
	if err := c.LoadEnv("OUTBOX_", []string{"OUTBOX_RETRY_BASE=2m", "OUTBOX_RETRY_MAX=3m"}); err != nil || c.RetryBase != 2*time.Minute {
		t.Errorf("RETRY_BASE before a larger RETRY_MAX: %v, %+v", err, c)
	}
	// What other tools and the caller read is left alone; other prefixes too.
	c = outbox.Config{}
	err := c.LoadEnv("OUTBOX_", []string{"OUTBOX_DB=sqlite://x", "OUTBOX_TEST_REQUIRE_DBS=1", "OUTBOX_SCREENSHOT=a.png",
		"OUTBOX_TABLE=t", "OUTBOXX_LEASE=x", "HOME=/root", "OUTBOX_RETENTION=7d", "OUTBOX_DISABLE_PURGE=1"}, "TABLE")
	if err != nil || c.Retention != 7*24*time.Hour || !c.DisablePurge {
		t.Errorf("LoadEnv = %v, %+v", err, c)
	}
}

// ExampleConfig_LoadEnv reads a Client's knobs from the environment: here
// from a list, in a program from os.Environ() (pass nil).
func ExampleConfig_LoadEnv() {
	var cfg outbox.Config
	err := cfg.LoadEnv("OUTBOX_", []string{"OUTBOX_WORKERS=8", "OUTBOX_LEASE=30s", "OUTBOX_RETENTION=3d"})
	fmt.Println(cfg.Workers, cfg.Lease, cfg.Retention, err)

	err = cfg.LoadEnv("OUTBOX_", []string{"OUTBOX_POLL_INTERVL=1s"})
	fmt.Println(err)

	err = cfg.LoadEnv("OUTBOX_", []string{"OUTBOX_LEASE=15"})
	fmt.Println(err)
	// Output:
	// 8 30s 72h0m0s <nil>
	// outbox: invalid configuration: OUTBOX_POLL_INTERVL: unknown variable; did you mean OUTBOX_POLL_INTERVAL?
	// OUTBOX_LEASE: outbox: invalid configuration: Lease: "15": want a duration such as "500ms", "5s", "2h" or "7d"
}

// ExampleKnobs lists the knobs with their defaults and bounds, as a
// program's help might.
func ExampleKnobs() {
	for _, k := range outbox.Knobs()[:4] {
		fmt.Printf("OUTBOX_%-8s %-9s default %-13s %s\n", k.Env, k.Kind, k.Default, k.Doc)
	}
	// Output:
	// OUTBOX_MODE     mode      default full          what runs in this process
	// OUTBOX_OWNER    string    default NewOwnerID()  identifies this process in claims; unique per process start
	// OUTBOX_LEASE    duration  default 15s           how long a claim protects a row from other instances without being renewed (renewed every Lease/3)
	// OUTBOX_WORKERS  int       default 4             the number of concurrent deliveries
}
