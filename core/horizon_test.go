package outbox_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
	"github.com/go-outbox/outbox/core/outboxtest"
)

// horizonStore is an in-memory Store that reports the Horizon a test sets.
type horizonStore struct {
	*outboxmem.Store
	mu    sync.Mutex
	h     outbox.Horizon
	err   error
	calls int
}

func (s *horizonStore) Horizon(context.Context) (outbox.Horizon, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return s.h, s.err
}

func (s *horizonStore) set(h outbox.Horizon, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h, s.err = h, err
}

func (s *horizonStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// horizonMetrics keeps the last report.
type horizonMetrics struct {
	outbox.NopMetrics
	mu   sync.Mutex
	last outbox.HorizonReport
	n    int
}

func (m *horizonMetrics) Horizon(r outbox.HorizonReport) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last, m.n = r, m.n+1
}

func newHorizonClient(t *testing.T, cfg outbox.Config) (*outbox.Client, *horizonStore, *outboxtest.Clock, *outboxtest.LogBuffer) {
	t.Helper()
	mem := outboxmem.New()
	store := &horizonStore{Store: mem}
	clock := outboxtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	logger, logs := outboxtest.NewLogBuffer()
	cfg.Store, cfg.TxContext, cfg.Clock, cfg.Logger = store, mem, clock, logger
	return newClient(t, mem, cfg), store, clock, logs
}

func horizonOf(t *testing.T, c *outbox.Client) *outbox.HorizonReport {
	t.Helper()
	st, err := c.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Horizon
}

func checks(r *outbox.HorizonReport) string {
	var cs []string
	for _, w := range r.Warnings {
		cs = append(cs, w.Check)
	}
	return strings.Join(cs, ",")
}

