package outboxfx_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	outboxfx "github.com/go-outbox/outbox/fxmodule"
	"github.com/rs/zerolog"
	"go.uber.org/fx"
)

// environ turns a map into "NAME=value" entries.
func environ(m map[string]string) []string {
	var env []string
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return env
}

func loadEnv(c outboxfx.Config, prefix string, env map[string]string) (outboxfx.Config, error) {
	err := c.LoadEnv(prefix, environ(env))
	return c, err
}

func TestZeroConfigHasTheCoreDefaults(t *testing.T) {
	c := outboxfx.Config{}.WithDefaults()
	core := outbox.Config{}.WithDefaults()
	if c.Table != "outbox_event" || c.Migrate {
		t.Errorf("Table %q, Migrate %v", c.Table, c.Migrate)
	}
	for _, k := range outbox.Knobs() {
		got, want := reflect.ValueOf(c.Config).FieldByName(k.Name), reflect.ValueOf(core).FieldByName(k.Name)
		if k.Name != "Owner" && !got.Equal(want) {
			t.Errorf("%s = %v, want the core's default %v", k.Name, got, want)
		}
	}
	if err := (outboxfx.Config{}).Validate(); err != nil {
		t.Fatalf("zero Config invalid: %v", err)
	}
}

// The variables are those of the knob table, plus the module's own three.
func TestEnvVarsComeFromTheKnobTable(t *testing.T) {
	var got, want []string
	for _, ev := range outboxfx.EnvVars() {
		got = append(got, ev.Name+"→"+ev.Field)
	}
	want = []string{"PRESET→(base Config)", "TABLE→Table", "MIGRATE→Migrate"}
	for _, k := range outbox.Knobs() {
		want = append(want, k.Env+"→"+k.Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("EnvVars:\n %v\nwant\n %v", got, want)
	}
}

func TestLoadEnvSetsEveryField(t *testing.T) {
	values := map[string]string{
		"TABLE": "orders_outbox", "MIGRATE": "true", "OWNER": "node-1",
		"MODE": "hot-path-only", "DISABLE_PURGE": "true", "ORDERED": "true", "ORDERED_RUN": "7", "DEAD_POLICY": "Skips-Key",
		"WORKERS": "8", "HOT_QUEUE_SIZE": "2000", "COLD_QUEUE_SIZE": "3000",
		"MAX_ATTEMPTS": "5", "RETRY_BASE": "1s", "RETRY_MAX": "2m",
		"DRAIN_TIMEOUT": "10s", "LISTENER_TIMEOUT": "20s", "ACK_BATCH_SIZE": "64", "ACK_INTERVAL": "20ms", "LISTENER_BATCH_SIZE": "10",
		"POLL_INTERVAL": "750ms", "POLL_BATCH_SIZE": "100", "SKIP_RECENT": "2s",
		"LEASE": "1m", "MAX_CLOCK_SKEW": "2s", "MAX_POLL_BACKOFF": "30s",
		"RETENTION": "3d", "DEAD_RETENTION": "30d", "PURGE_BATCH_SIZE": "250", "PURGE_INTERVAL": "15m",
		"UNROUTED_RETRY": "1m", "CLAIM_ALL": "true", "CONTROL_INTERVAL": "2s", "BREAKER_FAILURES": "5", "BREAKER_INTERVAL": "45s",
		"METRICS_INTERVAL": "30s", "HORIZON_INTERVAL": "5m", "HORIZON_AGE": "1h", "HORIZON_DEAD_TUPLES": "-1", "HORIZON_TABLE_MEGABYTES": "20480",
	}
	env := map[string]string{
		// Another data source's variables and the default's are not read.
		"OUTBOX_WORKERS": "99", "OUTBOX_BILLING_WORKERS": "77",
	}
	for _, ev := range outboxfx.EnvVars() {
		if ev.Name == "PRESET" {
			continue
		}
		if values[ev.Name] == "" {
			t.Fatalf("this test sets no value for %s", ev.Name)
		}
		env[outboxfx.EnvPrefix("orders")+ev.Name] = values[ev.Name]
	}
	c, err := loadEnv(outboxfx.Config{}, outboxfx.EnvPrefix("orders"), env)
	if err != nil {
		t.Fatal(err)
	}
	want := outboxfx.Config{Table: "orders_outbox", Migrate: true, Config: outbox.Config{
		Owner: "node-1", Mode: outbox.ModeHotPathOnly, DisablePurge: true, Ordered: true, OrderedRun: 7, DeadPolicy: outbox.DeadSkipsKey,
		Workers: 8, HotQueueSize: 2000, ColdQueueSize: 3000, MaxAttempts: 5, RetryBase: time.Second, RetryMax: 2 * time.Minute,
		DrainTimeout: 10 * time.Second, ListenerTimeout: 20 * time.Second, AckBatchSize: 64, AckInterval: 20 * time.Millisecond,
		ListenerBatchSize: 10, PollInterval: 750 * time.Millisecond, PollBatchSize: 100, SkipRecent: 2 * time.Second, Lease: time.Minute, MaxClockSkew: 2 * time.Second,
		MaxPollBackoff: 30 * time.Second, Retention: 72 * time.Hour, DeadRetention: 720 * time.Hour, PurgeBatchSize: 250,
		PurgeInterval: 15 * time.Minute, UnroutedRetry: time.Minute, ClaimAll: true, ControlInterval: 2 * time.Second,
		BreakerFailures: 5, BreakerInterval: 45 * time.Second, MetricsInterval: 30 * time.Second,
		HorizonInterval: 5 * time.Minute, HorizonAge: time.Hour, HorizonDeadTuples: -1, HorizonTableMegabytes: 20480,
	}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("LoadEnv:\n got %+v\nwant %+v", c, want)
	}
}

func TestEnvPrefix(t *testing.T) {
	for name, want := range map[string]string{"": "OUTBOX_", "orders": "OUTBOX_ORDERS_", "eu-billing": "OUTBOX_EU_BILLING_"} {
		if got := outboxfx.EnvPrefix(name); got != want {
			t.Errorf("EnvPrefix(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestLoadEnvRejectsBadValuesClearly(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		env    map[string]string
		want   string
	}{
		{"OUTBOX_", map[string]string{"OUTBOX_POLL_INTERVAL": "often"}, `OUTBOX_POLL_INTERVAL: outbox: invalid configuration: PollInterval: "often": want a duration`},
		{"OUTBOX_", map[string]string{"OUTBOX_WORKERS": "four"}, `OUTBOX_WORKERS: outbox: invalid configuration: Workers: "four": want a whole number`},
		{"OUTBOX_", map[string]string{"OUTBOX_WORKERS": "-2"}, `OUTBOX_WORKERS: outbox: invalid configuration: Workers is -2; want 1 to 10000`},
		{"OUTBOX_", map[string]string{"OUTBOX_HOT_QUEUE_SIZE": "50000000"}, `OUTBOX_HOT_QUEUE_SIZE: outbox: invalid configuration: HotQueueSize is 50000000; want 1 to 100000`},
		{"OUTBOX_", map[string]string{"OUTBOX_LEASE": "15ns"}, `OUTBOX_LEASE: outbox: invalid configuration: Lease is 15ns; want 1s to 24h`},
		{"OUTBOX_", map[string]string{"OUTBOX_DISABLE_PURGE": "maybe"}, `OUTBOX_DISABLE_PURGE: outbox: invalid configuration: DisablePurge: "maybe": want true or false`},
		{"OUTBOX_", map[string]string{"OUTBOX_MODE": "relay"}, `OUTBOX_MODE: outbox: invalid configuration: Mode: "relay": want one of full, writer-only, poller-only, hot-path-only`},
		{"OUTBOX_", map[string]string{"OUTBOX_DEAD_POLICY": "retry"}, `want one of blocks-key, skips-key`},
		{"OUTBOX_", map[string]string{"OUTBOX_MIGRATE": "yes"}, `OUTBOX_MIGRATE="yes": outbox: invalid configuration: want true or false`},
		{"OUTBOX_", map[string]string{"OUTBOX_RELAY_ENABLED": "false", "OUTBOX_MODE": "full"}, `both set Mode: keep one`},
		{"OUTBOX_", map[string]string{"OUTBOX_HOT_PATH_ENABLED": "false"}, `OUTBOX_HOT_PATH_ENABLED is no longer supported: set MODE=poller-only instead`},
		{"OUTBOX_", map[string]string{"OUTBOX_POLLER_ENABLED": "false"}, `OUTBOX_POLLER_ENABLED is no longer supported: set MODE=hot-path-only instead`},
		{"OUTBOX_", map[string]string{"OUTBOX_OWN_RECLAIM_AFTER": "1s"}, `OUTBOX_OWN_RECLAIM_AFTER is no longer supported`},
		{"OUTBOX_", map[string]string{"OUTBOX_PURGE_ENABLED": "false"}, `OUTBOX_PURGE_ENABLED is no longer supported: set DISABLE_PURGE=true instead`},
		{"OUTBOX_", map[string]string{"OUTBOX_BATCH_SIZE": "10"}, `OUTBOX_BATCH_SIZE is no longer supported: it is called POLL_BATCH_SIZE now`},
		{"OUTBOX_", map[string]string{"OUTBOX_POLL_MAX_BACKOFF": "1m"}, `OUTBOX_POLL_MAX_BACKOFF is no longer supported: it is called MAX_POLL_BACKOFF now`},
		{"OUTBOX_", map[string]string{"OUTBOX_TABLE": "outbox; DROP TABLE x"}, `table name "outbox; DROP TABLE x" is not allowed`},
		{"OUTBOX_", map[string]string{"OUTBOX_PRESET": "cluster"}, `unknown preset "cluster" (want one of default, single-node, multi-node, writer-only)`},
		{"OUTBOX_", map[string]string{"OUTBOX_RETRY_BASE": "2m", "OUTBOX_RETRY_MAX": "1m"}, `OUTBOX_RETRY_BASE: outbox: invalid configuration: RetryBase is 2m; want at most RetryMax (1m)`},
		{"OUTBOX_", map[string]string{"OUTBOX_WORKERS": " "}, `OUTBOX_WORKERS is set but empty`},
		{"OUTBOX_", map[string]string{"OUTBOX_TABLE": ""}, `OUTBOX_TABLE is set but empty`},
		// Unknown variables name the closest known one.
		{"OUTBOX_", map[string]string{"OUTBOX_POLL_INTERVL": "1s"}, `OUTBOX_POLL_INTERVL: unknown variable; did you mean OUTBOX_POLL_INTERVAL?`},
		{"OUTBOX_", map[string]string{"OUTBOX_TABEL": "x"}, `OUTBOX_TABEL: unknown variable; did you mean OUTBOX_TABLE?`},
		{"OUTBOX_", map[string]string{"OUTBOX_LISTENER_BATCHSIZE": "5"}, `did you mean OUTBOX_LISTENER_BATCH_SIZE?`},
		{"OUTBOX_ORDERS_", map[string]string{"OUTBOX_ORDERS_WORKRS": "5"}, `OUTBOX_ORDERS_WORKRS: unknown variable; did you mean OUTBOX_ORDERS_WORKERS?`},
		{"OUTBOX_ORDERS_", map[string]string{"OUTBOX_ORDERS_MIGRAT": "true"}, `did you mean OUTBOX_ORDERS_MIGRATE?`},
	} {
		_, err := loadEnv(outboxfx.Config{}, tc.prefix, tc.env)
		if err == nil {
			t.Errorf("%v: no error", tc.env)
			continue
		}
		if !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("%v: error does not wrap ErrInvalidConfig: %v", tc.env, err)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v:\n got %v\nwant it to contain %q", tc.env, err, tc.want)
		}
	}
	// The default data source leaves named data sources' variables, and
	// other tools', alone.
	c, err := loadEnv(outboxfx.Config{}, "OUTBOX_", map[string]string{"OUTBOX_ORDERS_WORKERS": "3", "OUTBOX_EU_BILLING_POLL_BATCH_SIZE": "7",
		"OUTBOX_ORDERS_RELAY_ENABLED": "false", "OUTBOX_DB": "sqlite:///tmp/x.db", "OUTBOX_TEST_REQUIRE_DBS": "1", "OUTBOX_LEASE": "20s"})
	if err != nil || c.Workers != 0 || c.Lease != 20*time.Second {
		t.Errorf("default data source: %+v, %v", c, err)
	}
}

// A bad value in the environment fails the documented fx setup with an
// error that names the variable, and with no wiring error about types
// that other options need.
func TestBadEnvValueFailsTheAppNamingTheVariable(t *testing.T) {
	for env, want := range map[string]string{
		"OUTBOX_ORDERS_LEASE=15":         `OUTBOX_ORDERS_LEASE: outbox: invalid configuration: Lease: "15": want a duration`,
		"OUTBOX_ORDERS_LEASE=15ns":       `OUTBOX_ORDERS_LEASE: outbox: invalid configuration: Lease is 15ns; want 1s to 24h`,
		"OUTBOX_ORDERS_POLL_INTERVL=1s":  `OUTBOX_ORDERS_POLL_INTERVL: unknown variable; did you mean OUTBOX_ORDERS_POLL_INTERVAL?`,
		"OUTBOX_ORDERS_WORKERS=99999999": `OUTBOX_ORDERS_WORKERS: outbox: invalid configuration: Workers is 99999999; want 1 to 10000`,
	} {
		var out strings.Builder
		var deps struct {
			fx.In
			Client *outbox.Client `name:"orders"`
		}
		app := fx.New(
			fx.Supply(zerolog.New(&out)),
			outboxfx.WithZerolog(),
			outboxfx.ZerologLogger(),
			outboxfx.SQLDB("orders", "sqlite", dsn(t, "orders")),
			outboxfx.DataSource("orders", outboxfx.FromEnviron([]string{env})),
			fx.Populate(&deps),
		)
		err := app.Err()
		if err == nil {
			t.Fatalf("%s: the app was built", env)
		}
		if !errors.Is(err, outbox.ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant it to contain %q", env, err, want)
		}
		if strings.Contains(err.Error()+out.String(), "missing type") {
			t.Errorf("%s: a wiring error:\n%v\n%s", env, err, out.String())
		}
	}
}

func TestPresets(t *testing.T) {
	single, err := outboxfx.PresetSingleNode.Config()
	if err != nil || single.PollInterval != time.Second || single.Lease != 30*time.Second {
		t.Fatalf("single-node = %+v, %v", single, err)
	}
	multi, err := outboxfx.PresetMultiNode.Config()
	if err != nil || multi.Owner == "" || multi.Lease != outbox.DefaultLease {
		t.Fatalf("multi-node = %+v, %v", multi, err)
	}
	if other, _ := outboxfx.PresetMultiNode.Config(); other.Owner == multi.Owner {
		t.Fatalf("multi-node owner ids must be unique per start, got %q twice", multi.Owner)
	}
	writer, err := outboxfx.PresetWriterOnly.Config()
	if err != nil || !reflect.DeepEqual(writer, outboxfx.Config{Config: outbox.Config{Mode: outbox.ModeWriterOnly}}) {
		t.Fatalf("writer-only = %+v, %v", writer, err)
	}
	def, err := outboxfx.PresetDefault.Config()
	if err != nil || !reflect.DeepEqual(def, outboxfx.Config{}) {
		t.Fatalf("default = %+v, %v", def, err)
	}
	// The environment's PRESET replaces the base; later variables override it.
	c, err := loadEnv(outboxfx.Config{Config: outbox.Config{Workers: 9}}, "OUTBOX_", map[string]string{"OUTBOX_PRESET": "Single-Node", "OUTBOX_LEASE": "10s"})
	if err != nil || c.Workers != 0 || c.PollInterval != time.Second || c.Lease != 10*time.Second {
		t.Fatalf("PRESET then LEASE = %+v, %v", c, err)
	}
	// Options resolve the same way: preset, then environment.
	c, err = outboxfx.ResolveConfig("orders", outboxfx.WithPreset(outboxfx.PresetWriterOnly),
		outboxfx.FromEnviron(environ(map[string]string{"OUTBOX_ORDERS_MODE": "POLLER-ONLY", "OUTBOX_ORDERS_DISABLE_PURGE": "true"})))
	if err != nil || c.Mode != outbox.ModePollerOnly || !c.DisablePurge {
		t.Fatalf("ResolveConfig = %+v, %v", c, err)
	}
	if _, err := outboxfx.ResolveConfig("9lives"); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("bad data source name: %v", err)
	}
}

// The configuration table of docs/fx.md names every variable.
func TestDocsListEveryEnvVar(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "fx.md"))
	if err != nil {
		t.Skipf("docs/fx.md not found next to the module: %v", err)
	}
	for _, ev := range outboxfx.EnvVars() {
		if !strings.Contains(string(doc), "`"+ev.Name+"`") || !strings.Contains(string(doc), "`"+ev.Field+"`") && ev.Kind != "preset" {
			t.Errorf("docs/fx.md does not document %s (%s)", ev.Name, ev.Field)
		}
	}
}
