package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
)

// run is the outcome of one timed run of one side of a scenario.
type run struct {
	n       int64           // rows written (or delivered, or drained)
	elapsed time.Duration   // wall time of the run
	lat     []time.Duration // per-operation latencies, if measured
	max     time.Duration   // largest latency
	rssKB   int64           // peak RSS of the process that ran it, if measured apart
	note    string
}

func (r run) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.n) / r.elapsed.Seconds()
}

// env is what a scenario runs against: one backend, one pool.
type env struct {
	b     backend
	disp  outbox.DispatcherConfig // Workers, AckBatchSize, AckInterval of the framework's dispatchers
	db    *sql.DB
	store *outboxsql.Store
	txm   *outboxsql.TxManager
	log   *slog.Logger
}

// loop runs op on workers goroutines until d has passed and returns the
// count of operations, rows per operation times ops, and the latencies.
func loop(ctx context.Context, workers int, d time.Duration, rowsPerOp int, op func(ctx context.Context, w int, i int) error) (run, error) {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		lats    []time.Duration
		total   atomic.Int64
		firstEr error
	)
	start := time.Now()
	deadline := start.Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, 4096)
			for i := 0; ; i++ {
				t0 := time.Now()
				if !t0.Before(deadline) {
					break
				}
				if err := op(ctx, w, i); err != nil {
					mu.Lock()
					if firstEr == nil {
						firstEr = err
					}
					mu.Unlock()
					break
				}
				local = append(local, time.Since(t0))
				total.Add(int64(rowsPerOp))
			}
			mu.Lock()
			lats = append(lats, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	r := run{n: total.Load(), elapsed: time.Since(start), lat: lats}
	return r, firstEr
}

