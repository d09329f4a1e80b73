package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// The e2e-cross scenario: commit → listener latency from one node to
// another. A writer-only Client writes one event per transaction at a
// steady -cross-rate, on its own pool; a poller-only Client, on a pool of
// its own, as if in another process, delivers them with the poll interval
// left at its default (5 s). The framework side hears the writer's
// wake-ups (outbox.Waker: LISTEN/NOTIFY on PostgreSQL, the signal row on
// MySQL and SQLite); the baseline is the same job written by hand
// (crossRaw). Without -short, a run of the framework with wake-ups off
// (outbox.NoWaker: what every node but the writer saw before them) comes
// first, its latencies in the baseline's note. Both sides write at the
// same rate, so the ratio of their rates is about 1: the latencies are the
// result (the baseline's are in its note).

// otherNode empties table and opens the pool of the node that delivers,
// as if in another process; the caller closes it.
func (e *env) otherNode(ctx context.Context, o options, table string) (pool, error) {
	if err := e.b.truncate(ctx, e.p, table); err != nil {
		return nil, err
	}
	return e.b.open(ctx, o.pool)
}

// crossSide runs one side of e2e-cross for d: wake says whether the
// Clients wake each other.
func (e *env) crossSide(ctx context.Context, o options, wake bool) (r run, err error) {
	other, err := e.otherNode(ctx, o, fwTable)
	if err != nil {
		return r, err
	}
	defer other.close()
	otherStore, err := other.store(fwTable)
	if err != nil {
		return r, err
	}
	cfg := e.cfg
	cfg.Logger = e.log
	if !wake {
		cfg.Waker = outbox.NoWaker
	}
	wcfg := cfg
	wcfg.Store, wcfg.TxContext, wcfg.Mode = e.store, e.txm, outbox.ModeWriterOnly
	writer, err := outbox.New(wcfg)
	if err != nil {
		return r, err
	}
	pcfg := cfg
	claims := &claimTimes{}
	pcfg.Store, pcfg.Mode, pcfg.Metrics = otherStore, outbox.ModePollerOnly, claims
	poller, err := outbox.New(pcfg)
	if err != nil {
		return r, err
	}
	var got arrivals
	if err := poller.Handle(outbox.EventName(eventType), got.arrived); err != nil {
		return r, err
	}
	for _, c := range []*outbox.Client{poller, writer} {
		if err := c.Start(ctx); err != nil {
			return r, err
		}
		defer func() {
			if cerr := c.Close(ctx); cerr != nil && err == nil {
				err = cerr
			}
		}()
	}
	written, err := paced(ctx, o.crossRate, o.duration, e.fwWrite(writer, 1, &got.stamps))
	if err != nil {
		return r, err
	}
	// Every event reaches the listener within a poll interval at worst.
	got.await(written, outbox.DefaultPollInterval+5*time.Second)
	r = got.result(written, o.duration)
	if !wake {
		r.addNote("wake-ups off")
	}
	r.addNote(claims.String())
	return r, nil
}

// claimTimes records how long the poller's claims took.
type claimTimes struct {
	outbox.NopMetrics
	mu    sync.Mutex
	times []time.Duration
	rows  int
}

func (c *claimTimes) Claimed(d time.Duration, n int) {
	c.mu.Lock()
	c.times = append(c.times, d)
	c.rows += n
	c.mu.Unlock()
}

// String is how many claims there were, their rows and their p50 and p99.
func (c *claimTimes) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	slices.Sort(c.times)
	return fmt.Sprintf("claims=%d,rows/claim=%.1f,claim-p50=%s,claim-p99=%s", len(c.times), float64(c.rows)/float64(max(len(c.times), 1)),
		percentile(c.times, 0.5).Round(10*time.Microsecond), percentile(c.times, 0.99).Round(10*time.Microsecond))
}

// paced runs op at rate operations a second for d, each on a goroutine of
// its own as its time comes (so that a slow commit does not hold back the
// next), and returns how many succeeded.
func paced(ctx context.Context, rate int, d time.Duration, op func(ctx context.Context, w, i int) error) (int64, error) {
	var (
		wg    sync.WaitGroup
		done  atomic.Int64
		first atomic.Value
	)
	interval := time.Second / time.Duration(max(rate, 1))
	start := time.Now()
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if at.Sub(start) >= d {
			break
		}
		time.Sleep(time.Until(at))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := op(ctx, i, 0); err != nil {
				first.CompareAndSwap(nil, err)
				return
			}
			done.Add(1)
		}()
	}
	wg.Wait()
	if err, _ := first.Load().(error); err != nil {
		return done.Load(), err
	}
	return done.Load(), nil
}

