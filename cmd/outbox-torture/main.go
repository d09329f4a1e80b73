// Command outbox-torture proves that the outbox loses nothing under the
// faults production brings. It starts several worker processes of the same
// app on one database; each writes business rows with their events in one
// transaction (some rolled back on purpose) and delivers events with the
// hot path and a claiming poller with a short lease. A listener records
// every delivery in a ledger table with its own commit. Meanwhile the
// coordinator kills random workers with SIGKILL and restarts them, the
// listener fails, panics or outlives its lease for a fraction of events,
// and on PostgreSQL and MariaDB every database connection is cut from SQL.
// Two probe events are written once per run: a poison event whose listener
// ends its process with os.Exit every time it is delivered (it must end DEAD
// after MaxAttempts attempts — each counted when a taken-over delivery
// starts, so at most MaxAttempts+1 deliveries start — with ErrClaimExpired
// as last error), and a hung event whose first
// delivery blocks forever, ignoring its context (a later claim must deliver
// it). Workers that exit on their own
// are restarted like killed ones. When the writers are done and the backlog
// has drained, it prints
//
//	TORTURE db=… events=… delivered=… lost=… duplicates=… dead=… max_dup_per_event=… dup_per_kill=… seconds=…
//	        kills=… cuts=… crashes=… poison_exits=… poison_dead=… hung_recovered=… unexpected_dead=… rolled_back_delivered=… …
//
// (on one line) and exits non-zero if a committed event was lost (neither
// delivered nor DEAD), a rolled-back event was ever delivered, an event
// ended DEAD that was neither one of the always-failing share nor the
// poison event (unexpected_dead), or a probe did not end as it must
// (poison_dead=0 or hung_recovered=0).
//
// With -ordered, the workers' Clients deliver in order per key
// (outbox.Config.Ordered): nine events in ten belong to one of -keys
// aggregates, whose row each business transaction updates before it writes
// its event (so the transactions of one aggregate are serialized), and the
// poison event has an aggregate of its own. Every delivery records its
// start; an event that ends DEAD blocks its key until the coordinator,
// playing the operator, skips it through the dead-letter API (the poison
// event excepted). The line adds
//
//	ordered=1 keys=… run=… order_violations=… skipped=…
//
// where order_violations counts the events whose delivery started before
// the event written before them on their key was DONE (or while it was
// DEAD): it must be 0.
//
// With -failover sync|async or -unsafe-commit the database itself crashes
// once -crash-at-pct of the events are acknowledged. The harness initdbs a
// PostgreSQL server of its own in a temp directory, on free loopback ports
// (as the postgres user when run as root), and removes it at the end:
//
//   - -failover: a primary and a streaming replica made with
//     pg_basebackup -R; with sync every commit waits until the replica has
//     flushed it (synchronous_standby_names), with async it does not. The
//     clients connect to both hosts with target_session_attrs=read-write;
//     the primary is killed (pg_ctl stop -m immediate) and the replica
//     promoted, and the workers reconnect to it;
//   - -unsafe-commit: one server with synchronous_commit=off, killed the
//     same way and restarted through crash recovery.
//
// With -mariadb-restart (-db mariadb) the server is a MariaDB server of the
// harness's own, in a temp directory on a free loopback port, with InnoDB's
// durable defaults: mariadbd is SIGKILLed and started again on the same
// datadir and port, through InnoDB's crash recovery.
//
// A crash can take back what the database acknowledged, so these runs keep
// their books outside it, in a journal per worker (see journal): the
// commits acknowledged to the writers, the transactions rolled back on
// purpose, and every completed delivery (the listener's side effect). The
// probes and -ordered are off. The line adds
//
//	fault=… acked=… lost_undurable=… delivered_then_vanished=… outage_seconds=…
//
// where lost counts the business rows the database kept that were neither
// delivered nor DEAD (the outbox's own loss: it must be 0 in every mode);
// lost_undurable the acknowledged commits the database no longer has after
// the crash and that were never delivered (lost by the database, not by
// the outbox: nothing was left to deliver); delivered_then_vanished the
// delivered events the database no longer has (their commit was
// acknowledged, or at least visible, on the server that died, and did not
// survive it). With -failover sync both must be 0; with -mariadb-restart
// no acknowledged commit may be gone, delivered or not; with async and
// -unsafe-commit they are what the run measures. outage_seconds is the time
// from the kill until the server that takes over accepts writes.
//
// With -skew S the workers' clocks are off by -S to +S, and the line adds
// early deliveries of delayed events and stolen live claims (see skew.go).
//
// With -relay nats|amqp|kafka the events travel the whole way to a
// consumer (see relay.go). The coordinator sets up a broker of the run's
// own and removes it at the end: a nats-server with JetStream on a free
// loopback port, its file store in a temp directory, a stream whose
// duplicate window drops a re-published event and a durable pull consumer
// with explicit acknowledgements (relay_nats.go); an exchange and a queue
// of the run's own on the shared RabbitMQ, which the workers reach through
// a proxy of the coordinator's (relay_amqp.go); a kfake broker in a child
// process, its data in a temp directory, with a topic of four partitions
// consumed by one group (relay_kafka.go). The listener, after the same
// failures, panics and slow deliveries, publishes each event through the
// broker's sink instead of writing the ledger, and every worker also
// consumes the run's messages and applies each through inbox.Process, in
// one transaction with the inbox's record on the run's database, into a
// table without a unique key: an event applied twice leaves two rows.
// Once a third of the events are committed, and then every
// -broker-fault-every, the coordinator injects the broker's fault — NATS
// and kfake SIGKILLed and started again on the same port and store,
// every connection to RabbitMQ cut with new ones refused for a second —
// beside the workers' SIGKILLs and the connection cuts; a broker that
// does not come back ends the run. Every publish that fails while the
// broker is away counts an attempt, so the workers' retries wait longer
// (relayRetry), as a relay should. The drain
// waits until every committed event is applied or DEAD; delivered,
// duplicates, lost and rolled_back_delivered count applications, and the
// line adds
//
//	relay=… applied=… applied_twice=… suppressed=… broker_faults=… acked_unapplied=…
//
// where applied counts the events applied, applied_twice those applied
// more than once (it must be 0), suppressed the redeliveries the inbox
// found applied already (and left alone), broker_faults the broker's
// faults, and acked_unapplied the lost events the broker acknowledged
// (DONE: the sink returned nil) that no consumer applied; the error names
// them so, with where the broker has their messages if it can tell
// (-relay kafka: the topic read back against the group's committed
// offsets). -relay does not combine with the crashes of the database or with
// -ordered.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"
)

