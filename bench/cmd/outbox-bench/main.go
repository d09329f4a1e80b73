// Command outbox-bench measures the outbox framework against raw SQL on the
// same database, driver, table shape, indexes, transaction boundaries and
// connection count, in one run, and prints one line per scenario:
//
//	BENCH db=… scenario=… n=… rate=…/s baseline=…/s ratio=… p50=… p99=… rss_mb=…
//
// Backends: SQLite, PostgreSQL through database/sql with pgx's stdlib
// driver (pgx) and with lib/pq (pq), PostgreSQL through a native pgxpool
// (pgx-native: the framework through outboxpgx, the baselines through pgx
// itself), and MariaDB. Scenarios, each on every selected backend:
//
//   - write-cN: N writers, one transaction per event: Client.Write of a
//     Client in ModeWriterOnly against a plain INSERT of the same row into
//     an identical table.
//   - write-batch-cN: the same with -batch events per transaction against a
//     raw multi-row INSERT.
//   - e2e-hot: -e2e-writers writers through the hot path of a Client in
//     ModeFull (after-commit handoff, listener, batched DONE): the rate of
//     rows that reach DONE, and the commit → listener latency, against the
//     same job written by hand (raw-deliver: the raw INSERT, the committed
//     ids handed over in process, batched UPDATE … DONE; see e2eRaw).
//   - drain: -drain-rows pending rows drained by a Client in ModePollerOnly
//     with a no-op listener against a raw claim+mark-DONE loop with the same
//     number of connections. Each side runs in a fresh child process of this
//     binary, so rss_mb is that side's own peak (VmHWM).
//   - e2e-hot-ordered and drain-ordered-kK: the same through an ordered
//     Client (Config.Ordered) against the unordered framework itself, not
//     raw SQL: see ordered.go.
//   - e2e-hot-observed: e2e-hot through a Client with Prometheus metrics
//     and OpenTelemetry tracing against the same Client plain: see
//     observed.go.
//   - e2e-cross: commit → listener latency from a writer-only Client to a
//     poller-only Client on another pool, -cross-rate events a second,
//     with wake-ups against without: see cross.go.
//   - idle-wake (not run by default): the CPU that 8 idle Clients
//     listening for wake-ups cost the database, against the same without.
//   - pinned-horizon (not in the default list; make bench-long): a
//     sustained write + delivery load on PostgreSQL, with and without a
//     transaction pinning the horizon, on the plain and the partitioned
//     table: see pinned.go.
//
// For the other scenarios rss_mb is the peak RSS of the main process so far
// (VmHWM cannot be reset). Every ratio is the median of pairs of runs, one
// of each side back to back, alternating which goes first: -pairs of them
// for the timed scenarios, -drain-pairs for the drains (see pairs.go).
//
//	go run ./cmd/outbox-bench -db all -duration 3s -md ../docs/benchmarks.md
package main

import (
	"bufio"
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/sqlstore"
)

type options struct {
	dbs, scenarios           string
	duration                 time.Duration
	pairs, drainPairs        int
	writers                  []int
	batch, e2eWriters, pool  int
	drainRows, drainConns    int
	drainBatch               int
	drainSweep               []drainShape
	drainSweepRows           int
	drainInterval            time.Duration
	drainRowsMySQL           int
	orderedKeys              []int
	drainRowsFewKeys         int
	orderedRun               int
	orderedKeysNow           int // the key count of the drain-ordered child being spawned
	ackBatch, workers        int
	crossRate                int
	coldQueue                int
	ackInterval              time.Duration
	pinnedDuration           time.Duration
	pinnedRate               int
	pinnedRetention          time.Duration
	pinnedPartition          time.Duration
	pinnedRuns               string
	pinnedVacuum             time.Duration
	short                    bool
	pgDSN, myDSN, sqlitePath string
	md                       string
	cpuProfile, memProfile   string
	child                    string
}

