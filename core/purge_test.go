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

// retentionPurger is a RetentionPurger that records the requests of each
// of its two ways.
type retentionPurger struct {
	purged, retained []PurgeRequest
	n                []int64 // what the calls of PurgeRetention return, in turn
}

func (p *retentionPurger) Purge(_ context.Context, req PurgeRequest) (int64, error) {
	p.purged = append(p.purged, req)
	return 0, nil
}

func (p *retentionPurger) PurgeRetention(_ context.Context, req PurgeRequest) (int64, error) {
	p.retained = append(p.retained, req)
	n := p.n[0]
	p.n = p.n[1:]
	return n, nil
}

// TestPurgeRetention: the scheduler applies the retention through
// PurgeRetention when the Purger has it, and calls it again while it
// deletes a batch or more (a dropped partition counts its rows).
func TestPurgeRetention(t *testing.T) {
	clk := newStepClock()
	p := &retentionPurger{n: []int64{1200, 3, 1}}
	s, err := NewPurgeScheduler(PurgeConfig{Purger: p, BatchSize: 500, Clock: clk, DeadRetention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.PurgeOnce(context.Background())
	if err != nil || n != 1204 {
		t.Fatalf("PurgeOnce = %d, %v; want 1204", n, err)
	}
	if len(p.purged) != 0 || len(p.retained) != 3 {
		t.Fatalf("Purge called %d times, PurgeRetention %d; want 0 and 3", len(p.purged), len(p.retained))
	}
	want := clk.Now().Add(-DefaultRetention)
	if r := p.retained[0]; r.Status != StatusDone || !r.Before.Equal(want) || r.Limit != 500 {
		t.Fatalf("first request %+v, want DONE before %v, limit 500", r, want)
	}
	if r := p.retained[2]; r.Status != StatusDead {
		t.Fatalf("last request %+v, want the DEAD events'", r)
	}
}
