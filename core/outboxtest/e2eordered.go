package outboxtest

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/sqlstore"
)

// The end-to-end cases of ordered delivery (outbox.Config.Ordered).

// aggregates serializes the writers of one aggregate, as an application
// does: on a SQL backend each transaction updates the aggregate's row (a
// table of the test, made with Fixture.Exec) before it writes its events
// — the row lock makes the next writer wait for the commit; elsewhere a
// lock per aggregate is held from the update until the transaction ends.
// Either way the update returns the aggregate's new version: the commit
// order of the aggregate's transactions.
type aggregates struct {
	f     Fixture
	table string // "" without SQL
	mu    sync.Mutex
	locks map[string]*sync.Mutex
	vers  map[string]int64
}

func newAggregates(t *testing.T, f Fixture, keys []string) *aggregates {
	t.Helper()
	a := &aggregates{f: f, locks: map[string]*sync.Mutex{}, vers: map[string]int64{}}
	for _, k := range keys {
		a.locks[k] = &sync.Mutex{}
	}
	if f.Exec == nil {
		return a
	}
	ctx := context.Background()
	a.table = f.Table + "_agg"
	if err := f.Exec(ctx, "CREATE TABLE "+a.table+" (k VARCHAR(64) NOT NULL PRIMARY KEY, v INTEGER NOT NULL)"); err != nil {
		t.Fatalf("create the aggregates' table: %v", err)
	}
	t.Cleanup(func() { _ = f.Exec(context.Background(), "DROP TABLE "+a.table) })
	rows := make([]string, len(keys))
	for i, k := range keys {
		rows[i] = "('" + k + "', 0)" // the test's keys: letters, digits and dashes
	}
	if err := f.Exec(ctx, "INSERT INTO "+a.table+" (k, v) VALUES "+strings.Join(rows, ", ")); err != nil {
		t.Fatalf("create the aggregates: %v", err)
	}
	return a
}

// update updates aggregate key in the transaction of ctx and returns its
// new version; the aggregate stays locked until the transaction ends.
func (a *aggregates) update(ctx context.Context, key string) (int64, error) {
	tx, err := a.f.TxContext.Current(ctx)
	if err != nil {
		return 0, err
	}
	if c, ok := tx.(interface{ Conn() sqlstore.Conn }); ok && a.table != "" {
		conn := c.Conn()
		if _, err := conn.Exec(ctx, "UPDATE "+a.table+" SET v = v + 1 WHERE k = '"+key+"'"); err != nil {
			return 0, err
		}
		rows, err := conn.Query(ctx, "SELECT v FROM "+a.table+" WHERE k = '"+key+"'")
		if err != nil {
			return 0, err
		}
		var v int64
		if rows.Next() {
			err = rows.Scan(&v)
		}
		return v, errors.Join(err, rows.Err(), rows.Close())
	}
	l := a.locks[key]
	l.Lock()
	var once sync.Once
	unlock := func() { once.Do(l.Unlock) }
	tx.AfterCommit(unlock)
	tx.AfterRollback(unlock)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.vers[key]++
	return a.vers[key], nil
}

// orderProbe is the listener side of the ordered cases: it records the
// first delivery of every event per key and reports a violation when a
// delivery starts while another event of its key runs, or while the event
// written before it on its key is not DONE.
type orderProbe struct {
	t      *testing.T
	f      Fixture
	mu     sync.Mutex
	prev   map[string]string   // event id → the id written before it on its key
	first  map[string][]string // key → ids in the order of their first delivery
	seen   map[string]bool
	busy   map[string]string // key → the event running
	tries  map[string]int    // event id → deliveries started
	errs   []string
	starts atomic.Int64
	// fail decides whether this delivery fails (nil: never); start is 1
	// for the event's first delivery, 2 for the next…
	fail func(e outbox.Envelope, start int) error
}

func newOrderProbe(t *testing.T, f Fixture) *orderProbe {
	return &orderProbe{t: t, f: f, prev: map[string]string{}, first: map[string][]string{}, seen: map[string]bool{}, busy: map[string]string{},
		tries: map[string]int{}}
}

// written records that id was written after prev on its key ("" for the
// first).
func (p *orderProbe) written(id, prev string) {
	p.mu.Lock()
	p.prev[id] = prev
	p.mu.Unlock()
}

