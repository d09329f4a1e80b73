package main

import (
	"context"
	"errors"
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
	"github.com/go-outbox/outbox/core/sqlstore"
	"github.com/go-sql-driver/mysql"
)

// run is the outcome of one timed run of one side of a scenario.
type run struct {
	n       int64           // rows written (or delivered, or drained)
	elapsed time.Duration   // wall time of the run
	lat     []time.Duration // per-operation latencies, if measured
	max     time.Duration   // largest latency
	rssKB   int64           // peak RSS of the process that ran it, if measured apart
	// client and server are the CPU time (user and system) of the process
	// that ran it and of the local database server meanwhile, if measured
	// apart (drain; see serverCPU).
	client, server time.Duration
	note           string
}

// cpuPerRow prints the client's and the database server's CPU per row in
// microseconds, or "" when they were not measured.
func (r run) cpuPerRow() string {
	if r.client == 0 || r.n == 0 {
		return ""
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(r.n) }
	return fmt.Sprintf("%.1f+%.1f", per(r.client), per(r.server))
}

// addNote appends s to the run's note, comma-separated.
func (r *run) addNote(s string) { r.note = strings.TrimPrefix(r.note+","+s, ",") }

func (r run) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.n) / r.elapsed.Seconds()
}

// env is what a scenario runs against: one backend, one pool.
type env struct {
	b     backend
	cfg   outbox.Config // the framework's tuning: Workers, AckBatchSize, AckInterval
	p     pool
	store *sqlstore.Store
	txm   txManager
	log   *slog.Logger
}

// client returns a Client of mode on the env's store, tuned by e.cfg.
func (e *env) client(mode outbox.Mode) (*outbox.Client, error) {
	cfg := e.cfg
	cfg.Store, cfg.TxContext, cfg.Mode, cfg.Logger = e.store, e.txm, mode, e.log
	return outbox.New(cfg)
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
		return e.p.inTx(ctx, false, func(tx conn) error {
			now := time.Now()
			args := make([]any, 0, rows*9)
			for k := range rows {
				args = e.b.appendRawRow(args, "o-"+strconv.Itoa(w)+"-"+strconv.Itoa(i)+"-"+strconv.Itoa(k), now)
			}
			_, err := tx.exec(ctx, query, args...)
			return err
		})
	}
}

// rawCopy is the write baseline of a copier: BEGIN; COPY of rows rows
// into the raw table; COMMIT.
func (e *env) rawCopy(rows int) func(ctx context.Context, w, i int) error {
	columns := strings.Split(rawInsertColumns, ", ")
	return func(ctx context.Context, w, i int) error {
		return e.p.inTx(ctx, false, func(tx conn) error {
			now := time.Now()
			src := make([][]any, rows)
			for k := range rows {
				src[k] = e.b.appendRawRow(make([]any, 0, len(columns)), "o-"+strconv.Itoa(w)+"-"+strconv.Itoa(i)+"-"+strconv.Itoa(k), now)
			}
			_, err := tx.(copier).copyRows(ctx, rawTable, columns, src)
			return err
		})
	}
}

// rawSides returns the raw sides of a write of rows events per
// transaction: "raw", the multi-row INSERT, and on a copier, for batches
// the framework copies, "raw-copy" too; the faster one is the baseline.
func (e *env) rawSides(rows int) []string {
	if _, ok := e.p.(copier); ok && rows >= sqlstore.CopyThreshold {
		return []string{"raw", "raw-copy"}
	}
	return []string{"raw"}
}

// fwWrite is the framework side: the same transaction through the
// TxManager and Client.Write, rows events per transaction. With stamps set,
// it records when each transaction committed (its first after-commit
// callback, registered before the Client's), so that the listener can
// measure commit → listener latency.
func (e *env) fwWrite(c *outbox.Client, rows int, stamps *sync.Map) func(ctx context.Context, wk, i int) error {
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
			if stamps != nil {
				tx, err := e.txm.Current(ctx)
				if err != nil {
					return err
				}
				tx.AfterCommit(func() {
					now := time.Now()
					for _, ev := range events {
						stamps.Store(ev.ID(), now)
					}
				})
			}
			_, err := c.Write(ctx, events...)
			return err
		})
	}
}