// rawWrite is the write baseline: BEGIN; one multi-row INSERT of rows rows
// into the raw table; COMMIT.
func (e *env) rawWrite(rows int) func(ctx context.Context, w, i int) error {
	query := e.b.rawInsertSQL(rows)
	return func(ctx context.Context, w, i int) error {
		tx, err := e.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		now := time.Now()
		args := make([]any, 0, rows*10)
		for k := range rows {
			args = e.b.appendRawRow(args, "o-"+strconv.Itoa(w)+"-"+strconv.Itoa(i)+"-"+strconv.Itoa(k), now)
		}
		if _, err := tx.ExecContext(ctx, query, args...); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
}

// fwWrite is the framework side: the same transaction through TxManager and
// the outbox Writer, rows events per transaction.
func (e *env) fwWrite(w *outbox.Writer, rows int) func(ctx context.Context, wk, i int) error {
	return func(ctx context.Context, wk, i int) error {
		return e.txm.InTx(ctx, func(ctx context.Context) error {
			events := make([]outbox.Envelope, rows)
			for k := range rows {
				ev, err := newEvent("o-" + strconv.Itoa(wk) + "-" + strconv.Itoa(i) + "-" + strconv.Itoa(k))
				if err != nil {
					return err
				}
				events[k] = ev
			}
			_, err := w.Write(ctx, events...)
			return err
		})
	}
}

// writeSide runs one side of write or write-batch: rows events per
// transaction on workers writers for d, into an emptied table. The
// framework's Writer has no hook (a poller-only setup).
func (e *env) writeSide(ctx context.Context, side string, workers, rows int, d time.Duration) (run, error) {
	if side == "raw" {
		if err := e.b.truncate(ctx, e.db, rawTable); err != nil {
			return run{}, err
		}
		return loop(ctx, workers, d, rows, e.rawWrite(rows))
	}
	w, err := outbox.NewWriter(outbox.WriterConfig{TxContext: e.txm, Store: e.store, Logger: e.log})
	if err != nil {
		return run{}, err
	}
	if err := e.b.truncate(ctx, e.db, fwTable); err != nil {
		return run{}, err
	}
	return loop(ctx, workers, d, rows, e.fwWrite(w, rows))
}

// stampHook wraps the dispatcher's hook and records when each batch's
// transaction committed (AfterCommit runs right after Commit returns), so
// the listener can measure commit → listener latency.
type stampHook struct {
	outbox.ClaimingHook
	stamps *sync.Map // event id -> time.Time
}

func (h stampHook) AfterCommit(events []outbox.Envelope) {
	now := time.Now()
	for _, e := range events {
		h.stamps.Store(e.ID(), now)
	}
	h.ClaimingHook.AfterCommit(events)
}

// e2eFramework writes with workers writers for d through the hot path of
// a running dispatcher (and poller, as deployed) and measures the rate at
// which rows become DONE (up to the last DONE written) and the commit →
// listener latency. Its baseline is writeSide("raw", workers, 1, d).
func (e *env) e2eFramework(ctx context.Context, workers int, d time.Duration) (fw run, err error) {
	if err := e.b.truncate(ctx, e.db, fwTable); err != nil {
		return fw, err
	}
	var (
		stamps    sync.Map
		delivered atomic.Int64
		latMu     sync.Mutex
		lats      = make([]time.Duration, 0, 1<<16)
	)
	reg := outbox.NewRegistry()
	if err := reg.Register(outbox.AggregateName(aggregateType), outbox.EventName(eventType), outbox.ListenerFunc(func(_ context.Context, ev outbox.Envelope) error {
		now := time.Now()
		if v, ok := stamps.LoadAndDelete(ev.ID()); ok {
			latMu.Lock()
			lats = append(lats, now.Sub(v.(time.Time)))
			latMu.Unlock()
		}
		delivered.Add(1)
		return nil
	})); err != nil {
		return fw, err
	}
	dc := e.disp
	dc.Store, dc.DB, dc.Registry, dc.Logger = e.store, e.db, reg, e.log
	disp, err := outbox.NewDispatcher(dc)
	if err != nil {
		return fw, err
	}
	poll, err := outbox.NewPoller(outbox.PollerConfig{Store: e.store, DB: e.db, Dispatcher: disp, Logger: e.log})
	if err != nil {
		return fw, err
	}
	w, err := outbox.NewWriter(outbox.WriterConfig{TxContext: e.txm, Store: e.store, Logger: e.log,
		Hook: stampHook{ClaimingHook: disp.Hook(), stamps: &stamps}})
	if err != nil {
		return fw, err
	}
	if err := disp.Start(ctx); err != nil {
		return fw, err
	}
	if err := poll.Start(ctx); err != nil {
		return fw, err
	}
	start := time.Now()
	written, werr := loop(ctx, workers, d, 1, e.fwWrite(w, 1))
	// Wait for every written event to reach the listener, then stop: Close
	// writes the last acks, so the run ends when every row is DONE.
	for last, since := int64(-1), time.Now(); delivered.Load() < written.n && time.Since(since) < 10*time.Second; {
		if cur := delivered.Load(); cur != last {
			last, since = cur, time.Now()
		}
		time.Sleep(200 * time.Microsecond)
	}
	cerr := poll.Close(ctx)
	if err := disp.Close(ctx); err != nil && cerr == nil {
		cerr = err
	}
	elapsed := time.Since(start)
	if werr != nil {
		return fw, fmt.Errorf("framework: %w", werr)
	}
	if cerr != nil {
		return fw, cerr
	}
	done, err := countStatus(ctx, e.db, fwTable, int(outbox.StatusDone))
	if err != nil {
		return fw, err
	}
	fw = run{n: done, elapsed: elapsed, lat: lats}
	if done != written.n {
		fw.note = fmt.Sprintf("written=%d,done=%d", written.n, done)
	}
	return fw, nil
}

// drainChild runs in a fresh process of this binary: it drains the n
// pending rows that the parent loaded, either with the framework (poller +
// dispatcher + no-op listener) or with the raw claim+mark loop, on a pool
// of conns connections, and prints the outcome and its peak RSS.
func drainChild(ctx context.Context, b backend, o options, mode string) error {
	n, conns, batch := o.drainRows, o.drainConns, o.drainBatch
	db, err := b.open(ctx, conns)
	if err != nil {
		return err
	}
	defer db.Close()
	var r run
	switch mode {
	case "framework":
		r, err = drainFramework(ctx, db, o.dispatcherConfig(), n, batch, o.drainInterval)
	case "raw":
		r, err = drainRaw(ctx, b, db, n, conns, batch)
	default:
		err = fmt.Errorf("unknown drain mode %q", mode)
	}
	if err != nil {
		return err
	}
	fmt.Printf("DRAIN n=%d ns=%d rss_kb=%d\n", r.n, r.elapsed.Nanoseconds(), peakRSSKB())
	return nil
}

// drainFramework drains fwTable with one poller (claims of batch rows) and
// a dispatcher with a no-op listener, and ends when the last ack is written.
func drainFramework(ctx context.Context, db *sql.DB, dc outbox.DispatcherConfig, n, batch int, interval time.Duration) (run, error) {
	store, err := outboxsql.Open(db, outboxsql.WithTable(fwTable))
	if err != nil {
		return run{}, err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	var delivered atomic.Int64
	all := make(chan struct{})
	reg := outbox.NewRegistry()
	if err := reg.Register(outbox.AggregateName(aggregateType), outbox.EventName(eventType), outbox.ListenerFunc(func(context.Context, outbox.Envelope) error {
		if delivered.Add(1) == int64(n) {
			close(all)
		}
		return nil
	})); err != nil {
		return run{}, err
	}
	dc.Store, dc.DB, dc.Registry, dc.Logger = store, db, reg, logger
	disp, err := outbox.NewDispatcher(dc)
	if err != nil {
		return run{}, err
	}
	poll, err := outbox.NewPoller(outbox.PollerConfig{Store: store, DB: db, Dispatcher: disp, Logger: logger,
		BatchSize: batch, Interval: interval})
	if err != nil {
		return run{}, err
	}
	start := time.Now()
	if err := disp.Start(ctx); err != nil {
		return run{}, err
	}
	if err := poll.Start(ctx); err != nil {
		return run{}, err
	}
	// Stop early if nothing is delivered for 30 s (the count then shows it).
	tick := time.NewTicker(time.Second)
	for last, idle := int64(-1), 0; idle < 30; {
		select {
		case <-all:
			idle = 30
		case <-tick.C:
			if cur := delivered.Load(); cur == last {
				idle++
			} else {
				last, idle = cur, 0
			}
		}
	}
	tick.Stop()
	if err := poll.Close(ctx); err != nil {
		return run{}, err
	}
	if err := disp.Close(ctx); err != nil {
		return run{}, err
	}
	elapsed := time.Since(start)
	done, err := countStatus(ctx, db, fwTable, int(outbox.StatusDone))
	if err != nil {
		return run{}, err
	}
	return run{n: done, elapsed: elapsed}, nil
}

// drainRaw drains rawTable with conns goroutines, each looping: claim up to
// batch due rows for an owner (the same claim shape as the store's, reading
// the same columns), then mark them DONE, fenced by owner.
func drainRaw(ctx context.Context, b backend, db *sql.DB, n, conns, batch int) (run, error) {
	const cols = "event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, payload_bytes, headers, " +
		"status, attempts, occurred_at, available_at, created_at, done_at, last_error, locked_by, locked_at"
	owner := outbox.NewOwnerID()
	lease := 5 * time.Minute
	var claimSQL string
	switch b.family {
	case "postgres":
		claimSQL = b.rebind("UPDATE " + rawTable + " SET locked_by = ?, locked_at = ? WHERE event_id = ANY(ARRAY(" +
			"SELECT event_id FROM " + rawTable + " WHERE status IN (0, 2) AND available_at <= ? AND (locked_by IS NULL OR locked_at <= ?)" +
			" ORDER BY available_at, event_id LIMIT ? FOR UPDATE SKIP LOCKED)) RETURNING " + cols)
	case "sqlite":
		claimSQL = "UPDATE " + rawTable + " SET locked_by = ?, locked_at = ? WHERE event_id IN (" +
			"SELECT event_id FROM " + rawTable + " WHERE status IN (0, 2) AND available_at <= ? AND (locked_by IS NULL OR locked_at <= ?)" +
			" ORDER BY available_at, event_id LIMIT ?) RETURNING " + cols
	case "mysql":
		claimSQL = "SELECT " + cols + " FROM " + rawTable + " WHERE claim_at <= ? AND (locked_by IS NULL OR locked_at <= ?)" +
			" ORDER BY claim_at, event_id LIMIT ? FOR UPDATE SKIP LOCKED"
	}
	in := func(head string, k int) string {
		return b.rebind(head + " IN (?" + strings.Repeat(", ?", k-1) + ")")
	}
	scan := func(rows *sql.Rows) ([]any, error) {
		var ids []any
		vals := make([]any, 17)
		ptrs := make([]any, 17)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return nil, err
			}
			switch id := vals[0].(type) {
			case []byte:
				ids = append(ids, string(id))
			default:
				ids = append(ids, id)
			}
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return ids, rows.Close()
	}
	claim := func() ([]any, error) {
		now := time.Now()
		if b.family != "mysql" {
			rows, err := db.QueryContext(ctx, claimSQL, owner, b.timeArg(now), b.timeArg(now), b.timeArg(now.Add(-lease)), batch)
			if err != nil {
				return nil, err
			}
			return scan(rows)
		}
		tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return nil, err
		}
		defer tx.Rollback()
		rows, err := tx.QueryContext(ctx, claimSQL, b.timeArg(now), b.timeArg(now.Add(-lease)), batch)
		if err != nil {
			return nil, err
		}
		ids, err := scan(rows)
		if err != nil || len(ids) == 0 {
			return ids, err
		}
		args := append([]any{owner, b.timeArg(now)}, ids...)
		if _, err := tx.ExecContext(ctx, in("UPDATE "+rawTable+" SET locked_by = ?, locked_at = ? WHERE event_id", len(ids)), args...); err != nil {
			return nil, err
		}
		return ids, tx.Commit()
	}
	markDone := func(ids []any) error {
		args := append([]any{b.timeArg(time.Now()), owner}, ids...)
		_, err := db.ExecContext(ctx, in("UPDATE "+rawTable+" SET status = 1, done_at = ?, locked_by = NULL, locked_at = NULL"+
			" WHERE locked_by = ? AND status IN (0, 2) AND event_id", len(ids)), args...)
		return err
	}
	var (
		wg    sync.WaitGroup
		total atomic.Int64
		mu    sync.Mutex
		first error
	)
	start := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ids, err := claim()
				if err == nil && len(ids) > 0 {
					err = markDone(ids)
				}
				if err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					return
				}
				if len(ids) == 0 {
					return
				}
				total.Add(int64(len(ids)))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if first != nil {
		return run{}, first
	}
	done, err := countStatus(ctx, db, rawTable, int(outbox.StatusDone))
	if err != nil {
		return run{}, err
	}
	return run{n: done, elapsed: elapsed}, nil
}

// percentile returns the p-th percentile (0..1) of sorted latencies.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}

// summarize sorts the latencies and fills max.
func (r *run) summarize() {
	slices.Sort(r.lat)
	if len(r.lat) > 0 {
		r.max = r.lat[len(r.lat)-1]
	}
}

// discardLogger drops everything below Error.
func discardLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelError}))
}
