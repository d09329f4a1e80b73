package outbox

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestConfigValidation: the parts take the Client's Config, validated
// once by Config.Validate (TestNewValidatesConfig covers every setting);
// what is left to check here is the PurgeScheduler's own configuration,
// which inbox and idempotency use on their own, and the writer's hooks.
func TestConfigValidation(t *testing.T) {
	st := newMemStore()
	okPurge := func(mut func(*PurgeConfig)) func() error {
		return func() error {
			cfg := PurgeConfig{Purger: st}
			mut(&cfg)
			_, err := NewPurgeScheduler(cfg)
			return err
		}
	}
	okWriter := func(mut func(*Config)) func() error {
		return func() error {
			cfg := Config{TxContext: fakeTxContext{}, Store: st}
			mut(&cfg)
			cfg = cfg.WithDefaults()
			_, err := newWriter(cfg, newClaims(cfg, 0), nil)
			return err
		}
	}
	tests := []struct {
		name string
		new  func() error
	}{
		{"purge no purger", okPurge(func(c *PurgeConfig) { c.Purger = nil })},
		{"purge negative retention", okPurge(func(c *PurgeConfig) { c.Retention = -1 })},
		{"purge negative batch", okPurge(func(c *PurgeConfig) { c.BatchSize = -1 })},
		{"purge negative interval", okPurge(func(c *PurgeConfig) { c.Interval = -1 })},
		{"writer nil hook", okWriter(func(c *Config) { c.Hooks = []WriterHook{NopHook{}, nil} })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.new(); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("err = %v, want ErrInvalidConfig", err)
			}
		})
	}

	// The unmodified configurations are valid: the failures above come from
	// the one setting each case changes.
	for name, f := range map[string]func() error{
		"purge":  okPurge(func(*PurgeConfig) {}),
		"writer": okWriter(func(*Config) {}),
	} {
		if err := f(); err != nil {
			t.Errorf("valid %s config rejected: %v", name, err)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	st := newMemStore()
	c := (Config{Store: st, TxContext: fakeTxContext{}}).WithDefaults()
	d := newDispatcher(c, &Registry{}, newClaims(c, ackRoom(c)))
	if c.Workers != DefaultWorkers || c.HotQueueSize != DefaultQueueSize || c.ColdQueueSize != DefaultColdQueueSize ||
		c.MaxAttempts != DefaultMaxAttempts || c.DrainTimeout != DefaultDrainTimeout ||
		c.AckBatchSize != DefaultAckBatchSize || c.AckInterval != DefaultAckInterval || c.Lease != DefaultLease || c.ListenerTimeout != DefaultListenerTimeout {
		t.Errorf("dispatcher defaults = %+v", c)
	}
	if DefaultWorkers != 4 || DefaultQueueSize != 1000 || DefaultMaxAttempts != 10 || DefaultDrainTimeout != 5*time.Second ||
		DefaultLease != 15*time.Second || DefaultListenerTimeout != 30*time.Second {
		t.Error("dispatcher defaults differ from the specification")
	}
	if cap(d.hot) != 1000 || cap(d.cold) != 4000 {
		t.Errorf("queue capacities = %d/%d", cap(d.hot), cap(d.cold))
	}
	if d.Owner() == "" || d.Owner() == NewOwnerID() {
		t.Errorf("owner = %q, want a fresh unique id", d.Owner())
	}
	if _, ok := c.RetryPolicy.(*ExponentialBackoff); !ok {
		t.Errorf("default retry policy = %T", c.RetryPolicy)
	}
	if c.PollInterval != 5*time.Second || c.PollBatchSize != 50 || c.MaxPollBackoff != time.Minute {
		t.Errorf("poller defaults = %v, %d, %v", c.PollInterval, c.PollBatchSize, c.MaxPollBackoff)
	}

	s, err := NewPurgeScheduler(PurgeConfig{Purger: st})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.Retention != 7*24*time.Hour || s.cfg.BatchSize != 500 || s.cfg.Interval != time.Hour {
		t.Errorf("purge defaults = %+v", s.cfg)
	}
}

func TestNewOwnerIDUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := NewOwnerID()
		if id == "" || len(id) > 128 || seen[id] {
			t.Fatalf("bad or repeated owner id %q", id)
		}
		seen[id] = true
	}
}

