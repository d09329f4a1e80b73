package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

type workerProc struct {
	id      int
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
}

type coordinator struct {
	c  config
	db *sql.DB
	// out receives the TORTURE line.
	out     io.Writer
	mu      sync.Mutex
	procs   []*workerProc
	kills   int
	cuts    int
	crashes int
	// poisonExits counts workers that ended themselves delivering the
	// poison event.
	poisonExits int
	// skipped holds the DEAD events the operator skipped (-ordered).
	skipped map[string]bool
	// With a fault of the database: when its crash began (zero before),
	// and how long it accepted no writes.
	crashedAt time.Time
	outage    time.Duration
	// brokerFaults counts the faults of the broker of -relay.
	brokerFaults int
	// broker is the broker of -relay, nil without.
	broker brokerServer
}

func runCoordinator(c config) error {
	// Interrupted, the run stops its workers and removes what it made.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	if c.db == "sqlite" {
		for _, s := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(c.dsn + s)
		}
	}
	var srv dbServer
	if fault := c.dbFault(); fault != "" {
		var err error
		if srv, err = startServer(ctx, c); err != nil {
			return fmt.Errorf("%s: %w", fault, err)
		}
		defer srv.remove()
		c.dsn, c.ownDB, c.journal = srv.writeDSN(), "", filepath.Join(srv.tempDir(), "journal")
		if err := os.Mkdir(c.journal, 0o755); err != nil {
			return err
		}
	}
	c, err := isolate(c)
	if err != nil {
		return fmt.Errorf("own database: %w", err)
	}
	db, err := open(c)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := createTables(ctx, c, db); err != nil {
		return err
	}
	var broker brokerServer
	if c.relay != "" {
		if broker, err = startBroker(ctx, &c); err != nil {
			return err
		}
		defer closeBroker(broker)
	}
	var pr *probes
	if c.poison || c.hung {
		if c.events < c.probeCount() {
			return fmt.Errorf("-events must be at least %d", c.probeCount())
		}
		if pr, err = newProbes(ctx, c, db); err != nil {
			return fmt.Errorf("probe events: %w", err)
		}
		defer pr.close(ctx)
		if c.poison {
			c.poisonID = pr.poison.ID()
		}
		if c.hung {
			c.hungID = pr.hung.ID()
			if err := pr.write(ctx, pr.hung); err != nil {
				return err
			}
		}
	}
	c.ownDB = "" // workers get the rewritten DSN
	co := &coordinator{c: c, db: db, out: os.Stdout, broker: broker}
	for i := range c.workers {
		if err := co.spawn(i, co.quota(i)); err != nil {
			co.stopAll()
			return err
		}
	}
	if pr != nil {
		if c.hung && !pr.awaitHang(ctx) {
			fmt.Fprintf(os.Stderr, "torture: the hung event did not hang within %s\n", hangWait)
		}
		if c.poison {
			if err := pr.write(ctx, pr.poison); err != nil {
				co.stopAll()
				return err
			}
		}
		if err := pr.close(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "torture: probe writer:", err)
		}
	}
	fmt.Fprintf(os.Stderr, "torture: db=%s workers=%d events=%d ordered=%v fault=%s relay=%s, worker logs in %s\n", c.db, c.workers, c.events, c.ordered, c.dbFault(), c.relay, filepath.Dir(co.procs[0].logPath))
	var op *operator
	if c.ordered {
		if op, err = startOperator(ctx, c, db); err != nil {
			co.stopAll()
			return fmt.Errorf("operator: %w", err)
		}
	}

	// Fault schedule while the writers write.
	kill := ticker(c.killEvery)
	cut := ticker(c.cutEvery)
	if c.db == "sqlite" {
		cut = nil
	}
	// The broker's first fault comes once a third of the events are
	// committed, looked for often enough to land mid-load in a short run;
	// the next ones every -broker-fault-every.
	var brokerFault <-chan time.Time
	firstFault := max(c.events/3, 1)
	if broker != nil && c.brokerFaultEvery > 0 {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		brokerFault = t.C
	}
	check := time.NewTicker(250 * time.Millisecond)
	defer check.Stop()
	// The crash of the database comes once crashAt events are
	// acknowledged, looked for often enough to land mid-load in a short run.
	var crashCheck <-chan time.Time
	crashAt := c.events * c.crashAtPct / 100
	if srv != nil {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		crashCheck = t.C
	}
	for written := 0; written < c.events; {
		select {
		case <-kill:
			co.killOne()
		case <-cut:
			co.cutConnections(ctx)
		case <-brokerFault:
			if firstFault > 0 {
				if written = co.written(ctx, written); written < firstFault {
					continue
				}
				firstFault, brokerFault = 0, ticker(c.brokerFaultEvery)
			}
			if err := co.brokerFault(ctx, broker); err != nil {
				co.stopAll()
				if ctx.Err() != nil {
					return fmt.Errorf("interrupted: %w", ctx.Err())
				}
				return err
			}
		case <-check.C:
			co.restartCrashed()
			written = co.written(ctx, written)
		case <-ctx.Done():
			co.stopAll()
			return fmt.Errorf("interrupted: %w", ctx.Err())
		case <-crashCheck:
			if written = co.written(ctx, written); written < crashAt {
				continue
			}
			crashCheck = nil
			fmt.Fprintf(os.Stderr, "torture: %d events acknowledged: %s\n", written, c.dbFault())
			co.crashedAt = time.Now()
			if co.outage, err = srv.crash(ctx); err != nil {
				co.stopAll()
				return fmt.Errorf("%s: %w", c.dbFault(), err)
			}
		}
	}
	// Drain: wait until nothing is pending (with -relay: and every
	// committed event is applied or DEAD), restarting crashed workers.
	deadline := time.Now().Add(c.drainTimeout)
	for {
		var pending, unapplied int
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+outboxTable+" WHERE status IN (0, 2)").Scan(&pending)
		if err == nil && c.relay != "" {
			err = db.QueryRowContext(ctx, c.unfinishedQuery()).Scan(&unapplied)
		}
		if err == nil && pending == 0 && unapplied == 0 {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "torture: %d events still pending, %d not applied after %s\n", pending, unapplied, c.drainTimeout)
			break
		}
		if ctx.Err() != nil {
			co.stopAll()
			return fmt.Errorf("interrupted: %w", ctx.Err())
		}
		co.restartCrashed()
		time.Sleep(200 * time.Millisecond)
	}
	co.stopAll()
	if op != nil {
		co.skipped = op.close(ctx)
	}
	return co.report(ctx, time.Since(start))
}