// writeSide runs one side of write or write-batch: rows events per
// transaction on workers writers for d, into an emptied table. The
// framework side is a Client in ModeWriterOnly: its rows are left
// unclaimed for pollers elsewhere.
func (e *env) writeSide(ctx context.Context, side string, workers, rows int, d time.Duration) (r run, err error) {
	if side == "raw" || side == "raw-copy" {
		if err := e.b.truncate(ctx, e.p, rawTable); err != nil {
			return run{}, err
		}
		op := e.rawWrite(rows)
		if side == "raw-copy" {
			op = e.rawCopy(rows)
		}
		r, err := loop(ctx, workers, d, rows, op)
		r.note = strings.TrimPrefix(side, "raw-")
		return r, err
	}
	c, err := e.client(outbox.ModeWriterOnly)
	if err != nil {
		return run{}, err
	}
	if err := c.Start(ctx); err != nil {
		return run{}, err
	}
	defer func() {
		if cerr := c.Close(ctx); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := e.b.truncate(ctx, e.p, fwTable); err != nil {
		return run{}, err
	}
	return loop(ctx, workers, d, rows, e.fwWrite(c, rows, nil))
}

// variant is how e2eFramework's Client differs from e2e-hot's: ordered
// (e2e-hot-ordered), observed (e2e-hot-observed: each write in an
// application span, the Client observed as obs says).
type variant struct {
	ordered bool
	obs     *observation
}

// e2eFramework writes with workers writers for d through the hot path of
// a running Client (ModeFull: its poller runs too, as deployed) and
// measures the rate at which rows become DONE (up to the last DONE
// written) and the commit → listener latency. Its baseline is e2eRaw.
func (e *env) e2eFramework(ctx context.Context, workers int, d time.Duration, v variant) (fw run, err error) {
	if err := e.b.truncate(ctx, e.p, fwTable); err != nil {
		return fw, err
	}
	var got arrivals
	cfg := e.cfg
	cfg.Store, cfg.TxContext, cfg.Mode, cfg.Logger, cfg.Ordered = e.store, e.txm, outbox.ModeFull, e.log, v.ordered
	if v.obs != nil {
		cfg.Metrics, cfg.Hooks, cfg.Interceptors = v.obs.metrics, v.obs.hooks, v.obs.interceptors
	}
	c, err := outbox.New(cfg)
	if err != nil {
		return fw, err
	}
	if err := c.Handle(outbox.EventName(eventType), got.arrived); err != nil {
		return fw, err
	}
	if err := c.Start(ctx); err != nil {
		return fw, err
	}
	cpu := cpuSince()
	start := time.Now()
	op := e.fwWrite(c, 1, &got.stamps)
	if v.obs != nil {
		write := op
		op = func(ctx context.Context, w, i int) error {
			ctx, span := v.obs.tracer.Start(ctx, "POST /orders")
			defer span.End()
			return write(ctx, w, i)
		}
	}
	written, werr := loop(ctx, workers, d, 1, op)
	// Wait for every written event to reach the listener, then stop: Close
	// writes the last acks, so the run ends when every row is DONE.
	for last, since := int64(-1), time.Now(); got.delivered.Load() < written.n && time.Since(since) < 10*time.Second; {
		if cur := got.delivered.Load(); cur != last {
			last, since = cur, time.Now()
		}
		time.Sleep(200 * time.Microsecond)
	}
	cerr := c.Close(ctx)
	elapsed := time.Since(start)
	cpu(&fw)
	if werr != nil {
		return fw, fmt.Errorf("framework: %w", werr)
	}
	if cerr != nil {
		return fw, cerr
	}
	done, err := countStatus(ctx, e.p, fwTable, int(outbox.StatusDone))
	if err != nil {
		return fw, err
	}
	fw.n, fw.elapsed, fw.lat = done, elapsed, got.latencies()
	if done != written.n {
		fw.note = fmt.Sprintf("written=%d,done=%d", written.n, done)
	}
	return fw, nil
}

// arrivals is a listener that counts the events it gets and records each
// one's commit → listener latency, from the commit times in stamps (see
// fwWrite).
type arrivals struct {
	stamps    sync.Map
	delivered atomic.Int64
	mu        sync.Mutex
	lats      []time.Duration
}

func (a *arrivals) arrived(_ context.Context, ev outbox.Envelope) error {
	a.arrive(ev.ID(), time.Now())
	return nil
}

// arrive counts the event id delivered at now.
func (a *arrivals) arrive(id string, now time.Time) {
	if v, ok := a.stamps.LoadAndDelete(id); ok {
		a.mu.Lock()
		a.lats = append(a.lats, now.Sub(v.(time.Time)))
		a.mu.Unlock()
	}
	a.delivered.Add(1)
}

// await waits until n events have arrived, at most within.
func (a *arrivals) await(n int64, within time.Duration) {
	for deadline := time.Now().Add(within); a.delivered.Load() < n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// result is the run of written events over elapsed: what arrived, with
// its latencies, and a note if some did not.
func (a *arrivals) result(written int64, elapsed time.Duration) run {
	r := run{n: a.delivered.Load(), elapsed: elapsed, lat: a.latencies()}
	if r.n != written {
		r.note = fmt.Sprintf("written=%d,delivered=%d", written, r.n)
	}
	return r
}

// latencies returns the latencies recorded so far.
func (a *arrivals) latencies() []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.lats)
}