// crossRaw is e2e-cross's baseline: the job written by hand. The writer
// inserts one raw row per transaction at the same rate, on its pool; a
// poller on a pool of its own, as if in another process, loops: a read of
// whether a row is due (which takes no lock), then, if one is, the raw
// claim of up to 100 rows and their DONE (rawClaimer), else a sleep of
// 1 ms. That is the lowest latency a hand-written poller gets without
// wake-ups, at the cost of 1,000 reads a second.
func (e *env) crossRaw(ctx context.Context, o options) (r run, err error) {
	other, err := e.otherNode(ctx, o, rawTable)
	if err != nil {
		return r, err
	}
	defer other.close()
	var got arrivals
	rc := newRawClaimer(e.b, other, 100)
	// The due index's condition (rawClaimer's claim reads the same), so
	// that the read is one index probe, not a scan of the DONE rows.
	due := e.b.rebind("SELECT event_id FROM " + rawTable + " WHERE status IN (0, 2) AND locked_by IS NULL AND ordering_key IS NULL AND available_at <= ? LIMIT 1")
	if e.b.family == "mysql" {
		due = "SELECT event_id FROM " + rawTable + " WHERE due_at <= ? LIMIT 1"
	}
	pollCtx, stop := context.WithCancel(ctx)
	polled := make(chan error, 1)
	go func() {
		for pollCtx.Err() == nil {
			ids, err := other.query(pollCtx, due, e.b.timeArg(time.Now()))
			if err == nil && len(ids) > 0 {
				err = retryDeadlock(func() (err error) { ids, err = rc.claim(pollCtx); return err })
			} else if err == nil {
				time.Sleep(time.Millisecond)
				continue
			}
			now := time.Now()
			if err == nil && len(ids) > 0 {
				err = retryDeadlock(func() error { return rc.done(pollCtx, ids) })
			}
			if err != nil {
				polled <- err
				return
			}
			for _, id := range ids {
				got.arrive(fmt.Sprint(id), now)
			}
		}
		polled <- nil
	}()
	query := e.b.rawInsertSQL(1)
	written, err := paced(ctx, o.crossRate, o.duration, func(ctx context.Context, w, _ int) error {
		args := e.b.appendRawRow(make([]any, 0, 9), "o-"+strconv.Itoa(w), time.Now())
		err := e.p.inTx(ctx, false, func(tx conn) error {
			_, err := tx.exec(ctx, query, args...)
			return err
		})
		if err == nil {
			got.stamps.Store(args[0].(string), time.Now())
		}
		return err
	})
	if err == nil {
		got.await(written, 5*time.Second)
	}
	stop()
	if perr := <-polled; perr != nil && !errors.Is(perr, context.Canceled) && err == nil {
		err = perr
	}
	if err != nil {
		return r, err
	}
	return got.result(written, o.duration), nil
}

// latencyNote is a side's commit → listener p50 and p99, for a note.
func latencyNote(r run) string {
	lat := slices.Clone(r.lat)
	slices.Sort(lat)
	return fmt.Sprintf("p50=%s,p99=%s", percentile(lat, 0.5).Round(time.Millisecond), percentile(lat, 0.99).Round(time.Millisecond))
}

// cross runs the e2e-cross scenario: pairs of the framework against the
// raw loop (crossRaw), whose latencies are in the baseline's note. Without
// -short, a run with wake-ups off comes first (it waits for a poll
// interval, 5 s), and its latencies are added to that note too.
func (e *env) cross(ctx context.Context, o options, rep *report) error {
	baseNote := ""
	if !o.short {
		r, err := e.crossSide(ctx, o, false)
		if err != nil {
			return fmt.Errorf("e2e-cross (poll): %w", err)
		}
		baseNote = "poll-only:" + latencyNote(r)
	}
	return rep.addPairs(e.b.name, fmt.Sprintf("e2e-cross-%d/s", o.crossRate), 1, max(1, o.pairs/2), "framework", []string{"raw"}, baseNote,
		func(side string) (run, error) {
			if side == "raw" {
				r, err := e.crossRaw(ctx, o)
				if err == nil {
					r.addNote("raw:" + latencyNote(r))
				}
				return r, err
			}
			return e.crossSide(ctx, o, true)
		})
}

// idleNodes is how many idle poller-only Clients idle-wake runs.
const idleNodes = 8

// idleSide runs idleNodes poller-only Clients on an empty table for d,
// listening for wake-ups or not, and returns the CPU the local database
// servers and this process spent meanwhile (SQLite's is in the process).
// Nothing is written: it is what listening costs an idle database, beside
// what the idle pollers, heartbeats and pause refreshes cost anyway.
func (e *env) idleSide(ctx context.Context, d time.Duration, wake bool) (r run, err error) {
	if err := e.b.truncate(ctx, e.p, fwTable); err != nil {
		return r, err
	}
	cfg := e.cfg
	cfg.Store, cfg.Mode, cfg.Logger = e.store, outbox.ModePollerOnly, e.log
	if !wake {
		cfg.Waker = outbox.NoWaker
	}
	for range idleNodes {
		c, err := outbox.New(cfg)
		if err != nil {
			return r, err
		}
		if err := c.HandleAll(outbox.ListenerFunc(func(context.Context, outbox.Envelope) error { return nil })); err != nil {
			return r, err
		}
		if err := c.Start(ctx); err != nil {
			return r, err
		}
		defer func() {
			if cerr := c.Close(ctx); cerr != nil && err == nil {
				err = cerr
			}
		}()
	}
	time.Sleep(time.Second) // the start: first polls, heartbeats, LISTEN
	cpu := cpuSince()
	time.Sleep(d)
	cpu(&r)
	r.n, r.elapsed = 1, d
	per := func(c time.Duration) string {
		return fmt.Sprintf("%.1fms/s", float64(c.Microseconds())/1e3/d.Seconds())
	}
	r.note = "server=" + per(r.server) + ",client=" + per(r.client)
	if !wake {
		r.addNote("wake-ups off")
	}
	return r, nil
}

// idle runs the idle-wake scenario: idleNodes idle Clients listening for
// wake-ups against the same without, the CPU of each in its note.
func (e *env) idle(ctx context.Context, o options, rep *report) error {
	d := max(o.duration, 5*time.Second)
	return rep.addPairs(e.b.name, fmt.Sprintf("idle-wake-%d-nodes", idleNodes), idleNodes, 1, "framework", []string{"off"}, "",
		func(side string) (run, error) { return e.idleSide(ctx, d, side == "framework") })
}