// serverDSN is the DSN of d's test server (OUTBOX_TEST_*_DSN, else the
// local default).
func serverDSN(d sqlstore.Dialect) string {
	dsn, _ := outboxsqltest.ServerDSN(d)
	return dsn
}

func main() {
	var o options
	var writers string
	flag.StringVar(&o.dbs, "db", "all", "backends: comma-separated sqlite, postgres (pgx, pgx-native and pq), pgx, pgx-native, pq, mysql, all")
	flag.StringVar(&o.scenarios, "scenario", "write,write-batch,e2e-hot,e2e-hot-observed,e2e-cross,drain,e2e-hot-ordered,drain-ordered", "scenarios to run, comma-separated")
	flag.DurationVar(&o.duration, "duration", 3*time.Second, "length of each timed write, write-batch and e2e-hot run")
	flag.IntVar(&o.pairs, "pairs", 5, "pairs of runs (one per side) of write, write-batch, e2e-hot and e2e-hot-ordered; the median pair is reported")
	flag.IntVar(&o.drainPairs, "drain-pairs", 2, "pairs of drains (one per side) of the drain scenario; the median pair (the lower of two) is reported")
	flag.StringVar(&writers, "writers", "1,16", "concurrent writers of the write and write-batch scenarios")
	flag.IntVar(&o.batch, "batch", 100, "events per transaction in write-batch")
	flag.IntVar(&o.e2eWriters, "e2e-writers", 16, "concurrent writers of e2e-hot")
	flag.IntVar(&o.crossRate, "cross-rate", 1000, "events a second (one per transaction) of e2e-cross")
	flag.IntVar(&o.pool, "pool", 20, "connection pool size of write, write-batch and e2e-hot (both sides)")
	flag.IntVar(&o.drainRows, "drain-rows", 1_000_000, "pending rows of the drain scenario")
	flag.IntVar(&o.drainRowsMySQL, "drain-rows-mysql", 0, "pending rows of the drain scenario on MySQL/MariaDB (0: -drain-rows)")
	var orderedKeys string
	flag.StringVar(&orderedKeys, "ordered-keys", "10000,10", "ordering keys of the drain-ordered scenario, one drain each")
	flag.IntVar(&o.drainRowsFewKeys, "drain-rows-few-keys", 50_000, "pending rows of drain-ordered with fewer than 1000 keys (their events go out one at a time per key)")
	flag.IntVar(&o.drainConns, "drain-conns", 0, "connections of the drain scenario, both sides (0: those of the best raw shape of -drain-sweep)")
	flag.IntVar(&o.drainBatch, "drain-batch", 0, "rows per claim of the framework's drain (0: the default PollBatchSize)")
	var sweep string
	flag.StringVar(&sweep, "drain-sweep", "500x2,1000x4,2000x2,2000x4,4000x4", "claim-size x connections shapes of the raw drain loop, tried on -drain-sweep-rows; the fastest is the baseline")
	flag.IntVar(&o.drainSweepRows, "drain-sweep-rows", 200_000, "pending rows each shape of -drain-sweep drains")
	flag.DurationVar(&o.drainInterval, "drain-poll-interval", time.Second, "the framework's poll interval in the drain scenario (idle wait)")
	flag.IntVar(&o.workers, "dispatch-workers", 0, "the framework's delivery workers, Config.Workers (0: the default)")
	flag.IntVar(&o.coldQueue, "cold-queue", 0, "the framework's ColdQueueSize (0: the default)")
	flag.IntVar(&o.ackBatch, "ack-batch", 0, "the framework's AckBatchSize (0: the default)")
	flag.DurationVar(&o.ackInterval, "ack-interval", 0, "the framework's AckInterval (0: the default)")
	flag.DurationVar(&o.pinnedDuration, "pinned-duration", 10*time.Minute, "length of each of the four runs of pinned-horizon")
	flag.IntVar(&o.pinnedRate, "pinned-rate", 2000, "events written (and delivered) per second in pinned-horizon")
	flag.DurationVar(&o.pinnedRetention, "pinned-retention", time.Minute, "the Retention of DONE events in pinned-horizon")
	flag.DurationVar(&o.pinnedPartition, "pinned-partition", 20*time.Second, "the partition interval of pinned-horizon's partitioned runs")
	flag.DurationVar(&o.pinnedVacuum, "pinned-vacuum", time.Minute, "pinned-horizon runs VACUUM on its table this often (0: never; for a server with autovacuum off)")
	flag.StringVar(&o.pinnedRuns, "pinned-runs", "default,default+pin,partitioned,partitioned+pin", "the runs of pinned-horizon, comma-separated")
	flag.IntVar(&o.orderedRun, "ordered-run", 0, "the ordered Client's OrderedRun in drain-ordered and e2e-hot-ordered (0: the default; 1: one event per key at a time)")
	flag.BoolVar(&o.short, "short", false, "CI sizes: -duration 300ms -pairs 1 -drain-pairs 1 -drain-rows 50000 unless set, and e2e-cross without its poll-only baseline")
	flag.StringVar(&o.pgDSN, "postgres-dsn", serverDSN(sqlstore.PostgreSQL), "PostgreSQL DSN")
	flag.StringVar(&o.myDSN, "mysql-dsn", serverDSN(sqlstore.MySQL), "MySQL/MariaDB DSN")
	flag.StringVar(&o.sqlitePath, "sqlite-path", filepath.Join(os.TempDir(), "outbox-bench", "bench.db"), "SQLite database file (recreated)")
	flag.StringVar(&o.md, "md", "", "write the results into this Markdown file (between its result markers)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run here (drain children add .drain-<side>)")
	flag.StringVar(&o.memProfile, "memprofile", "", "write an allocation profile at the end of the run here")
	flag.StringVar(&o.child, "child", "", "internal: run one side of the drain scenario (framework or raw)")
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.short {
		if !set["duration"] {
			o.duration = 300 * time.Millisecond
		}
		if !set["pairs"] {
			o.pairs = 1
		}
		if !set["drain-pairs"] {
			o.drainPairs = 1
		}
		if !set["drain-rows"] {
			o.drainRows = 50_000
		}
		if !set["drain-rows-few-keys"] {
			o.drainRowsFewKeys = 5_000
		}
	}
	for _, f := range strings.Split(sweep, ",") {
		var sh drainShape
		if _, err := fmt.Sscanf(strings.TrimSpace(f), "%dx%d", &sh.batch, &sh.conns); err != nil || sh.batch < 1 || sh.conns < 1 {
			fatalf("bad -drain-sweep shape %q: want <claim size>x<connections>", f)
		}
		o.drainSweep = append(o.drainSweep, sh)
	}
	if o.short && !set["drain-sweep-rows"] {
		o.drainSweepRows = 20_000
	}
	for _, s := range strings.Split(orderedKeys, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fatalf("bad -ordered-keys %q", orderedKeys)
		}
		o.orderedKeys = append(o.orderedKeys, n)
	}
	for _, s := range strings.Split(writers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fatalf("bad -writers %q", writers)
		}
		o.writers = append(o.writers, n)
	}
	if err := runAll(context.Background(), o); err != nil {
		fatalf("%v", err)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "outbox-bench: "+format+"\n", args...)
	os.Exit(1)
}

