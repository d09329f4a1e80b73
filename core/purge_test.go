package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestPurgeOnce(t *testing.T) {
	st, clk := newMemStore(), newStepClock()
	now := clk.Now()
	old := now.Add(-8 * 24 * time.Hour)
	for i := range 5 {
		st.put(Record{ID: fmt.Sprint("old-done-", i), Status: StatusDone, CreatedAt: old, DoneAt: old})
	}
	st.put(Record{ID: "old-dead", Status: StatusDead, CreatedAt: old, DoneAt: old})
	st.put(Record{ID: "recent-done", Status: StatusDone, CreatedAt: old, DoneAt: now.Add(-time.Hour)})
	st.put(Record{ID: "old-pending", Status: StatusNew, CreatedAt: old})
	st.put(Record{ID: "old-retry", Status: StatusRetry, CreatedAt: old})

	s, err := NewPurgeScheduler(PurgeConfig{Purger: st, BatchSize: 2, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.PurgeOnce(context.Background())
	if err != nil || n != 5 {
		t.Fatalf("PurgeOnce = %d, %v; want the 5 old DONE events", n, err)
	}
	if calls := st.callCount("Purge"); calls != 3 { // 2+2+1 < batch
		t.Errorf("Purge called %d times, want 3 bounded batches", calls)
	}
	for _, id := range []string{"old-dead", "recent-done", "old-pending", "old-retry"} {
		if st.get(id).ID == "" {
			t.Errorf("%s was purged", id)
		}
	}
	// With a DeadRetention, old DEAD events go too.
	withDead, err := NewPurgeScheduler(PurgeConfig{Purger: st, BatchSize: 2, DeadRetention: 24 * time.Hour, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := withDead.PurgeOnce(context.Background()); err != nil || n != 1 || st.get("old-dead").ID != "" {
		t.Fatalf("PurgeOnce with DeadRetention = %d, %v; want the old DEAD event", n, err)
	}

	st.setFail("Purge", errors.New("locked"))
	if _, err := s.PurgeOnce(context.Background()); err == nil {
		t.Error("purge error not returned")
	}
}

func TestPurgeSchedulerStartClose(t *testing.T) {
	st := newMemStore()
	old := time.Now().Add(-30 * 24 * time.Hour)
	st.put(Record{ID: "a", Status: StatusDone, CreatedAt: old, DoneAt: old})
	logger, buf := bufferLogger()
	s, err := NewPurgeScheduler(PurgeConfig{Purger: st, Interval: time.Hour, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("second Start: err = %v", err)
	}
	waitFor(t, "the first purge at Start", func() bool { return st.callCount("Purge") >= 1 && st.get("a").ID == "" })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: err = %v", err)
	}
	waitFor(t, "purge log", func() bool { return strings.Contains(buf.String(), "purged terminal events") })
}