// TestClientAssembly checks which parts each Mode builds, how they are
// wired, and that the Client's settings reach them.
func TestClientAssembly(t *testing.T) {
	st := newMemStore()
	for _, tc := range []struct {
		cfg                            Config
		dispatcher, poller, purge, hot bool
		writer                         bool
	}{
		{Config{}, true, true, true, true, true},
		{Config{Mode: ModeWriterOnly}, false, false, false, false, true},
		{Config{Mode: ModePollerOnly}, true, true, true, false, true},
		{Config{Mode: ModeHotPathOnly}, true, false, false, true, true},
		{Config{DisablePurge: true}, true, true, false, true, true},
		{Config{Mode: ModePollerOnly, TxContext: noTxContext{}}, true, true, true, false, false},
	} {
		t.Run(tc.cfg.Mode.String(), func(t *testing.T) {
			cfg := tc.cfg
			cfg.Store = st
			switch cfg.TxContext.(type) {
			case nil:
				cfg.TxContext = fakeTxContext{}
			case noTxContext:
				cfg.TxContext = nil
			}
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if (c.d != nil) != tc.dispatcher || (c.poller != nil) != tc.poller || (c.purge != nil) != tc.purge || (c.writer != nil) != tc.writer {
				t.Fatalf("dispatcher %v poller %v purge %v writer %v, want %v %v %v %v",
					c.d != nil, c.poller != nil, c.purge != nil, c.writer != nil, tc.dispatcher, tc.poller, tc.purge, tc.writer)
			}
			if c.writer != nil && (c.writer.hot != nil) != tc.hot {
				t.Errorf("writer's hot path = %v, want %v", c.writer.hot != nil, tc.hot)
			}
			if c.Owner() == "" || c.d != nil && c.d.Owner() != c.Owner() {
				t.Errorf("client owner %q, dispatcher owner %q", c.Owner(), c.d.Owner())
			}
			if c.purge != nil && c.purge.cfg.Purger != Purger(st) {
				t.Error("the Purger did not default to the Store")
			}
		})
	}
	c, err := New(Config{Store: st, TxContext: fakeTxContext{}, Owner: "node-1", Lease: time.Minute, Workers: 3,
		HotQueueSize: 5, ColdQueueSize: 7, MaxAttempts: 2, PollInterval: 100 * time.Millisecond, PollBatchSize: 9,
		SkipRecent: time.Second, MaxPollBackoff: 2 * time.Second, Retention: time.Hour, PurgeInterval: time.Minute, PurgeBatchSize: 11})
	if err != nil {
		t.Fatal(err)
	}
	if c.Owner() != "node-1" || c.d.cfg.Lease != time.Minute || c.d.cfg.Workers != 3 || cap(c.d.hot) != 5 || cap(c.d.cold) != 7 ||
		c.d.cfg.MaxAttempts != 2 || c.poller.cfg.PollInterval != 100*time.Millisecond ||
		c.poller.cfg.PollBatchSize != 9 || c.poller.cfg.SkipRecent != time.Second || c.poller.cfg.MaxPollBackoff != 2*time.Second ||
		c.purge.cfg.Retention != time.Hour || c.purge.cfg.Interval != time.Minute || c.purge.cfg.BatchSize != 11 {
		t.Errorf("settings did not reach the parts: dispatcher %+v, poller %+v, purge %+v", c.d.cfg, c.poller.cfg, c.purge.cfg)
	}
}

// noTxContext marks a test case without a TxContext.
type noTxContext struct{}

func (noTxContext) Current(context.Context) (Tx, error) { return nil, ErrNoTransaction }