func runAll(ctx context.Context, o options) error {
	stop, err := startProfiles(o)
	if err != nil {
		return err
	}
	defer stop()
	bs, err := backends(o.dbs, o.pgDSN, o.myDSN, o.sqlitePath)
	if err != nil {
		return err
	}
	if o.child != "" {
		if len(bs) != 1 {
			return fmt.Errorf("-child needs exactly one -db")
		}
		return drainChild(ctx, bs[0], o, o.child)
	}
	rep := &report{opts: o, started: time.Now(), loadStart: loadAvg(), args: os.Args[1:]}
	want := map[string]bool{}
	for _, s := range strings.Split(o.scenarios, ",") {
		want[strings.TrimSpace(s)] = true
	}
	for _, b := range bs {
		if err := runBackend(ctx, o, b, want, rep); err != nil {
			return fmt.Errorf("%s: %w", b.name, err)
		}
	}
	rep.elapsed = time.Since(rep.started)
	rep.loadEnd = loadAvg()
	if o.md != "" {
		if err := rep.writeMarkdown(o.md); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "outbox-bench: wrote %s\n", o.md)
	}
	return nil
}

// runBackend runs the selected scenarios on one backend.
func runBackend(ctx context.Context, o options, b backend, want map[string]bool, rep *report) error {
	if err := b.resetSQLite(); err != nil {
		return err
	}
	p, err := b.open(ctx, o.pool)
	if err != nil {
		return err
	}
	defer p.close()
	rep.versions = append(rep.versions, b.name+": "+b.version(ctx, p))
	store, err := b.setup(ctx, p)
	if err != nil {
		return err
	}
	e := &env{b: b, cfg: o.clientConfig(), p: p, store: store, txm: p.txManager(), log: discardLogger(os.Stderr)}
	// paired runs -pairs pairs of the framework against its raw sides and
	// records the median pair.
	paired := func(name string, conc int, raws []string, side func(side string) (run, error)) error {
		return rep.addPairs(b.name, name, conc, o.pairs, "framework", raws, "", side)
	}
	if want["write"] {
		for _, w := range o.writers {
			if err := paired(fmt.Sprintf("write-c%d", w), w, e.rawSides(1), func(side string) (run, error) {
				return e.writeSide(ctx, side, w, 1, o.duration)
			}); err != nil {
				return err
			}
		}
	}
	if want["write-batch"] {
		for _, w := range o.writers {
			if err := paired(fmt.Sprintf("write-batch-c%d", w), w, e.rawSides(o.batch), func(side string) (run, error) {
				return e.writeSide(ctx, side, w, o.batch, o.duration)
			}); err != nil {
				return err
			}
		}
	}
	if want["e2e-hot"] {
		if err := paired(fmt.Sprintf("e2e-hot-c%d", o.e2eWriters), o.e2eWriters, []string{"raw-deliver"}, func(side string) (run, error) {
			if side != "framework" {
				return e.e2eRaw(ctx, o.e2eWriters, o.duration, cmp.Or(o.ackBatch, outbox.DefaultAckBatchSize))
			}
			return e.e2eFramework(ctx, o.e2eWriters, o.duration, variant{})
		}); err != nil {
			return err
		}
	}
	if want["e2e-hot-ordered"] {
		if err := e.e2eOrdered(ctx, o, rep); err != nil {
			return err
		}
	}
	if want["e2e-hot-observed"] {
		if err := e.e2eObserved(ctx, o, rep); err != nil {
			return err
		}
	}
	if want["e2e-cross"] {
		if err := e.cross(ctx, o, rep); err != nil {
			return err
		}
	}
	if want["idle-wake"] {
		if err := e.idle(ctx, o, rep); err != nil {
			return err
		}
	}
	if want["drain"] {
		if err := e.drain(ctx, o, rep); err != nil {
			return err
		}
	}
	if want["drain-ordered"] {
		if err := e.drainOrdered(ctx, o, rep); err != nil {
			return err
		}
	}
	if want["pinned-horizon"] {
		if err := e.pinnedHorizon(ctx, o); err != nil {
			return err
		}
	}
	// Leave the tables empty: the servers are shared.
	for _, t := range []string{rawTable, fwTable} {
		_ = b.truncate(ctx, p, t)
	}
	return nil
}

