package outbox_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
	"github.com/go-outbox/outbox/core/outboxtest"
)

var quiet = slog.New(slog.DiscardHandler)

// newClient returns a Client on store, configured by cfg with store as the
// Store (unless cfg sets one) and, unless cfg says ModePollerOnly, the TxContext; it is closed at
// cleanup.
func newClient(t *testing.T, store *outboxmem.Store, cfg outbox.Config) *outbox.Client {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = store
	}
	if cfg.TxContext == nil && cfg.Mode != outbox.ModePollerOnly {
		cfg.TxContext = store
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	c, err := outbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func writeIn(store *outboxmem.Store, c *outbox.Client, events ...outbox.Envelope) ([]string, error) {
	var ids []string
	err := store.InTx(context.Background(), func(ctx context.Context) (err error) {
		ids, err = c.Write(ctx, events...)
		return err
	})
	return ids, err
}

func ping() outbox.Envelope {
	return outbox.MustEnvelope(outbox.EventName("Ping"), outbox.WithJSON([]byte(`{}`)))
}

func TestNewValidatesConfig(t *testing.T) {
	store := outboxmem.New()
	valid := func(mut func(*outbox.Config)) outbox.Config {
		cfg := outbox.Config{Store: store, TxContext: store, Logger: quiet}
		mut(&cfg)
		return cfg
	}
	for name, cfg := range map[string]outbox.Config{
		"no store":                        valid(func(c *outbox.Config) { c.Store = nil }),
		"no tx context, full":             valid(func(c *outbox.Config) { c.TxContext = nil }),
		"no tx context, writer only":      valid(func(c *outbox.Config) { c.TxContext, c.Mode = nil, outbox.ModeWriterOnly }),
		"no tx context, hot path only":    valid(func(c *outbox.Config) { c.TxContext, c.Mode = nil, outbox.ModeHotPathOnly }),
		"negative mode":                   valid(func(c *outbox.Config) { c.Mode = -1 }),
		"unknown mode":                    valid(func(c *outbox.Config) { c.Mode = outbox.ModeHotPathOnly + 1 }),
		"owner too long":                  valid(func(c *outbox.Config) { c.Owner = strings.Repeat("o", 129) }),
		"negative lease":                  valid(func(c *outbox.Config) { c.Lease = -time.Second }),
		"negative workers":                valid(func(c *outbox.Config) { c.Workers = -1 }),
		"negative hot queue":              valid(func(c *outbox.Config) { c.HotQueueSize = -1 }),
		"negative cold queue":             valid(func(c *outbox.Config) { c.ColdQueueSize = -1 }),
		"negative max attempts":           valid(func(c *outbox.Config) { c.MaxAttempts = -1 }),
		"negative drain timeout":          valid(func(c *outbox.Config) { c.DrainTimeout = -time.Second }),
		"negative ack batch":              valid(func(c *outbox.Config) { c.AckBatchSize = -1 }),
		"negative ack interval":           valid(func(c *outbox.Config) { c.AckInterval = -time.Millisecond }),
		"negative poll interval":          valid(func(c *outbox.Config) { c.PollInterval = -time.Second }),
		"negative poll batch":             valid(func(c *outbox.Config) { c.PollBatchSize = -1 }),
		"negative skip recent":            valid(func(c *outbox.Config) { c.SkipRecent = -time.Second }),
		"negative max poll backoff":       valid(func(c *outbox.Config) { c.MaxPollBackoff = -time.Second }),
		"negative retention":              valid(func(c *outbox.Config) { c.Retention = -time.Hour }),
		"negative purge interval":         valid(func(c *outbox.Config) { c.PurgeInterval = -time.Hour }),
		"negative purge batch":            valid(func(c *outbox.Config) { c.PurgeBatchSize = -1 }),
		"nil hook":                        valid(func(c *outbox.Config) { c.Hooks = []outbox.WriterHook{outbox.NopHook{}, nil} }),
		"poller only, negative batch":     valid(func(c *outbox.Config) { c.Mode, c.PollBatchSize = outbox.ModePollerOnly, -1 }),
		"hot path only, negative workers": valid(func(c *outbox.Config) { c.Mode, c.Workers = outbox.ModeHotPathOnly, -1 }),
	} {
		t.Run(name, func(t *testing.T) {
			c, err := outbox.New(cfg)
			if !errors.Is(err, outbox.ErrInvalidConfig) || c != nil {
				t.Fatalf("New = %v, %v; want ErrInvalidConfig", c, err)
			}
		})
	}
	for name, cfg := range map[string]outbox.Config{
		"defaults":                    valid(func(*outbox.Config) {}),
		"poller only, no tx context":  valid(func(c *outbox.Config) { c.TxContext, c.Mode = nil, outbox.ModePollerOnly }),
		"writer only":                 valid(func(c *outbox.Config) { c.Mode = outbox.ModeWriterOnly }),
		"hot path only":               valid(func(c *outbox.Config) { c.Mode = outbox.ModeHotPathOnly }),
		"purge disabled":              valid(func(c *outbox.Config) { c.DisablePurge = true }),
		"backlog sampling off":        valid(func(c *outbox.Config) { c.MetricsInterval = -1 }),
		"store that cannot purge":     valid(func(c *outbox.Config) { c.Store = storeOnly{store} }),
		"owner of the maximum length": valid(func(c *outbox.Config) { c.Owner = strings.Repeat("o", 128) }),
		"hooks and interceptors": valid(func(c *outbox.Config) {
			c.Hooks, c.Interceptors = []outbox.WriterHook{outbox.NopHook{}}, []outbox.Interceptor{{}}
		}),
		"everything set, nothing zero": fullConfig(store),
	} {
		t.Run("valid "+name, func(t *testing.T) {
			if _, err := outbox.New(cfg); err != nil {
				t.Fatalf("New: %v", err)
			}
		})
	}
}

func fullConfig(store *outboxmem.Store) outbox.Config {
	return outbox.Config{Store: store, TxContext: store, Purger: store, Mode: outbox.ModeFull, Owner: "node-1",
		Lease: time.Minute, Workers: 2, HotQueueSize: 10, ColdQueueSize: 10, MaxAttempts: 3,
		RetryPolicy: outbox.RetryPolicyFunc(func(int) time.Duration { return time.Second }), DrainTimeout: time.Second,
		AckBatchSize: 10, AckInterval: time.Millisecond, PollInterval: time.Second, PollBatchSize: 10,
		SkipRecent: time.Second, MaxPollBackoff: time.Second, Retention: time.Hour, PurgeInterval: time.Hour,
		PurgeBatchSize: 10, Clock: outbox.SystemClock, Logger: quiet, Metrics: outbox.NopMetrics{}, MetricsInterval: time.Minute}
}

// storeOnly hides the Purger of the Store it wraps.
type storeOnly struct{ outbox.Store }

func TestModeString(t *testing.T) {
	for m, want := range map[outbox.Mode]string{outbox.ModeFull: "full", outbox.ModeWriterOnly: "writer-only",
		outbox.ModePollerOnly: "poller-only", outbox.ModeHotPathOnly: "hot-path-only", 7: "Mode(7)"} {
		if got := m.String(); got != want {
			t.Errorf("Mode(%d).String() = %q, want %q", int(m), got, want)
		}
	}
}

func TestClientLifecycle(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []outbox.Mode{outbox.ModeFull, outbox.ModeWriterOnly, outbox.ModePollerOnly, outbox.ModeHotPathOnly} {
		t.Run(mode.String(), func(t *testing.T) {
			c := newClient(t, outboxmem.New(), outbox.Config{Mode: mode})
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.Start(ctx); !errors.Is(err, outbox.ErrInvalidConfig) {
				t.Errorf("second Start = %v, want ErrInvalidConfig", err)
			}
			if err := c.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.Close(ctx); err != nil {
				t.Errorf("second Close = %v, want nil (idempotent)", err)
			}
			if err := c.Start(ctx); !errors.Is(err, outbox.ErrClosed) {
				t.Errorf("Start after Close = %v, want ErrClosed", err)
			}
		})
	}
	t.Run("close before start", func(t *testing.T) {
		c := newClient(t, outboxmem.New(), outbox.Config{})
		if err := c.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); !errors.Is(err, outbox.ErrClosed) {
			t.Errorf("Start after Close = %v, want ErrClosed", err)
		}
	})
	t.Run("start's context does not stop the client", func(t *testing.T) {
		store := outboxmem.New()
		c := newClient(t, store, outbox.Config{})
		delivered := make(chan string, 1)
		if err := c.Handle(outbox.EventName("Ping"), func(_ context.Context, e outbox.Envelope) error { delivered <- e.ID(); return nil }); err != nil {
			t.Fatal(err)
		}
		startCtx, cancel := context.WithCancel(ctx)
		if err := c.Start(startCtx); err != nil {
			t.Fatal(err)
		}
		cancel()
		ids, err := writeIn(store, c, ping())
		if err != nil {
			t.Fatal(err)
		}
		select {
		case id := <-delivered:
			if id != ids[0] {
				t.Fatalf("delivered %s, want %s", id, ids[0])
			}
		case <-time.After(10 * time.Second):
			t.Fatal("not delivered after the Start context was cancelled")
		}
	})
}