// e2eRaw is e2e-hot's baseline: the hot path's job written by hand, with
// nothing of the framework. Each of workers writers inserts one row per
// transaction (the raw INSERT of write-cN) and, once it has committed,
// hands the row's id to a channel; one goroutine takes the ids as they
// come (all that wait, up to ackBatch), runs the listener (which counts)
// and marks them DONE in one UPDATE … WHERE event_id IN (…). The rate is
// rows DONE / time until the last DONE is written, as for the framework
// side: the same rows, the statements a hand-written relay would run, and
// no claim, queue, retry or lease.
func (e *env) e2eRaw(ctx context.Context, workers int, d time.Duration, ackBatch int) (run, error) {
	if err := e.b.truncate(ctx, e.p, rawTable); err != nil {
		return run{}, err
	}
	query := e.b.rawInsertSQL(1)
	committed := make(chan string, 4096)
	var delivered atomic.Int64
	ackErr := make(chan error, 1)
	go func() {
		var err error
		ids := make([]any, 0, ackBatch+1)
		for id := range committed {
			ids = append(ids[:0], nil, id)
		gather:
			for len(ids) <= ackBatch {
				select {
				case id, ok := <-committed:
					if !ok {
						break gather
					}
					ids = append(ids, id)
				default:
					break gather
				}
			}
			delivered.Add(int64(len(ids) - 1))
			if err == nil {
				ids[0] = e.b.timeArg(time.Now())
				err = retryDeadlock(func() error {
					_, err := e.p.exec(ctx, e.b.in("UPDATE "+rawTable+" SET status = 1, done_at = ? WHERE event_id", len(ids)-1), ids...)
					return err
				})
			}
		}
		ackErr <- err
	}()
	cpu := cpuSince()
	start := time.Now()
	written, werr := loop(ctx, workers, d, 1, func(ctx context.Context, w, i int) error {
		args := e.b.appendRawRow(make([]any, 0, 9), "o-"+strconv.Itoa(w)+"-"+strconv.Itoa(i), time.Now())
		err := e.p.inTx(ctx, false, func(tx conn) error {
			_, err := tx.exec(ctx, query, args...)
			return err
		})
		if err == nil {
			committed <- args[0].(string) // the event id
		}
		return err
	})
	close(committed)
	aerr := <-ackErr
	elapsed := time.Since(start)
	var r run
	cpu(&r)
	if werr != nil {
		return run{}, fmt.Errorf("raw-deliver: %w", werr)
	}
	if aerr != nil {
		return run{}, fmt.Errorf("raw-deliver: ack: %w", aerr)
	}
	done, err := countStatus(ctx, e.p, rawTable, int(outbox.StatusDone))
	if err != nil {
		return run{}, err
	}
	r.n, r.elapsed, r.note = done, elapsed, "deliver"
	if done != written.n || delivered.Load() != written.n {
		r.note = fmt.Sprintf("deliver,written=%d,delivered=%d,done=%d", written.n, delivered.Load(), done)
	}
	return r, nil
}