// drainShape is how a raw drain loop runs: rows per claim, connections.
type drainShape struct{ batch, conns int }

func (s drainShape) String() string { return fmt.Sprintf("%dx%d", s.batch, s.conns) }

// drain runs the drain scenario: each shape of the sweep drains the raw
// table once at the sweep's size; the fastest is the baseline, run at the
// full size, and the framework (default configuration, as many
// connections) drains the same backlog.
func (e *env) drain(ctx context.Context, o options, rep *report) error {
	b, p := e.b, e.p
	rows := o.drainRows
	if b.family == "mysql" && o.drainRowsMySQL > 0 {
		rows = o.drainRowsMySQL
	}
	load := func(table string, n int) error {
		for _, t := range []string{rawTable, fwTable} {
			if err := b.truncate(ctx, p, t); err != nil {
				return err
			}
		}
		if err := b.bulkLoad(ctx, p, table, n); err != nil {
			return fmt.Errorf("drain: bulk load: %w", err)
		}
		if err := b.analyze(ctx, p, table); err != nil {
			return fmt.Errorf("drain: analyze: %w", err)
		}
		return nil
	}
	best, bestRate := drainShape{batch: 100, conns: max(o.drainConns, 1)}, 0.0
	if len(o.drainSweep) > 1 {
		for _, sh := range o.drainSweep {
			if err := load(rawTable, o.drainSweepRows); err != nil {
				return err
			}
			r, err := spawnDrain(ctx, o, b, "raw", o.drainSweepRows, sh)
			if err != nil {
				return fmt.Errorf("drain sweep %s: %w", sh, err)
			}
			rate := r.rate()
			fmt.Printf("BENCH db=%s scenario=drain-sweep shape=%s rows=%d rows_per_s=%.0f\n", b.name, sh, o.drainSweepRows, rate)
			if rate > bestRate {
				best, bestRate = sh, rate
			}
		}
	} else if len(o.drainSweep) == 1 {
		best = o.drainSweep[0]
	}
	if o.drainConns > 0 {
		best.conns = o.drainConns
	}
	// -drain-pairs pairs of drains, each after a fresh load.
	res, err := measurePairs(o.drainPairs, "framework", []string{"raw"}, func(side string) (run, error) {
		table := rawTable
		if side == "framework" {
			table = fwTable
		}
		if err := load(table, rows); err != nil {
			return run{}, err
		}
		r, err := spawnDrain(ctx, o, b, side, rows, best)
		if err != nil {
			return run{}, err
		}
		if r.n != int64(rows) {
			r.note = fmt.Sprintf("done=%d/%d", r.n, rows)
		}
		return r, nil
	})
	if err != nil {
		return fmt.Errorf("drain %w", err)
	}
	res.raw.addNote("claim=" + best.String())
	res.db, res.scenario, res.conc, res.rssKB, res.rawRSSKB = b.name, "drain", best.conns, res.fw.rssKB, res.raw.rssKB
	rep.add(res)
	return nil
}

