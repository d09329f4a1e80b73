package outboxfx_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	outboxfx "github.com/go-outbox/outbox/fxmodule"
)

func lookupMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestZeroConfigHasTheSpecDefaults(t *testing.T) {
	c := outboxfx.Config{}.WithDefaults()
	want := outboxfx.Config{
		Table: "outbox_event", Workers: 4, HotQueueSize: 1000, ColdQueueSize: 4000, MaxAttempts: 10,
		RetryBase: 200 * time.Millisecond, RetryMax: time.Minute, DrainTimeout: 5 * time.Second, ListenerTimeout: 30 * time.Second,
		AckBatchSize: 256, AckInterval: 5 * time.Millisecond,
		PollInterval: 5 * time.Second, PollBatchSize: 50, Lease: 15 * time.Second,
		PollMaxBackoff: time.Minute, Retention: 7 * 24 * time.Hour, PurgeBatchSize: 500, PurgeInterval: time.Hour,
		MetricsInterval: 15 * time.Second,
	}
	if c != want {
		t.Fatalf("defaults:\n got %+v\nwant %+v", c, want)
	}
	if c.Mode != outbox.ModeFull {
		t.Fatalf("default mode %s, want full", c.Mode)
	}
	if err := (outboxfx.Config{}).Validate(); err != nil {
		t.Fatalf("zero Config invalid: %v", err)
	}
}