func (p *orderProbe) violation(format string, args ...any) {
	p.mu.Lock()
	p.errs = append(p.errs, fmt.Sprintf(format, args...))
	p.mu.Unlock()
}

func (p *orderProbe) listener() outbox.ListenerFunc {
	return func(ctx context.Context, e outbox.Envelope) error {
		p.starts.Add(1)
		key := e.OrderingKey()
		p.mu.Lock()
		if other, busy := p.busy[key]; busy {
			p.errs = append(p.errs, fmt.Sprintf("key %s: %s started while %s runs", key, e.ID(), other))
		}
		p.busy[key] = e.ID()
		p.tries[e.ID()]++
		try := p.tries[e.ID()]
		prev := p.prev[e.ID()]
		if !p.seen[e.ID()] {
			p.seen[e.ID()] = true
			p.first[key] = append(p.first[key], e.ID())
		}
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			delete(p.busy, key)
			p.mu.Unlock()
		}()
		if prev != "" {
			if r, err := p.f.Store.Get(ctx, prev); err != nil || r.Status != outbox.StatusDone {
				p.violation("key %s: %s started while the event before it, %s, is %v (%v)", key, e.ID(), prev, r.Status, err)
			}
		}
		if p.fail != nil {
			return p.fail(e, try)
		}
		return nil
	}
}

func (p *orderProbe) check(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.errs {
		t.Error(e)
	}
}

// firstDeliveries returns the ids of key in the order of their first
// delivery.
func (p *orderProbe) firstDeliveries(key string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.first[key])
}

