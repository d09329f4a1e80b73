package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/sqlstore"
)

// The pinned-horizon scenario (PostgreSQL through database/sql and pgx):
// a sustained write + delivery load while, in two of its four runs,
// another session holds a REPEATABLE READ transaction open after taking
// its snapshot, so that vacuum can reclaim no row version made since.
// Each run has a table of its own:
//
//   - default: the plain table, its retention deleting rows;
//   - default+pin: the same with the pin;
//   - partitioned: a table made WithPartitions(-pinned-partition), its
//     retention dropping partitions;
//   - partitioned+pin: the same with the pin.
//
// A writer-only Client writes -pinned-rate events per second (transactions
// of pinnedBatch events, paced) and a poller-only Client (PollInterval
// pinnedPoll) delivers them to a listener that counts, purging with
// Retention -pinned-retention every pinnedPurge: the delivery is the
// poller path's, claims from the table. Each run reports the events
// delivered per second, the p99 of the store's claims in the first and
// in the last window (a minute, or a fifth of a shorter run) and its
// growth, and at the end (the pin still held) the table's dead tuples
// (n_dead_tup, summed over its partitions) and its size with indexes.
// Every -pinned-vacuum the table is vacuumed, as autovacuum would at most
// (on a server where it is off).

// Settings of the pinned-horizon runs that are not flags.
const (
	pinnedBatch   = 10                     // events per write transaction
	pinnedWriters = 4                      // writer goroutines
	pinnedPoll    = 100 * time.Millisecond // the poller's PollInterval
	pinnedPurge   = 10 * time.Second       // the PurgeInterval
)

// pinnedCase is one run of the scenario.
type pinnedCase struct {
	name        string
	partitioned bool
	pinned      bool
}

// pinnedResult is what one run measured.
type pinnedResult struct {
	pinnedCase
	written, delivered int64
	elapsed            time.Duration
	p99First, p99Last  time.Duration
	claims             int
	deadTuples, bytes  int64
	load               string
	otherXminAge       int64 // the oldest snapshot of another session at the end, in transactions (0: none)
}

func (r pinnedResult) rate() float64 { return float64(r.delivered) / r.elapsed.Seconds() }

func (r pinnedResult) growth() float64 {
	if r.p99First <= 0 {
		return 0
	}
	return float64(r.p99Last) / float64(r.p99First)
}

// timedStore times the claims of the store it wraps.
type timedStore struct {
	*sqlstore.Store
	start time.Time
	mu    sync.Mutex
	at    []time.Duration // when each claim started, since start
	lat   []time.Duration
}

// Claim claims through the wrapped store and records how long it took.
func (s *timedStore) Claim(ctx context.Context, req outbox.ClaimRequest) ([]outbox.Record, error) {
	t0 := time.Now()
	recs, err := s.Store.Claim(ctx, req)
	d := time.Since(t0)
	s.mu.Lock()
	s.at, s.lat = append(s.at, t0.Sub(s.start)), append(s.lat, d)
	s.mu.Unlock()
	return recs, err
}

// p99 returns the p99 of the claims that started in [from, to), and how many.
func (s *timedStore) p99(from, to time.Duration) (time.Duration, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var lats []time.Duration
	for i, at := range s.at {
		if at >= from && at < to {
			lats = append(lats, s.lat[i])
		}
	}
	slices.Sort(lats)
	return percentile(lats, 0.99), len(lats)
}