func TestClientWriteWithoutTxContext(t *testing.T) {
	store := outboxmem.New()
	c := newClient(t, store, outbox.Config{Mode: outbox.ModePollerOnly})
	err := store.InTx(context.Background(), func(ctx context.Context) error {
		ids, err := c.Write(ctx, ping())
		if len(ids) != 0 {
			t.Errorf("ids %v", ids)
		}
		return err
	})
	if !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("Write on a client without a TxContext = %v, want ErrInvalidConfig", err)
	}
	if n, _ := store.Count(context.Background(), outbox.Query{}); n != 0 {
		t.Fatalf("%d rows written", n)
	}
}

func TestClientWriteOutsideTransaction(t *testing.T) {
	store := outboxmem.New()
	c := newClient(t, store, outbox.Config{})
	if _, err := c.Write(context.Background(), ping()); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("Write outside a transaction = %v, want ErrNoTransaction", err)
	}
}

// TestClientWriteClaimsByMode: a running Client with a hot path inserts its
// rows claimed by its owner; in ModePollerOnly, in ModeWriterOnly and
// before Start the rows are left unclaimed for any poller. A running
// poller-only Client's own poller, woken by the commit, claims them at
// once (its next poll is an hour away).
func TestClientWriteClaimsByMode(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		mode    outbox.Mode
		start   bool
		claimed bool
	}{
		{outbox.ModeFull, true, true},
		{outbox.ModeHotPathOnly, true, true},
		{outbox.ModeFull, false, false},
		{outbox.ModePollerOnly, false, false},
		{outbox.ModePollerOnly, true, true},
		{outbox.ModeWriterOnly, true, false},
	} {
		name := tc.mode.String()
		if !tc.start {
			name += " not started"
		}
		t.Run(name, func(t *testing.T) {
			store := outboxmem.New()
			release := make(chan struct{})
			c := newClient(t, store, outbox.Config{Mode: tc.mode, TxContext: store, PollInterval: time.Hour, DrainTimeout: time.Millisecond})
			if tc.mode != outbox.ModeWriterOnly {
				held := func(ctx context.Context, _ outbox.Envelope) error {
					select {
					case <-release:
					case <-ctx.Done():
					}
					return ctx.Err()
				}
				if err := c.Handle(outbox.EventName("Ping"), held); err != nil {
					t.Fatal(err)
				}
			}
			defer close(release)
			if tc.start {
				if err := c.Start(ctx); err != nil {
					t.Fatal(err)
				}
			}
			ids, err := writeIn(store, c, ping())
			if err != nil {
				t.Fatal(err)
			}
			r, err := c.Get(ctx, ids[0])
			if err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(10 * time.Second); tc.mode == outbox.ModePollerOnly && tc.start && r.LockedBy == "" && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond) // its poller claims it once woken
				if r, err = c.Get(ctx, ids[0]); err != nil {
					t.Fatal(err)
				}
			}
			if want := map[bool]string{true: c.Owner(), false: ""}[tc.claimed]; r.LockedBy != want || r.Status != outbox.StatusNew {
				t.Errorf("row %v locked by %q, want NEW locked by %q", r.Status, r.LockedBy, want)
			}
		})
	}
}

