package outbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigValidation(t *testing.T) {
	st, reg := newMemStore(), &Registry{}
	d, err := NewDispatcher(DispatcherConfig{Store: st, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	okDispatcher := func(mut func(*DispatcherConfig)) func() error {
		return func() error {
			cfg := DispatcherConfig{Store: st, Registry: reg}
			mut(&cfg)
			_, err := NewDispatcher(cfg)
			return err
		}
	}
	okPoller := func(mut func(*pollerConfig)) func() error {
		return func() error {
			cfg := pollerConfig{Dispatcher: d}
			mut(&cfg)
			_, err := newPoller(cfg)
			return err
		}
	}
	okPurge := func(mut func(*PurgeConfig)) func() error {
		return func() error {
			cfg := PurgeConfig{Purger: st}
			mut(&cfg)
			_, err := NewPurgeScheduler(cfg)
			return err
		}
	}
	okWriter := func(mut func(*WriterConfig)) func() error {
		return func() error {
			cfg := WriterConfig{TxContext: fakeTxContext{}, Store: st}
			mut(&cfg)
			_, err := NewWriter(cfg)
			return err
		}
	}
	tests := []struct {
		name string
		new  func() error
	}{
		{"dispatcher no store", okDispatcher(func(c *DispatcherConfig) { c.Store = nil })},
		{"dispatcher no registry", okDispatcher(func(c *DispatcherConfig) { c.Registry = nil })},
		{"dispatcher negative workers", okDispatcher(func(c *DispatcherConfig) { c.Workers = -1 })},
		{"dispatcher negative hot queue", okDispatcher(func(c *DispatcherConfig) { c.HotQueueSize = -1 })},
		{"dispatcher negative cold queue", okDispatcher(func(c *DispatcherConfig) { c.ColdQueueSize = -1 })},
		{"dispatcher negative max attempts", okDispatcher(func(c *DispatcherConfig) { c.MaxAttempts = -1 })},
		{"dispatcher negative ack batch", okDispatcher(func(c *DispatcherConfig) { c.AckBatchSize = -1 })},
		{"dispatcher negative drain timeout", okDispatcher(func(c *DispatcherConfig) { c.DrainTimeout = -time.Second })},
		{"dispatcher negative ack interval", okDispatcher(func(c *DispatcherConfig) { c.AckInterval = -time.Millisecond })},
		{"dispatcher negative lease", okDispatcher(func(c *DispatcherConfig) { c.Lease = -time.Second })},
		{"dispatcher owner too long", okDispatcher(func(c *DispatcherConfig) { c.Owner = strings.Repeat("o", 129) })},
		{"poller no dispatcher", okPoller(func(c *pollerConfig) { c.Dispatcher = nil })},
		{"poller negative interval", okPoller(func(c *pollerConfig) { c.Interval = -1 })},
		{"poller negative batch", okPoller(func(c *pollerConfig) { c.BatchSize = -1 })},
		{"poller negative skip recent", okPoller(func(c *pollerConfig) { c.SkipRecent = -1 })},
		{"poller negative max backoff", okPoller(func(c *pollerConfig) { c.MaxBackoff = -1 })},
		{"purge no purger", okPurge(func(c *PurgeConfig) { c.Purger = nil })},
		{"purge negative retention", okPurge(func(c *PurgeConfig) { c.Retention = -1 })},
		{"purge negative batch", okPurge(func(c *PurgeConfig) { c.BatchSize = -1 })},
		{"purge negative interval", okPurge(func(c *PurgeConfig) { c.Interval = -1 })},
		{"writer no tx context", okWriter(func(c *WriterConfig) { c.TxContext = nil })},
		{"writer no store", okWriter(func(c *WriterConfig) { c.Store = nil })},
		{"writer nil hook", okWriter(func(c *WriterConfig) { c.Hooks = []WriterHook{NopHook{}, nil} })},
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
		"dispatcher": okDispatcher(func(*DispatcherConfig) {}),
		"poller":     okPoller(func(*pollerConfig) {}),
		"purge":      okPurge(func(*PurgeConfig) {}),
		"writer":     okWriter(func(*WriterConfig) {}),
	} {
		if err := f(); err != nil {
			t.Errorf("valid %s config rejected: %v", name, err)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	st := newMemStore()
	d, err := NewDispatcher(DispatcherConfig{Store: st, Registry: &Registry{}})
	if err != nil {
		t.Fatal(err)
	}
	c := d.cfg
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

	p, err := newPoller(pollerConfig{Dispatcher: d})
	if err != nil {
		t.Fatal(err)
	}
	if p.cfg.Interval != 5*time.Second || p.cfg.BatchSize != 50 || p.cfg.MaxBackoff != time.Minute {
		t.Errorf("poller defaults = %+v", p.cfg)
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
		c.d.cfg.MaxAttempts != 2 || c.poller.cfg.Interval != 100*time.Millisecond ||
		c.poller.cfg.BatchSize != 9 || c.poller.cfg.SkipRecent != time.Second || c.poller.cfg.MaxBackoff != 2*time.Second ||
		c.purge.cfg.Retention != time.Hour || c.purge.cfg.Interval != time.Minute || c.purge.cfg.BatchSize != 11 {
		t.Errorf("settings did not reach the parts: dispatcher %+v, poller %+v, purge %+v", c.d.cfg, c.poller.cfg, c.purge.cfg)
	}
}

// noTxContext marks a test case without a TxContext.
type noTxContext struct{}

func (noTxContext) Current(context.Context) (Tx, error) { return nil, ErrNoTransaction }