// written counts the committed events: the acknowledged commits in the
// journals with a fault of the database, else the business rows. On error
// it reports the error and returns last.
func (co *coordinator) written(ctx context.Context, last int) int {
	if co.c.journal != "" {
		t, err := readJournals(co.c.journal)
		if err != nil {
			fmt.Fprintln(os.Stderr, "torture: read the journals:", err)
			return last
		}
		return t.ackedN
	}
	n := last
	if err := co.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+ordersTable).Scan(&n); err != nil {
		fmt.Fprintln(os.Stderr, "torture: count orders:", err)
	}
	return n
}

func ticker(d time.Duration) <-chan time.Time {
	if d <= 0 {
		return nil
	}
	return time.NewTicker(d).C
}

func (co *coordinator) spawn(id, quota int) error {
	c := co.c
	logPath := filepath.Join(os.TempDir(), fmt.Sprintf("outbox-torture-%s-worker-%d.log", c.db, id))
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	args := []string{"-role", "worker", "-worker-id", strconv.Itoa(id), "-quota", strconv.Itoa(quota),
		"-db", c.db, "-dsn", c.dsn, "-own-db", "", "-writers", strconv.Itoa(c.writers), "-lease", c.lease.String(),
		"-fail-pct", strconv.Itoa(c.failPct), "-panic-pct", strconv.Itoa(c.panicPct),
		"-poison-permille", strconv.Itoa(c.poisonPermille), "-slow-permille", strconv.Itoa(c.slowPermille),
		"-rollback-pct", strconv.Itoa(c.rollbackPct), "-poison-id", c.poisonID, "-hung-id", c.hungID,
		"-ordered=" + strconv.FormatBool(c.ordered), "-keys", strconv.Itoa(c.keys), "-ordered-run", strconv.Itoa(c.run), "-journal", c.journal}
	args = append(append(args, skewArgs(c, id)...), relayArgs(c)...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	dieWithHarness(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start worker %d: %w", id, err)
	}
	p := &workerProc{id: id, cmd: cmd, exited: make(chan struct{}), logPath: logPath}
	go func() { _ = cmd.Wait(); logf.Close(); close(p.exited) }()
	co.mu.Lock()
	defer co.mu.Unlock()
	if id < len(co.procs) {
		co.procs[id] = p
	} else {
		co.procs = append(co.procs, p)
	}
	return nil
}

// quota returns how many events worker id commits: the workers share
// what the probes leave.
func (co *coordinator) quota(id int) int {
	n := co.c.events - co.c.probeCount()
	q := n / co.c.workers
	if id < n%co.c.workers {
		q++
	}
	return q
}

// killOne sends SIGKILL to a random worker and starts it again. A worker
// that had exited on its own meanwhile is counted as such, not as a kill.
func (co *coordinator) killOne() {
	co.mu.Lock()
	p := co.procs[rand.IntN(len(co.procs))]
	co.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	if co.countExit(p, true) {
		fmt.Fprintf(os.Stderr, "torture: worker %d exited (%v) before the kill, restarting; see %s\n", p.id, p.cmd.ProcessState, p.logPath)
	}
	if err := co.spawn(p.id, co.quota(p.id)); err != nil {
		fmt.Fprintln(os.Stderr, "torture: restart:", err)
	}
}

// countExit counts the end of worker p: a kill (if killed and it died of a
// signal), a poison exit or a crash. It reports whether p ended on its own.
func (co *coordinator) countExit(p *workerProc, killed bool) (own bool) {
	code := p.cmd.ProcessState.ExitCode() // -1: killed by a signal
	co.mu.Lock()
	defer co.mu.Unlock()
	switch {
	case code == poisonExitCode:
		co.poisonExits++
	case killed && code == -1:
		co.kills++
		return false
	default:
		co.crashes++
	}
	return true
}

// restartCrashed starts again any worker that exited on its own.
func (co *coordinator) restartCrashed() {
	co.mu.Lock()
	var dead []*workerProc
	for _, p := range co.procs {
		select {
		case <-p.exited:
			dead = append(dead, p)
		default:
		}
	}
	co.mu.Unlock()
	for _, p := range dead {
		co.countExit(p, false)
		fmt.Fprintf(os.Stderr, "torture: worker %d exited (%v), restarting; see %s\n", p.id, p.cmd.ProcessState, p.logPath)
		if err := co.spawn(p.id, co.quota(p.id)); err != nil {
			fmt.Fprintln(os.Stderr, "torture: restart:", err)
		}
	}
}

// cutConnections terminates every other session on the database server,
// as a failover or network cut would.
func (co *coordinator) cutConnections(ctx context.Context) {
	var q string
	switch co.c.db {
	case "postgres":
		q = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
		if _, err := co.db.ExecContext(ctx, q); err != nil {
			fmt.Fprintln(os.Stderr, "torture: cut connections:", err)
			return
		}
	case "mysql":
		rows, err := co.db.QueryContext(ctx, "SELECT id FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID()")
		if err != nil {
			fmt.Fprintln(os.Stderr, "torture: list connections:", err)
			return
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if rows.Scan(&id) == nil {
				ids = append(ids, id)
			}
		}
		rows.Close()
		for _, id := range ids {
			_, _ = co.db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10))
		}
	}
	co.mu.Lock()
	co.cuts++
	co.mu.Unlock()
}