// pinnedHorizon runs the four runs on a PostgreSQL database/sql backend
// and prints a BENCH line per run and the Markdown table.
func (e *env) pinnedHorizon(ctx context.Context, o options) error {
	sp, ok := e.p.(*sqlPool)
	if !ok || e.b.family != "postgres" {
		fmt.Fprintf(os.Stderr, "outbox-bench: pinned-horizon runs on PostgreSQL through database/sql only (-db pgx or pq), not %s\n", e.b.name)
		return nil
	}
	var results []pinnedResult
	for _, c := range []pinnedCase{{"default", false, false}, {"default+pin", false, true}, {"partitioned", true, false}, {"partitioned+pin", true, true}} {
		if !slices.Contains(strings.Split(o.pinnedRuns, ","), c.name) {
			continue
		}
		r, err := e.pinnedRun(ctx, sp, o, c)
		if err != nil {
			return fmt.Errorf("pinned-horizon %s: %w", c.name, err)
		}
		fmt.Printf("BENCH db=%s scenario=pinned-horizon run=%s duration=%s written=%d delivered=%d rate=%.0f/s claim_p99_first=%s claim_p99_last=%s growth=%.2f claims=%d dead_tuples=%d size_mb=%.1f load=%q other_xmin_age=%d\n",
			e.b.name, c.name, r.elapsed.Round(time.Second), r.written, r.delivered, r.rate(), fmtDur(r.p99First, true), fmtDur(r.p99Last, true),
			r.growth(), r.claims, r.deadTuples, float64(r.bytes)/(1<<20), r.load, r.otherXminAge)
		results = append(results, r)
	}
	fmt.Print(pinnedMarkdown(results))
	return nil
}

// pinnedMarkdown returns the table of docs/benchmarks.md's "Pinned
// horizon" section, with each pinned run's throughput against the run
// without the pin.
func pinnedMarkdown(rs []pinnedResult) string {
	var b strings.Builder
	b.WriteString("| storage | pin | delivered/s | vs no pin | claim p99 first → last | growth | dead tuples | size (MB) |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|\n")
	base := map[bool]float64{}
	for _, r := range rs {
		if !r.pinned {
			base[r.partitioned] = r.rate()
		}
	}
	for _, r := range rs {
		storage, pin, vs := "default", "no", "—"
		if r.partitioned {
			storage = "partitioned"
		}
		if r.pinned {
			pin = "yes"
			if b := base[r.partitioned]; b > 0 {
				vs = fmt.Sprintf("%.2f×", r.rate()/b)
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s → %s | %.2f× | %d | %.1f |\n", storage, pin, r.rate(), vs,
			fmtDur(r.p99First, true), fmtDur(r.p99Last, true), r.growth(), r.deadTuples, float64(r.bytes)/(1<<20))
	}
	return b.String()
}

// pinnedRun runs one case on a table of its own, dropped at the end.
func (e *env) pinnedRun(ctx context.Context, sp *sqlPool, o options, c pinnedCase) (pinnedResult, error) {
	res := pinnedResult{pinnedCase: c, load: loadAvg()}
	table := "bench_pin_" + strings.ReplaceAll(strings.ReplaceAll(c.name, "+", "_"), "-", "_")
	if _, err := sp.exec(ctx, "DROP TABLE IF EXISTS "+table); err != nil {
		return res, err
	}
	opts := []outboxsql.Option{outboxsql.WithTable(table)}
	if c.partitioned {
		opts = append(opts, outboxsql.WithPartitions(o.pinnedPartition))
	}
	store, err := outboxsql.Open(sp.db, opts...)
	if err != nil {
		return res, err
	}
	defer func() {
		for _, t := range append([]string{table}, store.ControlTables()...) {
			_, _ = sp.exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+t)
		}
	}()
	if err := store.Migrate(ctx); err != nil {
		return res, err
	}
	pinPID := int64(0)
	if c.pinned {
		release, pid, err := pin(ctx, sp.db)
		if err != nil {
			return res, err
		}
		defer release()
		pinPID = pid
	}
	timed := &timedStore{Store: store, start: time.Now()}
	var delivered atomic.Int64
	cfg := e.cfg
	cfg.Store, cfg.TxContext, cfg.Logger = timed, e.txm, e.log
	cfg.Mode, cfg.PollInterval, cfg.DisablePurge = outbox.ModePollerOnly, pinnedPoll, false
	cfg.Retention, cfg.PurgeInterval = o.pinnedRetention, pinnedPurge
	poller, err := outbox.New(cfg)
	if err != nil {
		return res, err
	}
	if err := poller.Handle(outbox.EventName(eventType), func(context.Context, outbox.Envelope) error {
		delivered.Add(1)
		return nil
	}); err != nil {
		return res, err
	}
	wcfg := e.cfg
	wcfg.Store, wcfg.TxContext, wcfg.Logger, wcfg.Mode = store, e.txm, e.log, outbox.ModeWriterOnly
	writer, err := outbox.New(wcfg)
	if err != nil {
		return res, err
	}
	if err := writer.Start(ctx); err != nil {
		return res, err
	}
	defer func() { _ = writer.Close(context.WithoutCancel(ctx)) }()
	timed.start = time.Now()
	if err := poller.Start(ctx); err != nil {
		return res, err
	}
	defer func() { _ = poller.Close(context.WithoutCancel(ctx)) }()
	// Paced writers: batch k of writer w is due at start + (k*writers+w)
	// × the time a batch takes at the rate; a writer behind writes at once.
	start := time.Now()
	every := time.Duration(float64(time.Second) * pinnedBatch / float64(o.pinnedRate))
	write := e.fwWrite(writer, pinnedBatch, nil)
	var written atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, pinnedWriters)
	for w := range pinnedWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				due := start.Add(time.Duration(k*pinnedWriters+w) * every)
				if !due.Before(start.Add(o.pinnedDuration)) {
					return
				}
				time.Sleep(time.Until(due))
				if err := write(ctx, w, k); err != nil {
					errs <- err
					return
				}
				written.Add(pinnedBatch)
			}
		}()
	}
	stopVacuum := vacuumEvery(ctx, sp, table, o.pinnedVacuum)
	wg.Wait()
	stopVacuum()
	res.elapsed = time.Since(start)
	res.delivered, res.written = delivered.Load(), written.Load()
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	window := min(time.Minute, o.pinnedDuration/5)
	var n1, n2 int
	res.p99First, n1 = timed.p99(0, window)
	res.p99Last, n2 = timed.p99(o.pinnedDuration-window, o.pinnedDuration)
	res.claims = n1 + n2
	if err := poller.Close(ctx); err != nil {
		return res, err
	}
	// The statistics reach pg_stat_user_tables within a second or so.
	time.Sleep(2 * time.Second)
	// The table and its partitions (pg_partition_tree lists no plain table).
	tree := "SELECT relid FROM pg_partition_tree(CAST($1 AS regclass)) UNION SELECT CAST($1 AS regclass)"
	vals, err := sp.query(ctx, "SELECT COALESCE(SUM(n_dead_tup), 0) FROM pg_stat_user_tables WHERE relid IN ("+tree+")", table)
	if err == nil {
		res.deadTuples = toInt64(vals)
		vals, err = sp.query(ctx, "SELECT COALESCE(SUM(pg_total_relation_size(relid)), 0) FROM ("+tree+") t", table)
		res.bytes = toInt64(vals)
	}
	if err == nil {
		vals, err = sp.query(ctx, "SELECT COALESCE(MAX(age(backend_xmin)), 0) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND pid <> $1", pinPID)
		res.otherXminAge = toInt64(vals)
	}
	return res, err
}