// spawnDrain runs one drain side in a fresh child process and parses its
// DRAIN line.
func spawnDrain(ctx context.Context, o options, b backend, side string, rows int, sh drainShape) (run, error) {
	self, err := os.Executable()
	if err != nil {
		return run{}, err
	}
	batch := o.drainBatch
	if side == "raw" {
		batch = sh.batch
	}
	args := []string{"-child", side, "-db", b.key, "-postgres-dsn", o.pgDSN, "-mysql-dsn", o.myDSN, "-sqlite-path", o.sqlitePath,
		"-drain-rows", strconv.Itoa(rows), "-drain-conns", strconv.Itoa(sh.conns), "-drain-batch", strconv.Itoa(batch), "-drain-poll-interval", o.drainInterval.String(),
		"-dispatch-workers", strconv.Itoa(o.workers), "-ack-batch", strconv.Itoa(o.ackBatch), "-cold-queue", strconv.Itoa(o.coldQueue), "-ack-interval", o.ackInterval.String(), "-ordered-run", strconv.Itoa(o.orderedRun)}
	if o.orderedKeysNow > 0 {
		args = append(args, "-ordered-keys", strconv.Itoa(o.orderedKeysNow))
	}
	if o.cpuProfile != "" {
		args = append(args, "-cpuprofile", o.cpuProfile+".drain-"+side+"."+b.key)
	}
	if o.memProfile != "" {
		args = append(args, "-memprofile", o.memProfile+".drain-"+side+"."+b.key)
	}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stderr = os.Stderr
	server, procs := serverCPU()
	out, err := cmd.Output()
	if err != nil {
		return run{}, err
	}
	// The child's backends exit after it: wait until they have (and their
	// times count in the parent's), for up to 2 s.
	end, left := serverCPU()
	for i := 0; left > procs && i < 40; i++ {
		time.Sleep(50 * time.Millisecond)
		end, left = serverCPU()
	}
	client := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var n, ns, rss int64
		if _, err := fmt.Sscanf(sc.Text(), "DRAIN n=%d ns=%d rss_kb=%d", &n, &ns, &rss); err == nil {
			return run{n: n, elapsed: time.Duration(ns), rssKB: rss, client: client, server: end - server}, nil
		}
	}
	return run{}, fmt.Errorf("no DRAIN line in the child's output: %q", out)
}

