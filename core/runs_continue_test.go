package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
)

// continuingStore counts the runs a Store continued (outbox.RunContinuer).
type continuingStore struct {
	*outboxmem.Store
	continued atomic.Int64
}

func (s *continuingStore) ContinueRuns(ctx context.Context, req outbox.ClaimRequest, tails []outbox.RunTail) ([]outbox.Record, error) {
	recs, err := s.Store.ContinueRuns(ctx, req, tails)
	s.continued.Add(int64(len(recs)))
	return recs, err
}

// deliverAll writes evs through a writer-only ordered Client on mem and
// delivers them with an ordered poller-only Client of cfg (its Store:
// store, on mem), whose listener calls l; it returns once l has seen
// every event and both Clients are closed. The poller polls once
// (PollInterval is an hour, no wake-ups from elsewhere): the events it
// does not take then come through ContinueRuns or the wake-ups of runs
// that ended.
func deliverAll(t *testing.T, mem *outboxmem.Store, store outbox.Store, cfg outbox.Config, evs []outbox.Envelope, l func(e outbox.Envelope)) {
	t.Helper()
	ctx := context.Background()
	web, err := outbox.New(outbox.Config{Store: mem, TxContext: mem, Mode: outbox.ModeWriterOnly, Ordered: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store, cfg.Mode, cfg.Ordered, cfg.PollInterval, cfg.Waker = store, outbox.ModePollerOnly, true, time.Hour, outbox.NoWaker
	worker, err := outbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var delivered atomic.Int64
	all := make(chan struct{})
	_ = worker.Handle(outbox.EventName("E"), func(_ context.Context, e outbox.Envelope) error {
		l(e)
		if delivered.Add(1) == int64(len(evs)) {
			close(all)
		}
		return nil
	})
	if err := mem.InTx(ctx, func(ctx context.Context) error { _, err := web.Write(ctx, evs...); return err }); err != nil {
		t.Fatal(err)
	}
	if err := worker.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-all:
	case <-time.After(time.Minute):
		t.Fatal("not every event was delivered")
	}
	if err := errors.Join(worker.Close(ctx), web.Close(ctx)); err != nil {
		t.Fatal(err)
	}
}

// TestRunsContinueWithoutAClaim: the workers of an ordered Client take a
// key's next events as its run ends (RunContinuer), and each event starts
// only once the one before it on its key is stored DONE.
func TestRunsContinueWithoutAClaim(t *testing.T) {
	mem := outboxmem.New()
	store := &continuingStore{Store: mem}
	const keys, perKey = 3, 60
	var evs []outbox.Envelope
	order := map[string]int{} // event id → its place in its key
	byKey := map[string][]string{}
	for i := range perKey {
		for k := range keys {
			e := outbox.MustEnvelope(outbox.EventName("E"), outbox.WithJSON([]byte(`{}`)), outbox.WithOrderingKey(fmt.Sprint("k", k)))
			order[e.ID()] = i
			byKey[e.OrderingKey()] = append(byKey[e.OrderingKey()], e.ID())
			evs = append(evs, e)
		}
	}
	var mu sync.Mutex
	var problems []string
	seen := map[string][]int{}
	deliverAll(t, mem, store, outbox.Config{OrderedRun: 8, Workers: 4}, evs, func(e outbox.Envelope) {
		i := order[e.ID()]
		if i > 0 {
			prev, err := mem.Get(context.Background(), byKey[e.OrderingKey()][i-1])
			if err != nil || prev.Status != outbox.StatusDone {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("%s #%d started while #%d is %v (%v)", e.OrderingKey(), i, i-1, prev.Status, err))
				mu.Unlock()
			}
		}
		mu.Lock()
		seen[e.OrderingKey()] = append(seen[e.OrderingKey()], i)
		mu.Unlock()
	})
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
	for k, got := range seen {
		for i, n := range got {
			if n != i {
				t.Fatalf("key %s delivered in the order %v", k, got)
			}
		}
	}
	if store.continued.Load() == 0 {
		t.Error("no run was continued")
	}
}

// TestRunsLetOtherEventsThrough: a worker whose runs go on without a claim
// still runs the other events queued behind them: it stops continuing its
// runs once it holds one, instead of making it wait for the key's backlog.
func TestRunsLetOtherEventsThrough(t *testing.T) {
	mem := outboxmem.New()
	const perKey = 100
	var evs []outbox.Envelope
	for range perKey {
		evs = append(evs, outbox.MustEnvelope(outbox.EventName("E"), outbox.WithJSON([]byte(`{}`)), outbox.WithOrderingKey("K")))
	}
	other := outbox.MustEnvelope(outbox.EventName("E"), outbox.WithJSON([]byte(`{}`)))
	evs = append(evs, other)
	var mu sync.Mutex
	var order []string
	deliverAll(t, mem, mem, outbox.Config{OrderedRun: 4, Workers: 1}, evs, func(e outbox.Envelope) {
		mu.Lock()
		order = append(order, e.ID())
		mu.Unlock()
	})
	mu.Lock()
	defer mu.Unlock()
	if at := slices.Index(order, other.ID()); at > perKey/2 {
		t.Errorf("the unordered event was delivered at position %d of %d: it waited for the key's backlog", at+1, len(order))
	}
}