func TestClientPollAndPurgeOnce(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []outbox.Mode{outbox.ModeWriterOnly, outbox.ModeHotPathOnly} {
		c := newClient(t, outboxmem.New(), outbox.Config{Mode: mode})
		if _, err := c.PollOnce(ctx); !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("%v: PollOnce = %v, want ErrInvalidConfig (no poller)", mode, err)
		}
	}

	// Without a purge scheduler, PurgeOnce still purges with the Purger.
	store := outboxmem.New()
	clock := outboxtest.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	writer := newClient(t, store, outbox.Config{Mode: outbox.ModeWriterOnly, Clock: clock, Retention: time.Hour})
	ids, err := writeIn(store, writer, ping(), ping())
	if err != nil {
		t.Fatal(err)
	}
	worker := newClient(t, store, outbox.Config{Mode: outbox.ModePollerOnly, Clock: clock, DisablePurge: true, Workers: 1})
	done := make(chan struct{}, 2)
	if err := worker.Handle(outbox.EventName("Ping"), func(context.Context, outbox.Envelope) error { done <- struct{}{}; return nil }); err != nil {
		t.Fatal(err)
	}
	if n, err := worker.PollOnce(ctx); err != nil || n != 0 {
		t.Fatalf("PollOnce before Start = %d, %v; want 0 (no room in a stopped dispatcher)", n, err)
	}
	if err := worker.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	<-done
	waitDone := time.Now().Add(10 * time.Second)
	for {
		st, err := worker.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.ByStatus[outbox.StatusDone] == 2 {
			break
		}
		if time.Now().After(waitDone) {
			t.Fatalf("stats %+v, want 2 DONE", st)
		}
		time.Sleep(time.Millisecond)
	}
	if n, err := writer.PurgeOnce(ctx); err != nil || n != 0 {
		t.Fatalf("PurgeOnce within the retention = %d, %v; want 0", n, err)
	}
	clock.Advance(2 * time.Hour)
	if n, err := writer.PurgeOnce(ctx); err != nil || n != 2 {
		t.Fatalf("PurgeOnce of a writer-only client = %d, %v; want 2", n, err)
	}
	if _, err := writer.Get(ctx, ids[0]); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("Get of a purged event = %v, want ErrNotFound", err)
	}

	noPurger := newClient(t, store, outbox.Config{Store: storeOnly{store}, TxContext: store, Mode: outbox.ModeWriterOnly})
	if _, err := noPurger.PurgeOnce(ctx); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("PurgeOnce without a Purger = %v, want ErrInvalidConfig", err)
	}
}