// startProfiles starts the CPU profile and returns what writes both
// profiles at the end.
func startProfiles(o options) (func(), error) {
	var cpu *os.File
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		cpu = f
	}
	return func() {
		if cpu != nil {
			pprof.StopCPUProfile()
			cpu.Close()
		}
		if o.memProfile != "" {
			f, err := os.Create(o.memProfile)
			if err != nil {
				fmt.Fprintln(os.Stderr, "outbox-bench: memprofile:", err)
				return
			}
			runtime.GC()
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				fmt.Fprintln(os.Stderr, "outbox-bench: memprofile:", err)
			}
			f.Close()
		}
	}, nil
}

// serverCPU returns the CPU time (user and system) that the database
// servers running on this machine have used so far: every process named
// postgres, mariadbd or mysqld that this user may read, with its children
// that have exited, and how many such processes there are. A drain side's
// difference tells the database's share of the work apart from the
// client's; it is zero for SQLite, which runs in the client.
func serverCPU() (time.Duration, int) {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	procs := 0
	for _, path := range dirs {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		stat := string(b)
		open, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
		if open < 0 || end < open {
			continue
		}
		switch stat[open+1 : end] { // the command name, in parentheses
		case "postgres", "mariadbd", "mysqld":
		default:
			continue
		}
		f := strings.Fields(stat[end+1:])
		if len(f) < 15 {
			continue
		}
		// utime, stime, cutime, cstime: fields 14 to 17 of stat. The
		// children's times count the backends that have exited (the
		// postmaster waits for them); a live one counts its own.
		procs++
		for _, v := range f[11:15] {
			n, _ := strconv.ParseInt(v, 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks, procs
}

// processCPU returns the CPU time (user and system) this process has used
// so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuSince starts measuring a run's CPU: the function it returns sets r's
// client CPU (this process) and server CPU (the local database servers)
// to what they have used since.
func cpuSince() func(r *run) {
	client := processCPU()
	server, _ := serverCPU()
	return func(r *run) {
		s, _ := serverCPU()
		r.client, r.server = processCPU()-client, s-server
	}
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times on Linux.
const clockTicks = 100

// peakRSSKB returns VmHWM (peak resident set size) of this process in KiB.
func peakRSSKB() int64 {
	return procField("/proc/self/status", "VmHWM:")
}

// procField returns the first number after prefix in a /proc file, or 0.
func procField(path, prefix string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

// loadAvg returns the 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// clientConfig returns the tuning the framework's Clients run with. They
// do not purge: the baselines do not either.
func (o options) clientConfig() outbox.Config {
	return outbox.Config{Workers: o.workers, ColdQueueSize: o.coldQueue, AckBatchSize: o.ackBatch, AckInterval: o.ackInterval, OrderedRun: o.orderedRun, DisablePurge: true}
}