func (co *coordinator) stopAll() {
	co.mu.Lock()
	procs := append([]*workerProc(nil), co.procs...)
	co.mu.Unlock()
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
}

func (co *coordinator) report(ctx context.Context, took time.Duration) error {
	one := func(q string) int {
		var n sql.NullInt64
		if err := co.db.QueryRowContext(ctx, q).Scan(&n); err != nil {
			fmt.Fprintf(os.Stderr, "torture: %s: %v\n", q, err)
			return -1
		}
		return int(n.Int64)
	}
	var b books
	if co.c.journal != "" {
		b = co.journalBooks(ctx)
	} else {
		ledger := co.c.deliveries()
		b = books{
			events:     one("SELECT COUNT(*) FROM " + ordersTable),
			delivered:  one("SELECT COUNT(DISTINCT event_id) FROM " + ledger),
			deliveries: one("SELECT COUNT(*) FROM " + ledger),
			lost:       one(co.c.unfinishedQuery()),
			ghost:      one("SELECT COUNT(DISTINCT l.event_id) FROM " + ledger + " l WHERE NOT EXISTS (SELECT 1 FROM " + ordersTable + " o WHERE o.id = l.event_id)"),
			maxPer:     one("SELECT MAX(c) FROM (SELECT COUNT(*) AS c FROM " + ledger + " GROUP BY event_id) t"),
		}
		b.written = b.events
	}
	events, delivered, deliveries, lost, ghost, maxPer := b.events, b.delivered, b.deliveries, b.lost, b.ghost, b.maxPer
	dead := one("SELECT COUNT(*) FROM " + outboxTable + " WHERE status = 3")
	missing := one("SELECT COUNT(*) FROM " + ordersTable + " o WHERE NOT EXISTS (SELECT 1 FROM " + outboxTable + " x WHERE x.event_id = o.id)")
	orphanRows := one("SELECT COUNT(*) FROM " + outboxTable + " x WHERE NOT EXISTS (SELECT 1 FROM " + ordersTable + " o WHERE o.id = x.event_id)")
	co.mu.Lock()
	kills, cuts, crashes, poisonExits := co.kills, co.cuts, co.crashes, co.poisonExits
	co.mu.Unlock()
	poisonDead, hungRecovered := co.probeResults(ctx, poisonExits)
	unexpectedDead := co.unexpectedDead(ctx)
	duplicates := deliveries - delivered
	// Duplicates per process death: SIGKILLs, poison exits and crashes,
	// the database's own included.
	deaths := kills + poisonExits + crashes
	if !co.crashedAt.IsZero() {
		deaths++
	}
	dupPerKill := float64(duplicates) / float64(max(deaths, 1))
	ordered, violations := "", 0
	if co.c.ordered {
		violations = co.orderViolations(ctx)
		run := co.c.run
		if run == 0 {
			run = outbox.DefaultOrderedRun
		}
		ordered = fmt.Sprintf(" ordered=1 keys=%d run=%d order_violations=%d skipped=%d", co.c.keys, run, violations, len(co.skipped))
	}
	fault := co.c.dbFault()
	if fault != "" {
		ordered += fmt.Sprintf(" fault=%s acked=%d lost_undurable=%d delivered_then_vanished=%d outage_seconds=%.1f",
			fault, b.written, b.lostUndurable, b.vanished, co.outage.Seconds())
	}
	skewLine, skewErr := co.skewReport(ctx)
	relayLine, relayErr := co.relayReport(ctx, one)
	ordered += skewLine + relayLine
	fmt.Fprintf(co.out, "TORTURE db=%s events=%d delivered=%d lost=%d duplicates=%d dead=%d max_dup_per_event=%d dup_per_kill=%.1f seconds=%.1f"+
		" kills=%d cuts=%d crashes=%d poison_exits=%d poison_dead=%d hung_recovered=%d unexpected_dead=%d"+
		" rolled_back_delivered=%d rolled_back_rows=%d missing_rows=%d%s\n",
		co.c.db, events, delivered, lost, duplicates, dead, max(maxPer-1, 0), dupPerKill, took.Seconds(),
		kills, cuts, crashes, poisonExits, poisonDead, hungRecovered, unexpectedDead, ghost, orphanRows, missing, ordered)
	errs := []error{skewErr, relayErr}
	if lost != 0 || missing != 0 {
		errs = append(errs, fmt.Errorf("%d committed events lost (%d without an outbox row)", lost, missing))
	}
	if ghost != 0 || orphanRows != 0 {
		errs = append(errs, fmt.Errorf("rolled-back events leaked: %d delivered, %d rows", ghost, orphanRows))
	}
	switch {
	case unexpectedDead < 0:
		errs = append(errs, errors.New("could not count the DEAD events"))
	case unexpectedDead > 0:
		errs = append(errs, fmt.Errorf("%d events ended DEAD that neither always fail nor are the poison event", unexpectedDead))
	}
	if violations != 0 {
		errs = append(errs, fmt.Errorf("%d ordered events started before the event before them on their key was DONE", violations))
	}
	if co.c.poison && poisonDead != 1 {
		errs = append(errs, fmt.Errorf("the poison event did not end DEAD after %d attempts (at most %d deliveries started) with %q", maxAttempts, maxAttempts+1, outbox.ErrClaimExpired.Error()))
	}
	if co.c.hung && hungRecovered != 1 {
		errs = append(errs, errors.New("the hung event was not delivered by a later claim"))
	}
	if fault == faultFailoverSync && (b.lostUndurable != 0 || b.vanished != 0) {
		errs = append(errs, fmt.Errorf("with a synchronous replica, the failover took back acknowledged commits: %d undelivered, %d delivered", b.lostUndurable, b.vanished))
	}
	if fault == faultMariaDBRestart && b.ackedGone != 0 {
		errs = append(errs, fmt.Errorf("%d acknowledged commits (%d never delivered) did not survive the crash of MariaDB with innodb_flush_log_at_trx_commit=1", b.ackedGone, b.lostUndurable))
	}
	if b.written < co.c.events || b.written < 0 {
		errs = append(errs, fmt.Errorf("only %d of %d events were written", b.written, co.c.events))
	}
	return errors.Join(errs...)
}

