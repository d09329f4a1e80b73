package outbox

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigValidation(t *testing.T) {
	st, db, reg := newMemStore(), nopExecutor{}, NewRegistry()
	d, err := NewDispatcher(DispatcherConfig{Store: st, DB: db, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	okDispatcher := func(mut func(*DispatcherConfig)) func() error {
		return func() error {
			cfg := DispatcherConfig{Store: st, DB: db, Registry: reg}
			mut(&cfg)
			_, err := NewDispatcher(cfg)
			return err
		}
	}
	okPoller := func(mut func(*PollerConfig)) func() error {
		return func() error {
			cfg := PollerConfig{Store: st, DB: db, Dispatcher: d}
			mut(&cfg)
			_, err := NewPoller(cfg)
			return err
		}
	}
	okPurge := func(mut func(*PurgeConfig)) func() error {
		return func() error {
			cfg := PurgeConfig{Purger: st, DB: db}
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
		{"dispatcher no db", okDispatcher(func(c *DispatcherConfig) { c.DB = nil })},
		{"dispatcher no registry", okDispatcher(func(c *DispatcherConfig) { c.Registry = nil })},
		{"dispatcher negative workers", okDispatcher(func(c *DispatcherConfig) { c.Workers = -1 })},
		{"dispatcher negative hot queue", okDispatcher(func(c *DispatcherConfig) { c.HotQueueSize = -1 })},
		{"dispatcher negative cold queue", okDispatcher(func(c *DispatcherConfig) { c.ColdQueueSize = -1 })},
		{"dispatcher negative max attempts", okDispatcher(func(c *DispatcherConfig) { c.MaxAttempts = -1 })},
		{"dispatcher negative ack batch", okDispatcher(func(c *DispatcherConfig) { c.AckBatchSize = -1 })},
		{"dispatcher negative drain timeout", okDispatcher(func(c *DispatcherConfig) { c.DrainTimeout = -time.Second })},
		{"dispatcher negative ack interval", okDispatcher(func(c *DispatcherConfig) { c.AckInterval = -time.Millisecond })},
		{"dispatcher owner too long", okDispatcher(func(c *DispatcherConfig) { c.Owner = strings.Repeat("o", 129) })},
		{"poller no store", okPoller(func(c *PollerConfig) { c.Store = nil })},
		{"poller no db", okPoller(func(c *PollerConfig) { c.DB = nil })},
		{"poller no dispatcher", okPoller(func(c *PollerConfig) { c.Dispatcher = nil })},
		{"poller negative interval", okPoller(func(c *PollerConfig) { c.Interval = -1 })},
		{"poller negative batch", okPoller(func(c *PollerConfig) { c.BatchSize = -1 })},
		{"poller negative skip recent", okPoller(func(c *PollerConfig) { c.SkipRecent = -1 })},
		{"poller negative lease", okPoller(func(c *PollerConfig) { c.Lease = -1 })},
		{"poller negative own reclaim", okPoller(func(c *PollerConfig) { c.OwnReclaimAfter = -1 })},
		{"poller negative max backoff", okPoller(func(c *PollerConfig) { c.MaxBackoff = -1 })},
		{"purge no purger", okPurge(func(c *PurgeConfig) { c.Purger = nil })},
		{"purge no db", okPurge(func(c *PurgeConfig) { c.DB = nil })},
		{"purge negative retention", okPurge(func(c *PurgeConfig) { c.Retention = -1 })},
		{"purge negative batch", okPurge(func(c *PurgeConfig) { c.BatchSize = -1 })},
		{"purge negative interval", okPurge(func(c *PurgeConfig) { c.Interval = -1 })},
		{"writer no tx context", okWriter(func(c *WriterConfig) { c.TxContext = nil })},
		{"writer no store", okWriter(func(c *WriterConfig) { c.Store = nil })},
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
		"poller":     okPoller(func(*PollerConfig) {}),
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
	d, err := NewDispatcher(DispatcherConfig{Store: st, DB: nopExecutor{}, Registry: NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	c := d.cfg
	if c.Workers != DefaultWorkers || c.HotQueueSize != DefaultQueueSize || c.ColdQueueSize != DefaultQueueSize ||
		c.MaxAttempts != DefaultMaxAttempts || c.DrainTimeout != DefaultDrainTimeout ||
		c.AckBatchSize != DefaultAckBatchSize || c.AckInterval != DefaultAckInterval {
		t.Errorf("dispatcher defaults = %+v", c)
	}
	if DefaultWorkers != 4 || DefaultQueueSize != 1000 || DefaultMaxAttempts != 10 || DefaultDrainTimeout != 5*time.Second {
		t.Error("dispatcher defaults differ from the specification")
	}
	if cap(d.hot) != 1000 || cap(d.cold) != 1000 {
		t.Errorf("queue capacities = %d/%d", cap(d.hot), cap(d.cold))
	}
	if d.Owner() == "" || d.Owner() == NewOwnerID() {
		t.Errorf("owner = %q, want a fresh unique id", d.Owner())
	}
	if _, ok := c.RetryPolicy.(*ExponentialBackoff); !ok {
		t.Errorf("default retry policy = %T", c.RetryPolicy)
	}

	p, err := NewPoller(PollerConfig{Store: st, DB: nopExecutor{}, Dispatcher: d})
	if err != nil {
		t.Fatal(err)
	}
	if p.cfg.Interval != 5*time.Second || p.cfg.BatchSize != 50 || p.cfg.Lease != 5*time.Minute ||
		p.cfg.OwnReclaimAfter != time.Second || p.cfg.MaxBackoff != time.Minute {
		t.Errorf("poller defaults = %+v", p.cfg)
	}
	p, err = NewPoller(PollerConfig{Store: st, DB: nopExecutor{}, Dispatcher: d, Interval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if p.cfg.OwnReclaimAfter != 200*time.Millisecond {
		t.Errorf("OwnReclaimAfter = %v, want at most the interval", p.cfg.OwnReclaimAfter)
	}

	s, err := NewPurgeScheduler(PurgeConfig{Purger: st, DB: nopExecutor{}})
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
