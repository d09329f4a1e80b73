package outbox

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// DEV-PLAN-017's variables configure a Client instead of failing start.
func TestLoadEnvAliases(t *testing.T) {
	var c Config
	err := c.LoadEnv("OUTBOX_", []string{
		"OUTBOX_RELAY_ENABLED=false", "OUTBOX_RELAY_POLL_INTERVAL=1s", "OUTBOX_RELAY_BATCH_SIZE=100",
		"OUTBOX_RELAY_LOCK_TTL=60s", "OUTBOX_RELAY_MAX_ATTEMPTS=25",
		"OUTBOX_CLEANER_ENABLED=false", "OUTBOX_CLEANER_RETENTION=168h",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Mode: ModeWriterOnly, PollInterval: time.Second, PollBatchSize: 100, Lease: time.Minute,
		MaxAttempts: 25, DisablePurge: true, Retention: 168 * time.Hour}
	if c.Mode != want.Mode || c.PollInterval != want.PollInterval || c.PollBatchSize != want.PollBatchSize || c.Lease != want.Lease ||
		c.MaxAttempts != want.MaxAttempts || c.DisablePurge != want.DisablePurge || c.Retention != want.Retention {
		t.Errorf("LoadEnv(aliases) = %+v; want %+v", c, want)
	}

	var on Config
	if err := on.LoadEnv("OUTBOX_", []string{"OUTBOX_RELAY_ENABLED=true", "OUTBOX_CLEANER_ENABLED=1"}); err != nil || on.Mode != ModeFull || on.DisablePurge {
		t.Errorf("switches on: %+v, %v; want the defaults left alone", on, err)
	}

	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"OUTBOX_RELAY_LOCK_TTL=30s", "OUTBOX_LEASE=20s"}, "OUTBOX_RELAY_LOCK_TTL and OUTBOX_LEASE both set Lease"},
		{[]string{"OUTBOX_RELAY_ENABLED=maybe"}, "OUTBOX_RELAY_ENABLED: "},
		{[]string{"OUTBOX_RELAY_LOCK_TTL=10ms"}, "OUTBOX_RELAY_LOCK_TTL: "},
		{[]string{"OUTBOX_CLEANER_RETENTION="}, "OUTBOX_CLEANER_RETENTION is set but empty"},
		{[]string{"OUTBOX_RELAY_LOCK_TT=1m"}, "did you mean OUTBOX_RELAY_LOCK_TTL"},
	} {
		var c Config
		err := c.LoadEnv("OUTBOX_", tc.env)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadEnv(%q) = %v; want ErrInvalidConfig saying %q", tc.env, err, tc.want)
		}
	}
	for _, a := range EnvAliases() {
		if a.Doc == "" || a.Env == "" {
			t.Errorf("alias %+v is not described", a)
		}
		if !slices.ContainsFunc(Knobs(), func(k Knob) bool { return k.Name == a.Knob }) {
			t.Errorf("alias %s sets %s, which is no knob", a.Env, a.Knob)
		}
	}
}