// endedUndelivered is the condition on an outbox row x that ends it without
// a delivery: DEAD, or (with -ordered) skipped by the operator when it
// blocked its key. A committed event is lost if it neither was delivered
// nor ended so.
const endedUndelivered = "(x.status = 3 OR x.last_error LIKE '" + outbox.SkipNote + "%')"

// books are the delivery counts of the line. Without a fault of the
// database they come from the database (business rows, ledger); with one,
// from the journals, checked against what the database kept.
type books struct {
	// written counts the committed events: the business rows, or the
	// acknowledged commits in the journals; events counts the business rows.
	written, events       int
	delivered, deliveries int // distinct events, deliveries
	maxPer                int // the most deliveries of one event
	// lost: business rows neither delivered nor ended undelivered; ghost:
	// delivered events rolled back on purpose (without a journal: every
	// delivered event without a business row).
	lost, ghost int
	// lostUndurable: acknowledged commits the database no longer has,
	// never delivered; vanished: delivered events the database no longer
	// has (and never rolled back); ackedGone: acknowledged commits the
	// database no longer has, delivered or not. Journals only.
	lostUndurable, vanished, ackedGone int
}

// journalBooks counts the books from the journals and what the database
// kept: its business rows and its outbox rows that ended undelivered. -1
// in every count if it cannot tell.
func (co *coordinator) journalBooks(ctx context.Context) books {
	fail := func(err error) books {
		fmt.Fprintln(os.Stderr, "torture: books:", err)
		return books{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1}
	}
	t, err := readJournals(co.c.journal)
	if err != nil {
		return fail(err)
	}
	orders, err := co.ids(ctx, "SELECT id FROM "+ordersTable)
	if err != nil {
		return fail(err)
	}
	ended, err := co.ids(ctx, "SELECT event_id FROM "+outboxTable+" x WHERE "+endedUndelivered)
	if err != nil {
		return fail(err)
	}
	b := books{written: t.ackedN, events: len(orders), delivered: len(t.delivered)}
	for id := range orders {
		if t.delivered[id] == 0 && !ended[id] {
			b.lost++
		}
	}
	var gone []string // acknowledged commits the database no longer has
	for id := range t.acked {
		if !orders[id] {
			gone = append(gone, id)
			if t.delivered[id] == 0 {
				b.lostUndurable++
			}
		}
	}
	b.ackedGone = len(gone)
	co.reportGone(gone)
	for id, n := range t.delivered {
		b.deliveries += n
		b.maxPer = max(b.maxPer, n)
		switch {
		case t.rolledBack[id]:
			b.ghost++
		case !orders[id]:
			b.vanished++
		}
	}
	return b
}