// drainChild runs in a fresh process of this binary: it drains the n
// pending rows that the parent loaded, either with the framework (a Client
// in ModePollerOnly with a no-op listener) or with the raw claim+mark
// loop, on a pool of conns connections, and prints the outcome and its
// peak RSS.
func drainChild(ctx context.Context, b backend, o options, mode string) error {
	n, conns, batch := o.drainRows, o.drainConns, o.drainBatch
	p, err := b.open(ctx, conns)
	if err != nil {
		return err
	}
	defer p.close()
	var r run
	switch mode {
	case "framework":
		r, err = drainFramework(ctx, p, o.clientConfig(), n, batch, o.drainInterval)
	case "framework-ordered":
		cfg := o.clientConfig()
		cfg.Ordered = true
		r, err = drainFramework(ctx, p, cfg, n, batch, o.drainInterval)
	case "raw":
		r, err = drainRaw(ctx, b, p, n, conns, batch)
	case "raw-ordered":
		r, err = drainRawOrdered(ctx, b, p, o.orderedKeys[0])
	default:
		err = fmt.Errorf("unknown drain mode %q", mode)
	}
	if err != nil {
		return err
	}
	fmt.Printf("DRAIN n=%d ns=%d rss_kb=%d\n", r.n, r.elapsed.Nanoseconds(), peakRSSKB())
	return nil
}