// vacuumEvery runs VACUUM on table every d (never when d is 0) until the
// function it returns is called, which waits for a running VACUUM: what
// autovacuum would do at most, on a server where it is off.
func vacuumEvery(ctx context.Context, sp *sqlPool, table string, d time.Duration) func() {
	if d <= 0 {
		return func() {}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if _, err := sp.exec(ctx, "VACUUM "+table); err != nil {
					fmt.Fprintf(os.Stderr, "outbox-bench: VACUUM %s: %v\n", table, err)
				}
			}
		}
	}()
	return func() { close(stop); <-done }
}

// pin opens a REPEATABLE READ transaction on a connection of its own and
// takes its snapshot (reading no outbox table), and returns what ends it
// and the process id of its session.
func pin(ctx context.Context, db *sql.DB) (func(), int64, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, 0, err
	}
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		_ = conn.Close()
		return nil, 0, err
	}
	var pid int64
	if err := tx.QueryRowContext(ctx, "SELECT pg_backend_pid() FROM pg_class LIMIT 1").Scan(&pid); err != nil {
		_ = tx.Rollback()
		_ = conn.Close()
		return nil, 0, err
	}
	return func() { _ = tx.Rollback(); _ = conn.Close() }, pid, nil
}

// toInt64 returns the first value of a query's column as an int64.
func toInt64(vals []any) int64 {
	if len(vals) == 0 {
		return 0
	}
	var n int64
	_, _ = fmt.Sscan(fmt.Sprint(vals[0]), &n)
	return n
}