// reportGone says on stderr when the acknowledged commits that the
// database no longer has were written, relative to the start of the crash
// (by the time in their ULIDs).
func (co *coordinator) reportGone(ids []string) {
	if len(ids) == 0 || co.crashedAt.IsZero() {
		return
	}
	first, last := time.Duration(math.MaxInt64), time.Duration(math.MinInt64)
	for _, id := range ids {
		if at, ok := outbox.ULIDTime(id); ok {
			d := at.Sub(co.crashedAt)
			first, last = min(first, d), max(last, d)
		}
	}
	fmt.Fprintf(os.Stderr, "torture: %d acknowledged commits are gone from the database, written %s to %s after the crash began\n",
		len(ids), first.Round(time.Millisecond), last.Round(time.Millisecond))
}

// ids returns the ids the query selects.
func (co *coordinator) ids(ctx context.Context, q string) (map[string]bool, error) {
	rows, err := co.db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids[id] = true
	}
	return ids, rows.Err()
}

// unexpectedDead counts DEAD events other than the poison event and the
// always-failing share: events that a delivery would have completed, sent
// to DEAD by take-overs (each counts an attempt). -1 if it cannot tell.
func (co *coordinator) unexpectedDead(ctx context.Context) int {
	rows, err := co.db.QueryContext(ctx, "SELECT event_id FROM "+outboxTable+" WHERE status = 3")
	if err != nil {
		fmt.Fprintln(os.Stderr, "torture: dead events:", err)
		return -1
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			fmt.Fprintln(os.Stderr, "torture: dead events:", err)
			return -1
		}
		if id != co.c.poisonID && fate(id) >= uint32(co.c.poisonPermille) {
			n++
		}
	}
	if err := rows.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "torture: dead events:", err)
		return -1
	}
	for id := range co.skipped { // DEAD before the operator skipped them
		if fate(id) >= uint32(co.c.poisonPermille) {
			n++
		}
	}
	return n
}