// drainFramework drains fwTable with a Client in ModePollerOnly (claims of
// batch rows) and a no-op listener, and ends when the last ack is written.
func drainFramework(ctx context.Context, p pool, cfg outbox.Config, n, batch int, interval time.Duration) (run, error) {
	store, err := p.store(fwTable)
	if err != nil {
		return run{}, err
	}
	cfg.Store, cfg.Mode, cfg.PollInterval = store, outbox.ModePollerOnly, interval
	if batch > 0 {
		cfg.PollBatchSize = batch
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	c, err := outbox.New(cfg)
	if err != nil {
		return run{}, err
	}
	var delivered atomic.Int64
	all := make(chan struct{})
	if err := c.Handle(outbox.EventName(eventType), func(context.Context, outbox.Envelope) error {
		if delivered.Add(1) == int64(n) {
			close(all)
		}
		return nil
	}); err != nil {
		return run{}, err
	}
	start := time.Now()
	if err := c.Start(ctx); err != nil {
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
	if err := c.Close(ctx); err != nil {
		return run{}, err
	}
	return drained(ctx, p, fwTable, time.Since(start))
}

// rawClaimer is the raw baselines' claim of rawTable: claim up to batch
// due unclaimed rows for one owner (the store's fresh claim, reading the
// same columns, without its recovery of expired claims), and mark claimed
// rows DONE, fenced by the owner. Both return the claimed rows' ids.
type rawClaimer struct {
	b               backend
	p               pool
	owner, claimSQL string
	batch           int
}

func newRawClaimer(b backend, p pool, batch int) rawClaimer {
	const cols = "event_id, event_type, aggregate_type, aggregate_id, tenant_id, schema_version, payload, payload_bytes, headers, " +
		"status, attempts, occurred_at, available_at, created_at, done_at, last_error, locked_by, locked_at"
	c := rawClaimer{b: b, p: p, owner: outbox.NewOwnerID(), batch: batch}
	switch b.family {
	case "postgres":
		c.claimSQL = b.rebind("UPDATE " + rawTable + " SET locked_by = ?, locked_at = ? WHERE event_id = ANY(ARRAY(" +
			"SELECT event_id FROM " + rawTable + " WHERE status IN (0, 2) AND locked_by IS NULL AND ordering_key IS NULL AND available_at <= ?" +
			" ORDER BY available_at, event_id LIMIT ? FOR UPDATE SKIP LOCKED)) RETURNING " + cols)
	case "sqlite":
		c.claimSQL = "UPDATE " + rawTable + " SET locked_by = ?, locked_at = ? WHERE event_id IN (" +
			"SELECT event_id FROM " + rawTable + " WHERE status IN (0, 2) AND locked_by IS NULL AND ordering_key IS NULL AND available_at <= ?" +
			" ORDER BY available_at, event_id LIMIT ?) RETURNING " + cols
	case "mysql":
		c.claimSQL = "SELECT " + cols + " FROM " + rawTable + " WHERE due_at <= ?" +
			" ORDER BY due_at, event_id LIMIT ? FOR UPDATE SKIP LOCKED"
	}
	return c
}

// claim claims up to the batch of due rows.
func (c rawClaimer) claim(ctx context.Context) ([]any, error) {
	b, now := c.b, time.Now()
	if b.family != "mysql" {
		return c.p.claim(ctx, c.claimSQL, c.owner, b.timeArg(now), b.timeArg(now), c.batch)
	}
	var ids []any
	err := c.p.inTx(ctx, true, func(tx conn) error {
		var err error
		ids, err = tx.claim(ctx, c.claimSQL, b.timeArg(now), c.batch)
		if err != nil || len(ids) == 0 {
			return err
		}
		args := append([]any{c.owner, b.timeArg(now)}, ids...)
		_, err = tx.exec(ctx, b.in("UPDATE "+rawTable+" SET locked_by = ?, locked_at = ? WHERE event_id", len(ids)), args...)
		return err
	})
	return ids, err
}

// done marks the claimed rows ids DONE.
func (c rawClaimer) done(ctx context.Context, ids []any) error {
	args := append([]any{c.b.timeArg(time.Now()), c.owner}, ids...)
	_, err := c.p.exec(ctx, c.b.in("UPDATE "+rawTable+" SET status = 1, done_at = ?, locked_by = NULL, locked_at = NULL"+
		" WHERE locked_by = ? AND status IN (0, 2) AND event_id", len(ids)), args...)
	return err
}

// drainRaw drains rawTable with conns goroutines, each looping: claim
// (rawClaimer), then mark the rows DONE.
func drainRaw(ctx context.Context, b backend, p pool, n, conns, batch int) (run, error) {
	rc := newRawClaimer(b, p, batch)
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
				var ids []any
				err := retryDeadlock(func() (err error) { ids, err = rc.claim(ctx); return err })
				if err == nil && len(ids) > 0 {
					err = retryDeadlock(func() error { return rc.done(ctx, ids) })
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
	return drained(ctx, p, rawTable, elapsed)
}

// drainRawOrdered drains fwTable, whose rows are spread over keys
// ordering keys, the fastest way a hand-written loop can while it keeps
// the guarantee of ordered delivery (no event starts before the one
// before it on its key is stored DONE): it reads each key's events in
// sequence order once, then, round after round, marks the next event of
// every key DONE in one autocommitted UPDATE. It claims nothing and
// delivers nothing: the ceiling of one durable write per event per key,
// batched across the keys.
func drainRawOrdered(ctx context.Context, b backend, p pool, keys int) (run, error) {
	seq := "seq"
	if b.family == "sqlite" {
		seq = "rowid"
	}
	var queues [][]any
	for k := range keys {
		ids, err := p.query(ctx, b.rebind("SELECT event_id FROM "+fwTable+" WHERE ordering_key = ? ORDER BY "+seq), fmt.Sprint("k", k))
		if err != nil {
			return run{}, err
		}
		queues = append(queues, ids)
	}
	start := time.Now()
	for round := 0; ; round++ {
		ids := []any{b.timeArg(time.Now())}
		for _, q := range queues {
			if round < len(q) {
				ids = append(ids, q[round])
			}
		}
		if len(ids) == 1 {
			break
		}
		if _, err := p.exec(ctx, b.in("UPDATE "+fwTable+" SET status = 1, done_at = ? WHERE status IN (0, 2) AND event_id", len(ids)-1), ids...); err != nil {
			return run{}, err
		}
	}
	return drained(ctx, p, fwTable, time.Since(start))
}

// drained is the run of a drain of table that took elapsed: the rows it
// left DONE.
func drained(ctx context.Context, p pool, table string, elapsed time.Duration) (run, error) {
	done, err := countStatus(ctx, p, table, int(outbox.StatusDone))
	if err != nil {
		return run{}, err
	}
	return run{n: done, elapsed: elapsed}, nil
}

// retryDeadlock runs step again, up to 10 runs in all, while InnoDB ends it
// with a deadlock (the statement or transaction was rolled back and changed
// nothing). Large claims by concurrent connections deadlock now and then on
// MariaDB; the store runs such a claim again too, and after its third
// deadlock leaves the rows to the next poll, which this loop does not have.
func retryDeadlock(step func() error) error {
	for attempt := 1; ; attempt++ {
		err := step()
		var me *mysql.MySQLError
		if err == nil || attempt == 10 || !errors.As(err, &me) || me.Number != 1213 { // ER_LOCK_DEADLOCK
			return err
		}
	}
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