type config struct {
	db, dsn, ownDB string
	workers        int
	events         int
	writers        int
	killEvery      time.Duration
	cutEvery       time.Duration
	lease          time.Duration
	failPct        int
	panicPct       int
	poisonPermille int
	slowPermille   int
	rollbackPct    int
	drainTimeout   time.Duration
	role           string
	workerID       int
	quota          int
	poison, hung   bool
	poisonID       string
	hungID         string
	ordered        bool
	keys           int
	run            int
	// The faults of the database itself (see dbFault); journal is the
	// directory of the workers' journals, set with them.
	failover     string
	unsafeCommit bool
	restartMaria bool
	crashAtPct   int
	replicaLag   time.Duration
	pgBin        string
	journal      string
	// -skew (see skew.go): the workers' clock offsets.
	skew          time.Duration
	skewUnguarded bool
	clockOffset   time.Duration
	// -relay (see relay.go): the broker, how often it fails, and, for
	// the workers, where it is and the run's name on it.
	relay            string
	brokerFaultEvery time.Duration
	brokerURL        string
	relayRun         string
	// -role kfake: the broker of -relay kafka (see relay_kafka.go).
	kfakeDir  string
	kfakePort int
}

// dbFault names the fault of the database itself the run injects, or "".
func (c config) dbFault() string {
	switch {
	case c.unsafeCommit:
		return faultUnsafeCommit
	case c.restartMaria:
		return faultMariaDBRestart
	case c.failover != "":
		return "failover-" + c.failover
	}
	return ""
}