func TestHorizonGuardWarnsOnceAndClears(t *testing.T) {
	m := &horizonMetrics{}
	c, store, clock, logs := newHorizonClient(t, outbox.Config{Metrics: m, HorizonDeadTuples: 1000, HorizonTableMegabytes: 1})
	tx := outbox.HorizonHolder{Kind: outbox.HolderTransaction, PID: 42, Name: "report\x1b[31m", State: "idle in transaction",
		Age: 20 * time.Minute, XIDAge: 5000}
	store.set(outbox.Horizon{DeadTuples: 1001, LiveTuples: 7, TableSize: 2 << 20, Holders: []outbox.HorizonHolder{tx}}, nil)

	r := horizonOf(t, c)
	if got := checks(r); got != "dead_tuples,holder_age,table_size" {
		t.Fatalf("warnings %q, want all three: %+v", got, r)
	}
	if !strings.Contains(r.Warnings[1].Message, "pid 42") || !strings.Contains(r.Warnings[1].Message, "HorizonAge 15m") {
		t.Errorf("holder warning %q: want the pid and the default threshold", r.Warnings[1].Message)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 3 {
		t.Fatalf("%d warnings logged, want 3:\n%s", n, logs)
	}
	if strings.Contains(logs.String(), "\x1b") {
		t.Errorf("a control character from the database reached the log:\n%s", logs)
	}
	h, err := c.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.Horizon != r {
		t.Errorf("Health read the horizon again (%p, want the report %p of Stats)", h.Horizon, r)
	}

	// Still passed, read again after two intervals: not logged again
	// until horizonRelog (15m) has passed.
	clock.Advance(3 * time.Minute)
	if r = horizonOf(t, c); len(r.Warnings) != 3 || store.count() != 2 {
		t.Fatalf("second read: %+v after %d reads", r, store.count())
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 3 {
		t.Fatalf("%d warnings logged, want still 3", n)
	}
	clock.Advance(13 * time.Minute)
	horizonOf(t, c)
	if n := strings.Count(logs.String(), "level=WARN"); n != 6 {
		t.Fatalf("%d warnings logged after 16m, want 6", n)
	}

	// Vacuumed, the holder gone: one info line per check.
	store.set(outbox.Horizon{DeadTuples: 3, TableSize: 2 << 20}, nil)
	clock.Advance(3 * time.Minute)
	if r = horizonOf(t, c); checks(r) != "table_size" {
		t.Fatalf("after vacuum: %+v", r)
	}
	for _, check := range []string{"dead_tuples", "holder_age"} {
		if !strings.Contains(logs.String(), "level=INFO msg=\"outbox: horizon guard: "+check+" is within its threshold again\"") {
			t.Errorf("no info line for %s:\n%s", check, logs)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n != 4 || m.last.DeadTuples != 3 || checks(&m.last) != "table_size" {
		t.Errorf("metrics got %d reports, the last %+v", m.n, m.last)
	}
}

// A slot's age is how long the guard has seen its xmin where it is.
func TestHorizonGuardSlotAge(t *testing.T) {
	c, store, clock, _ := newHorizonClient(t, outbox.Config{HorizonAge: 10 * time.Minute})
	slot := func(xmin int64) outbox.Horizon {
		return outbox.Horizon{Holders: []outbox.HorizonHolder{{Kind: outbox.HolderSlot, Name: "standby", State: "inactive", XIDAge: 900, XMin: xmin}}}
	}
	store.set(slot(100), nil)
	if r := horizonOf(t, c); r.Holders[0].Age != 0 || r.Warning() {
		t.Fatalf("first sight of a slot: %+v", r)
	}
	clock.Advance(11 * time.Minute)
	r := horizonOf(t, c)
	if r.Holders[0].Age != 11*time.Minute || checks(r) != "holder_age" || !strings.Contains(r.Warnings[0].Message, `replication slot "standby" (inactive)`) {
		t.Fatalf("a slot held for 11m: %+v", r)
	}
	store.set(slot(200), nil) // the standby reported again
	clock.Advance(3 * time.Minute)
	if r := horizonOf(t, c); r.Holders[0].Age != 0 || r.Warning() {
		t.Fatalf("a slot whose xmin moved: %+v", r)
	}
}

func TestHorizonGuardUnsupportedAndOff(t *testing.T) {
	c, store, clock, logs := newHorizonClient(t, outbox.Config{})
	store.set(outbox.Horizon{}, outbox.ErrUnsupported)
	for range 2 {
		if r := horizonOf(t, c); r != nil {
			t.Fatalf("horizon of a store without one: %+v", r)
		}
		clock.Advance(time.Hour)
	}
	if store.count() != 1 || logs.String() != "" {
		t.Fatalf("%d reads after ErrUnsupported, logs %q: want 1 read, nothing logged", store.count(), logs)
	}

	c, store, _, _ = newHorizonClient(t, outbox.Config{HorizonInterval: -1})
	if r := horizonOf(t, c); r != nil || store.count() != 0 {
		t.Fatalf("guard off: %+v after %d reads", r, store.count())
	}
}

// A read that fails is logged once as a warning, then at debug level, and
// once it works again at info level; Stats does not fail for it.
func TestHorizonGuardReadFails(t *testing.T) {
	c, store, clock, logs := newHorizonClient(t, outbox.Config{})
	store.set(outbox.Horizon{}, errors.New("permission denied for view pg_stat_activity"))
	for range 3 {
		if r := horizonOf(t, c); r != nil {
			t.Fatalf("horizon of a failed read: %+v", r)
		}
		clock.Advance(time.Hour)
	}
	if n, d := strings.Count(logs.String(), "level=WARN"), strings.Count(logs.String(), "level=DEBUG"); n != 1 || d != 2 {
		t.Fatalf("%d warnings and %d debug lines, want 1 and 2:\n%s", n, d, logs)
	}
	store.set(outbox.Horizon{}, nil)
	if r := horizonOf(t, c); r == nil || !strings.Contains(logs.String(), "reads the table's storage again") {
		t.Fatalf("after recovery: %+v\n%s", r, logs)
	}
}

// The sampler samples the horizon from Start, without Metrics, and stops at
// Close.
func TestHorizonGuardSamplesFromStart(t *testing.T) {
	c, store, _, _ := newHorizonClient(t, outbox.Config{Mode: outbox.ModeWriterOnly})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for store.count() == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestHorizonKnobs(t *testing.T) {
	cfg := outbox.Config{}.WithDefaults()
	if cfg.HorizonInterval != time.Minute || cfg.HorizonAge != 15*time.Minute || cfg.HorizonDeadTuples != 10_000_000 || cfg.HorizonTableMegabytes != 0 {
		t.Fatalf("defaults: %v %v %v %v", cfg.HorizonInterval, cfg.HorizonAge, cfg.HorizonDeadTuples, cfg.HorizonTableMegabytes)
	}
	store := outboxmem.New()
	for _, bad := range []outbox.Config{{HorizonInterval: time.Millisecond}, {HorizonAge: 8 * 24 * time.Hour}, {HorizonTableMegabytes: -1}} {
		bad.Store, bad.TxContext = store, store
		if err := bad.Validate(); !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidConfig", bad, err)
		}
	}
	var c outbox.Config
	if err := c.LoadEnv("OUTBOX_", []string{"OUTBOX_HORIZON_AGE=-1s", "OUTBOX_HORIZON_TABLE_MEGABYTES=512", "OUTBOX_HORIZON_DEAD_TUPLES=-1"}); err != nil {
		t.Fatal(err)
	}
	if c.HorizonAge != -time.Second || c.HorizonTableMegabytes != 512 || c.HorizonDeadTuples != -1 {
		t.Fatalf("LoadEnv: %+v", c)
	}
}