// allDone waits until n events are DONE; on timeout it logs the others.
func allDone(t *testing.T, f Fixture, timeout time.Duration, n int64) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for count(t, f, outbox.StatusDone) != n {
		if time.Now().After(deadline) {
			for _, r := range listAll(t, f, outbox.Query{Statuses: []outbox.Status{outbox.StatusNew, outbox.StatusRetry, outbox.StatusDead}}) {
				t.Logf("not DONE: %s key %q seq %d status %v attempts %d locked by %q at %v due %v last error %q",
					r.ID, r.Envelope.OrderingKey(), r.Seq, r.Status, r.Attempts, r.LockedBy, r.LockedAt, r.AvailableAt, r.LastError)
			}
			t.Fatalf("timed out after %s waiting for %d events DONE", timeout, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fate hashes an event id into 0..99.
func fate(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % 100)
}

// e2eOrderedAcrossNodes: K keys × M events written by concurrent writers
// (the writers of one key serialized by the aggregate's row), delivered by
// three nodes (hot path and pollers) whose listener fails or asks for a
// retry on a share of first attempts. Every key's events are delivered in
// the order their transactions committed, each only once the one before
// it is DONE, never two of a key at once; and the table's sequence
// follows that commit order.
func e2eOrderedAcrossNodes(t *testing.T, f Fixture) {
	const keys, perKey, writers, nodes = 6, 10, 6, 3
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("agg-%d", i)
	}
	aggs := newAggregates(t, f, names)
	probe := newOrderProbe(t, f)
	probe.fail = func(e outbox.Envelope, start int) error {
		switch n := fate(e.ID()); {
		case start > 1:
			return nil
		case n < 15:
			return errors.New("injected failure")
		case n < 20:
			return outbox.RetryAfter(time.Millisecond, "injected")
		}
		return nil
	}
	var clients []*outbox.Client
	for range nodes {
		c := newClient(t, f, outbox.Config{Ordered: true, PollInterval: 10 * time.Millisecond, Workers: 4})
		handle(t, c, evtPing, probe.listener())
		start(t, c)
		clients = append(clients, c)
	}
	var (
		mu      sync.Mutex
		last    = map[string]string{} // key → last id written
		version = map[string]int64{}  // event id → the aggregate's version
		wg      sync.WaitGroup
		errs    = make(chan error, writers)
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[w%nodes]
			for i := range keys * perKey / writers {
				key := names[(w+i)%keys] // every writer writes every key
				err := f.InTx(context.Background(), func(ctx context.Context) error {
					v, err := aggs.update(ctx, key)
					if err != nil {
						return err
					}
					e, err := outbox.NewEnvelope(evtPing, outbox.WithAggregate(outbox.AggregateName("Agg"), key),
						outbox.WithJSON([]byte(`{"v":`+strconv.FormatInt(v, 10)+`}`)))
					if err != nil {
						return err
					}
					mu.Lock() // the aggregate is locked: its last event is known
					probe.written(e.ID(), last[e.OrderingKey()])
					last[e.OrderingKey()] = e.ID()
					version[e.ID()] = v
					mu.Unlock()
					_, err = c.Write(ctx, e)
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("write: %v", err)
	}
	const n = keys * perKey
	allDone(t, f, 60*time.Second, n)
	probe.check(t)
	bySeq := map[string][]outbox.Record{}
	for _, r := range listAll(t, f, outbox.Query{}) {
		bySeq[r.Envelope.OrderingKey()] = append(bySeq[r.Envelope.OrderingKey()], r)
	}
	for _, key := range names {
		first := probe.firstDeliveries("Agg/" + key)
		var vs []int64
		for _, id := range first {
			vs = append(vs, version[id])
		}
		if len(vs) != perKey || !slices.IsSorted(vs) {
			t.Errorf("key %s: first deliveries in aggregate versions %v, want %d in commit order", key, vs, perKey)
		}
		recs := bySeq["Agg/"+key]
		slices.SortFunc(recs, func(a, b outbox.Record) int { return int(a.Seq - b.Seq) })
		var seqVs []int64
		for _, r := range recs {
			seqVs = append(seqVs, version[r.ID])
		}
		if !slices.IsSorted(seqVs) {
			t.Errorf("key %s: aggregate versions in sequence order %v: the sequence does not follow the commit order", key, seqVs)
		}
	}
	t.Logf("keys=%d events=%d nodes=%d deliveries=%d", keys, n, nodes, probe.starts.Load())
}

// e2eOrderedNeverTwoAtOnce: four nodes polling side by side, with slow
// listeners, never run two events of one key at the same time, while
// different keys run in parallel.
func e2eOrderedNeverTwoAtOnce(t *testing.T, f Fixture) {
	const keys, perKey, nodes = 3, 12, 4
	w := newClient(t, f, outbox.Config{Mode: outbox.ModeWriterOnly, Ordered: true})
	start(t, w)
	var evs []outbox.Envelope
	probe := newOrderProbe(t, f)
	last := map[string]string{}
	for i := range perKey {
		for k := range keys {
			e := outbox.MustEnvelope(evtPing, outbox.WithOrderingKey("key-"+strconv.Itoa(k)), outbox.WithJSON([]byte(`{"i":`+strconv.Itoa(i)+`}`)))
			probe.written(e.ID(), last[e.OrderingKey()])
			last[e.OrderingKey()] = e.ID()
			evs = append(evs, e)
		}
	}
	write(t, f, w, evs...)
	var running, most atomic.Int64
	probe.fail = func(outbox.Envelope, int) error {
		n := running.Add(1)
		atomicMax(&most, n)
		time.Sleep(2 * time.Millisecond)
		running.Add(-1)
		return nil
	}
	for range nodes {
		c := newClient(t, f, outbox.Config{Mode: outbox.ModePollerOnly, Ordered: true, PollInterval: 5 * time.Millisecond, Workers: 4})
		handle(t, c, evtPing, probe.listener())
		start(t, c)
	}
	allDone(t, f, 60*time.Second, keys*perKey)
	probe.check(t)
	for k := range keys {
		key := "key-" + strconv.Itoa(k)
		var want []string
		for _, e := range evs {
			if e.OrderingKey() == key {
				want = append(want, e.ID())
			}
		}
		if got := probe.firstDeliveries(key); !slices.Equal(got, want) {
			t.Errorf("key %s: first deliveries %v, want the written order %v", key, got, want)
		}
	}
	t.Logf("nodes=%d keys=%d events=%d most deliveries at once=%d", nodes, keys, keys*perKey, most.Load())
}

// e2eOrderedDeadBlocks: a DEAD event holds back the later events of its key
// (DeadBlocksKey) — not other keys — shows in Stats, Query.Blocking and
// Metrics.KeyBlocked; skipping it lets them go on, and replaying one
// delivers it before the events that waited for it.
func e2eOrderedDeadBlocks(t *testing.T, f Fixture) {
	var healthy atomic.Bool
	var blocked atomic.Int32
	var poison sync.Map // ids of the events that fail until healthy
	probe := newOrderProbe(t, f)
	probe.fail = func(e outbox.Envelope, _ int) error {
		if _, bad := poison.Load(e.ID()); bad && !healthy.Load() {
			return errors.New("always fails")
		}
		return nil
	}
	c := newClient(t, f, outbox.Config{Ordered: true, MaxAttempts: 2, Metrics: blockCounter{n: &blocked}})
	handle(t, c, evtPing, probe.listener())
	start(t, c)
	ctx := context.Background()
	a1, a2 := ping(t, outbox.WithOrderingKey("a-poison")), ping(t, outbox.WithOrderingKey("a-poison"))
	poison.Store(a1.ID(), true)
	b1 := ping(t, outbox.WithOrderingKey("b"))
	probe.written(a2.ID(), a1.ID())
	write(t, f, c, a1, a2, b1)
	Eventually(t, 10*time.Second, "a1 DEAD", func() bool { return record(t, f, a1.ID()).Status == outbox.StatusDead })
	Eventually(t, 10*time.Second, "b1 DONE", func() bool { return record(t, f, b1.ID()).Status == outbox.StatusDone })
	if _, err := c.PollOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if r := record(t, f, a2.ID()); r.Status != outbox.StatusNew || r.LockedBy != "" || len(probe.firstDeliveries("a-poison")) != 1 {
		t.Fatalf("the event after the DEAD one: status %v, locked by %q, deliveries of its key %v; want it waiting, undelivered",
			r.Status, r.LockedBy, probe.firstDeliveries("a-poison"))
	}
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := c.Dead().List(ctx, outbox.Query{Blocking: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.BlockedKeys != 1 || len(dead) != 1 || dead[0].ID != a1.ID() {
		t.Fatalf("BlockedKeys %d, blocking DEAD events %v; want 1, [%s]", st.BlockedKeys, recIDs(dead), a1.ID())
	}
	Eventually(t, 10*time.Second, "Metrics.KeyBlocked counted", func() bool { return blocked.Load() == 1 })
	if err := c.Dead().Skip(ctx, a1.ID(), "poison, handled by hand"); err != nil {
		t.Fatal(err)
	}
	if err := c.Dead().Skip(ctx, a1.ID(), ""); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("second Skip = %v, want ErrNotFound", err)
	}
	Eventually(t, 10*time.Second, "a2 DONE after the skip", func() bool { return record(t, f, a2.ID()).Status == outbox.StatusDone })
	if r := record(t, f, a1.ID()); r.Status != outbox.StatusDone || !strings.HasPrefix(r.LastError, outbox.SkipNote) || !strings.Contains(r.LastError, "handled by hand") {
		t.Fatalf("the skipped event: %v, last error %q", r.Status, r.LastError)
	}

	// Replay instead: the replayed event goes first, then the one that waited.
	c1, c2 := ping(t, outbox.WithOrderingKey("c-poison")), ping(t, outbox.WithOrderingKey("c-poison"))
	poison.Store(c1.ID(), true)
	probe.written(c2.ID(), c1.ID())
	write(t, f, c, c1)
	write(t, f, c, c2)
	Eventually(t, 10*time.Second, "c1 DEAD", func() bool { return record(t, f, c1.ID()).Status == outbox.StatusDead })
	healthy.Store(true)
	if err := c.Dead().Replay(ctx, c1.ID()); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 10*time.Second, "c2 DONE after the replay", func() bool { return record(t, f, c2.ID()).Status == outbox.StatusDone })
	if got := probe.firstDeliveries("c-poison"); !slices.Equal(got, []string{c1.ID(), c2.ID()}) {
		t.Fatalf("key c: first deliveries %v, want %v", got, []string{c1.ID(), c2.ID()})
	}
	probe.check(t)
}

type blockCounter struct {
	outbox.NopMetrics
	n *atomic.Int32
}

func (m blockCounter) KeyBlocked() { m.n.Add(1) }

// e2eOrderedHotPath: with a poll interval of an hour, only the hot path and
// the wake-ups of ordered ends deliver. An event whose key is free takes
// the hot path; one written while an earlier event of its key runs — in
// another transaction or the same one — waits and goes out as soon as
// that one is DONE.
func e2eOrderedHotPath(t *testing.T, f Fixture) {
	release := make(chan struct{})
	var once sync.Once
	probe := newOrderProbe(t, f)
	probe.fail = func(e outbox.Envelope, _ int) error {
		if e.OrderingKey() == "slow" {
			once.Do(func() { <-release })
		}
		return nil
	}
	c := newClient(t, f, outbox.Config{Ordered: true, PollInterval: time.Hour})
	handle(t, c, evtPing, probe.listener())
	start(t, c)
	s1, s2 := ping(t, outbox.WithOrderingKey("slow")), ping(t, outbox.WithOrderingKey("slow"))
	probe.written(s2.ID(), s1.ID())
	write(t, f, c, s1)
	Eventually(t, 10*time.Second, "s1 started by the hot path", func() bool { return len(probe.firstDeliveries("slow")) == 1 })
	write(t, f, c, s2) // its key is busy: left to the poller
	if r := record(t, f, s2.ID()); r.LockedBy != "" {
		t.Fatalf("an event written while its key runs is claimed at insert by %q", r.LockedBy)
	}
	m1, m2, m3 := ping(t, outbox.WithOrderingKey("mixed")), ping(t, outbox.WithOrderingKey("mixed")), ping(t, outbox.WithOrderingKey("free"))
	probe.written(m2.ID(), m1.ID())
	write(t, f, c, m1, m2, m3) // m1 and m3 take the hot path; m2 waits for m1
	Eventually(t, 10*time.Second, "the mixed write delivered", func() bool {
		return record(t, f, m2.ID()).Status == outbox.StatusDone && record(t, f, m3.ID()).Status == outbox.StatusDone
	})
	close(release)
	Eventually(t, 10*time.Second, "s2 delivered once s1 is DONE", func() bool { return record(t, f, s2.ID()).Status == outbox.StatusDone })
	if got := probe.firstDeliveries("slow"); !slices.Equal(got, []string{s1.ID(), s2.ID()}) {
		t.Fatalf("key slow: first deliveries %v, want %v", got, []string{s1.ID(), s2.ID()})
	}
	if got := probe.firstDeliveries("mixed"); !slices.Equal(got, []string{m1.ID(), m2.ID()}) {
		t.Fatalf("key mixed: first deliveries %v, want %v", got, []string{m1.ID(), m2.ID()})
	}
	probe.check(t)
}

// e2eOrderedDelayed: a delayed event holds back the events of its key
// written after it until it is due and delivered.
func e2eOrderedDelayed(t *testing.T, f Fixture) {
	clock := NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	probe := newOrderProbe(t, f)
	c := newClient(t, f, outbox.Config{Ordered: true, Clock: clock, PollInterval: time.Hour})
	handle(t, c, evtPing, probe.listener())
	start(t, c)
	d1 := ping(t, outbox.WithOrderingKey("d"), outbox.WithAvailableAt(clock.Now().Add(time.Hour)))
	d2 := ping(t, outbox.WithOrderingKey("d"))
	probe.written(d2.ID(), d1.ID())
	write(t, f, c, d1, d2)
	ctx := context.Background()
	if n, err := c.PollOnce(ctx); err != nil || n != 0 {
		t.Fatalf("poll before the delayed head is due: queued %d, %v; want 0", n, err)
	}
	if got := probe.firstDeliveries("d"); len(got) != 0 {
		t.Fatalf("delivered %v before the delayed head was due", got)
	}
	clock.Advance(time.Hour)
	// Poll as the poller would, until both are delivered, with time
	// passing: the background poller's first claim may have read the
	// clock before it moved and claimed d2 once d1 was done, stamping the
	// claim an hour old; the dispatcher then leaves it to the recovery of
	// expired claims, which runs about once a second of the Clock.
	deadline := time.Now().Add(10 * time.Second)
	for record(t, f, d2.ID()).Status != outbox.StatusDone {
		if time.Now().After(deadline) {
			t.Fatalf("not both delivered after 10s: %+v\n%+v\nfirst deliveries %v", record(t, f, d1.ID()), record(t, f, d2.ID()), probe.firstDeliveries("d"))
		}
		if _, err := c.PollOnce(ctx); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	if got := probe.firstDeliveries("d"); !slices.Equal(got, []string{d1.ID(), d2.ID()}) {
		t.Fatalf("key d: first deliveries %v, want %v", got, []string{d1.ID(), d2.ID()})
	}
	probe.check(t)
}