// checkDBFault checks the flags of a run with a fault of the database
// itself, which runs on a server of its own and keeps its books
// in journals: the probes and -ordered, whose checks read the database, are
// off (the runs without these faults cover them).
func checkDBFault(c *config, set map[string]bool) error {
	if c.failover != "" && c.failover != "sync" && c.failover != "async" {
		return fmt.Errorf("-failover: want sync or async, got %q", c.failover)
	}
	if c.dbFault() == "" {
		return nil
	}
	// db: the dialect's name the run needs; server, the server and its -db
	name, db, server := "-failover", "postgres", "PostgreSQL (-db postgres)"
	if c.unsafeCommit {
		name = "-unsafe-commit"
	}
	if c.restartMaria {
		name, db, server = "-mariadb-restart", "mysql", "MariaDB (-db mariadb)"
	}
	switch {
	case btoi(c.failover != "")+btoi(c.unsafeCommit)+btoi(c.restartMaria) > 1:
		return errors.New("-failover, -unsafe-commit and -mariadb-restart are runs of their own")
	case c.db != db:
		return fmt.Errorf("%s runs on %s only", name, server)
	case set["dsn"]:
		return fmt.Errorf("%s starts a server of its own: no -dsn", name)
	case c.ordered || (set["poison-exit"] && c.poison) || (set["hung-listener"] && c.hung):
		return fmt.Errorf("%s does not combine with -ordered, -poison-exit or -hung-listener", name)
	case c.crashAtPct < 1 || c.crashAtPct > 99:
		return errors.New("-crash-at-pct: want 1 to 99")
	}
	c.poison, c.hung = false, false
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func main() {
	var c config
	flag.StringVar(&c.db, "db", "sqlite", "backend: a dialect or driver name, such as sqlite, postgres or mysql (mariadb)")
	flag.StringVar(&c.dsn, "dsn", "", "data source name (default: a temp SQLite file, or OUTBOX_TEST_POSTGRES_DSN / OUTBOX_TEST_MYSQL_DSN, or the local servers)")
	flag.StringVar(&c.ownDB, "own-db", "outbox_torture", "PostgreSQL/MariaDB: create and use this database on the DSN's server, so connection cuts hit only the harness (\"\" to use the DSN's own)")
	flag.IntVar(&c.workers, "workers", 3, "worker processes")
	flag.IntVar(&c.events, "events", 20000, "committed events to write in total")
	flag.IntVar(&c.writers, "writers", 4, "writer goroutines per worker")
	flag.DurationVar(&c.killEvery, "kill-every", 2*time.Second, "SIGKILL a random worker this often (0: never)")
	flag.DurationVar(&c.cutEvery, "cut-every", 3*time.Second, "cut every database connection this often, PostgreSQL/MariaDB (0: never)")
	flag.DurationVar(&c.lease, "lease", 5*time.Second, "claim lease (short, so killed workers' events are recovered quickly)")
	flag.IntVar(&c.failPct, "fail-pct", 5, "percent of events whose first delivery fails")
	flag.IntVar(&c.panicPct, "panic-pct", 2, "percent of events whose first delivery panics")
	flag.IntVar(&c.poisonPermille, "poison-permille", 5, "per mille of events that always fail (end in DEAD)")
	flag.IntVar(&c.slowPermille, "slow-permille", 2, "per mille of events whose first delivery outlives the lease")
	flag.IntVar(&c.rollbackPct, "rollback-pct", 10, "percent of business transactions rolled back after writing their event")
	flag.BoolVar(&c.poison, "poison-exit", true, "write one event whose listener ends its process (os.Exit) at every delivery; it must end DEAD")
	flag.BoolVar(&c.hung, "hung-listener", true, "write one event whose first delivery hangs forever, ignoring its context; a later claim must deliver it")
	flag.BoolVar(&c.ordered, "ordered", false, "deliver in order per aggregate (Config.Ordered) and count order violations; DEAD events that block their key are skipped by the coordinator")
	flag.IntVar(&c.keys, "keys", 100, "with -ordered: aggregates the events belong to")
	flag.IntVar(&c.run, "ordered-run", 0, "with -ordered: the most events of one key a claim takes and one worker delivers in order (Config.OrderedRun; 0: its default)")
	flag.StringVar(&c.failover, "failover", "", "sync or async: run on a PostgreSQL primary and streaming replica of the harness's own (commits waiting for the replica with sync), kill the primary mid-load and promote the replica")
	flag.BoolVar(&c.unsafeCommit, "unsafe-commit", false, "run on a PostgreSQL server of the harness's own with synchronous_commit=off, crash it mid-load and restart it")
	flag.BoolVar(&c.restartMaria, "mariadb-restart", false, "run on a MariaDB server of the harness's own (-db mariadb), SIGKILL it mid-load and restart it")
	flag.IntVar(&c.crashAtPct, "crash-at-pct", 50, "with -failover, -unsafe-commit or -mariadb-restart: crash the database once this percentage of the events is acknowledged")
	flag.DurationVar(&c.replicaLag, "replica-lag", time.Second, "with -failover: stop the primary's WAL sender this long before the primary is killed, so that the replica lags behind (0: kill at once)")
	flag.StringVar(&c.pgBin, "pg-bin", "", "with -failover or -unsafe-commit: directory of initdb, pg_ctl and pg_basebackup (default: the newest /usr/lib/postgresql/*/bin, else PATH)")
	flag.DurationVar(&c.drainTimeout, "drain-timeout", 5*time.Minute, "how long to wait for the backlog after the writers finish (a liveness bound: the line reports the seconds taken)")
	flag.StringVar(&c.role, "role", "coordinator", "internal: coordinator, worker or kfake")
	flag.IntVar(&c.workerID, "worker-id", 0, "internal: worker number")
	flag.IntVar(&c.quota, "quota", 0, "internal: events this worker commits")
	flag.StringVar(&c.poisonID, "poison-id", "", "internal: id of the event whose listener ends its process")
	flag.StringVar(&c.hungID, "hung-id", "", "internal: id of the event whose first delivery hangs")
	flag.StringVar(&c.journal, "journal", "", "internal: directory of the workers' journals")
	flag.StringVar(&c.kfakeDir, "kfake-dir", "", "internal: data directory of the kfake broker")
	flag.IntVar(&c.kfakePort, "kfake-port", 0, "internal: loopback port of the kfake broker")
	skewFlags(&c)
	relayFlags(&c)
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	d, name, err := dialect(c.db)
	if err != nil {
		fmt.Fprintln(os.Stderr, "outbox-torture:", err)
		os.Exit(2)
	}
	c.db = name
	if c.role != "worker" {
		if err := errors.Join(checkDBFault(&c, set), checkSkew(c), checkRelay(c)); err != nil {
			fmt.Fprintln(os.Stderr, "outbox-torture:", err)
			os.Exit(2)
		}
	}
	if c.dsn == "" {
		c.dsn = defaultDSN(d)
	}
	switch c.role {
	case "worker":
		err = runWorker(c)
	case "kfake":
		err = runKfake(c.kfakeDir, c.kfakePort)
	default:
		err = runCoordinator(c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "outbox-torture:", err)
		os.Exit(1)
	}
}