func TestLoadEnvSetsEveryField(t *testing.T) {
	env := map[string]string{
		"OUTBOX_ORDERS_TABLE": "orders_outbox", "OUTBOX_ORDERS_MIGRATE": "true", "OUTBOX_ORDERS_OWNER": "node-1",
		"OUTBOX_ORDERS_MODE": "hot-path-only", "OUTBOX_ORDERS_PURGE_ENABLED": "false",
		"OUTBOX_ORDERS_ORDERED": "true", "OUTBOX_ORDERS_DEAD_POLICY": "Skips-Key",
		"OUTBOX_ORDERS_WORKERS": "8", "OUTBOX_ORDERS_HOT_QUEUE_SIZE": "2000", "OUTBOX_ORDERS_COLD_QUEUE_SIZE": "3000",
		"OUTBOX_ORDERS_MAX_ATTEMPTS": "5", "OUTBOX_ORDERS_RETRY_BASE": "1s", "OUTBOX_ORDERS_RETRY_MAX": "2m",
		"OUTBOX_ORDERS_DRAIN_TIMEOUT": "10s", "OUTBOX_ORDERS_LISTENER_TIMEOUT": "20s", "OUTBOX_ORDERS_ACK_BATCH_SIZE": "64", "OUTBOX_ORDERS_ACK_INTERVAL": "20ms",
		"OUTBOX_ORDERS_POLL_INTERVAL": "750ms", "OUTBOX_ORDERS_BATCH_SIZE": "100", "OUTBOX_ORDERS_SKIP_RECENT": "2s",
		"OUTBOX_ORDERS_LEASE": "1m", "OUTBOX_ORDERS_POLL_MAX_BACKOFF": "30s",
		"OUTBOX_ORDERS_RETENTION": "3d", "OUTBOX_ORDERS_DEAD_RETENTION": "30d", "OUTBOX_ORDERS_PURGE_BATCH_SIZE": "250", "OUTBOX_ORDERS_PURGE_INTERVAL": "15m",
		"OUTBOX_ORDERS_METRICS_INTERVAL": "30s",
		// Another data source's variables and the default's are not read.
		"OUTBOX_WORKERS": "99", "OUTBOX_BILLING_WORKERS": "77",
	}
	c, err := outboxfx.Config{}.LoadEnv(outboxfx.EnvPrefix("orders"), lookupMap(env))
	if err != nil {
		t.Fatal(err)
	}
	want := outboxfx.Config{
		Table: "orders_outbox", Migrate: true, Owner: "node-1", Mode: outbox.ModeHotPathOnly, DisablePurge: true,
		Ordered: true, DeadPolicy: outbox.DeadSkipsKey,
		Workers: 8, HotQueueSize: 2000, ColdQueueSize: 3000, MaxAttempts: 5, RetryBase: time.Second, RetryMax: 2 * time.Minute,
		DrainTimeout: 10 * time.Second, ListenerTimeout: 20 * time.Second, AckBatchSize: 64, AckInterval: 20 * time.Millisecond,
		PollInterval: 750 * time.Millisecond, PollBatchSize: 100, SkipRecent: 2 * time.Second, Lease: time.Minute,
		PollMaxBackoff: 30 * time.Second,
		Retention:      72 * time.Hour, DeadRetention: 720 * time.Hour, PurgeBatchSize: 250, PurgeInterval: 15 * time.Minute,
		MetricsInterval: 30 * time.Second,
	}
	if c != want {
		t.Fatalf("LoadEnv:\n got %+v\nwant %+v", c, want)
	}
	if len(outboxfx.EnvVars()) != 28 {
		t.Fatalf("EnvVars lists %d variables; this test sets 27 plus PRESET", len(outboxfx.EnvVars()))
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
		env  map[string]string
		want string
	}{
		{map[string]string{"OUTBOX_POLL_INTERVAL": "often"}, `OUTBOX_POLL_INTERVAL="often": outbox: invalid configuration: want a duration`},
		{map[string]string{"OUTBOX_WORKERS": "four"}, `OUTBOX_WORKERS="four": outbox: invalid configuration: want an integer`},
		{map[string]string{"OUTBOX_WORKERS": "-2"}, `OUTBOX_WORKERS="-2": outbox: invalid configuration: Workers must not be negative, got -2`},
		{map[string]string{"OUTBOX_HOT_QUEUE_SIZE": "50000000"}, `HotQueueSize must be at most 1000000`},
		{map[string]string{"OUTBOX_LEASE": "-5m"}, `Lease must not be negative`},
		{map[string]string{"OUTBOX_PURGE_ENABLED": "maybe"}, `OUTBOX_PURGE_ENABLED="maybe": outbox: invalid configuration: want true or false`},
		{map[string]string{"OUTBOX_MODE": "relay"}, `OUTBOX_MODE="relay": outbox: invalid configuration: want one of full, writer-only, poller-only, hot-path-only`},
		{map[string]string{"OUTBOX_DEAD_POLICY": "retry"}, `OUTBOX_DEAD_POLICY="retry": outbox: invalid configuration: want blocks-key or skips-key`},
		{map[string]string{"OUTBOX_ORDERED": "yes"}, `OUTBOX_ORDERED="yes": outbox: invalid configuration: want true or false`},
		{map[string]string{"OUTBOX_RELAY_ENABLED": "false"}, `OUTBOX_RELAY_ENABLED is no longer supported: set MODE=writer-only instead`},
		{map[string]string{"OUTBOX_HOT_PATH_ENABLED": "false"}, `OUTBOX_HOT_PATH_ENABLED is no longer supported: set MODE=poller-only instead`},
		{map[string]string{"OUTBOX_POLLER_ENABLED": "false"}, `OUTBOX_POLLER_ENABLED is no longer supported: set MODE=hot-path-only instead`},
		{map[string]string{"OUTBOX_OWN_RECLAIM_AFTER": "1s"}, `OUTBOX_OWN_RECLAIM_AFTER is no longer supported`},
		{map[string]string{"OUTBOX_TABLE": "outbox; DROP TABLE x"}, `table name "outbox; DROP TABLE x" is not allowed`},
		{map[string]string{"OUTBOX_PRESET": "cluster"}, `unknown preset "cluster" (want one of default, single-node, multi-node, writer-only)`},
		{map[string]string{"OUTBOX_RETRY_BASE": "2m", "OUTBOX_RETRY_MAX": "1m"}, `RetryBase (2m0s) must not exceed RetryMax (1m0s)`},
		{map[string]string{"OUTBOX_WORKERS": " "}, `OUTBOX_WORKERS is set but empty`},
	} {
		_, err := outboxfx.Config{}.LoadEnv("OUTBOX_", lookupMap(tc.env))
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
	if err != nil || writer != (outboxfx.Config{Mode: outbox.ModeWriterOnly}) {
		t.Fatalf("writer-only = %+v, %v", writer, err)
	}
	def, err := outboxfx.PresetDefault.Config()
	if err != nil || def != (outboxfx.Config{}) {
		t.Fatalf("default = %+v, %v", def, err)
	}
	// The environment's PRESET replaces the base; later variables override it.
	c, err := outboxfx.Config{Workers: 9}.LoadEnv("OUTBOX_", lookupMap(map[string]string{"OUTBOX_PRESET": "Single-Node", "OUTBOX_LEASE": "10s"}))
	if err != nil || c.Workers != 0 || c.PollInterval != time.Second || c.Lease != 10*time.Second {
		t.Fatalf("PRESET then LEASE = %+v, %v", c, err)
	}
	// Options resolve the same way: preset, then environment.
	c, err = outboxfx.ResolveConfig("orders", outboxfx.WithPreset(outboxfx.PresetWriterOnly),
		outboxfx.FromEnvLookup(lookupMap(map[string]string{"OUTBOX_ORDERS_MODE": "POLLER-ONLY", "OUTBOX_ORDERS_PURGE_ENABLED": "false"})))
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
