package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/inbox"
	"github.com/go-outbox/outbox/core/outboxsql"
)

// With -relay NAME the workers' listener publishes every event to a broker
// of the harness's own (relayBrokers[NAME], see relaybroker.go) through
// the broker's sink, after the same failures, panics and slow deliveries,
// instead of writing the ledger; and every worker also consumes the run's
// messages, applying each through inbox.Process (table relayInboxTable)
// into appliedTable, in one transaction with the inbox's record, on the
// run's database. appliedTable has no unique key, so that an event applied
// twice shows as two rows. The coordinator starts the broker before the
// workers, injects its fault every -broker-fault-every while the writers
// write (beside the workers' SIGKILLs and the connection cuts), waits at
// the end until every committed event is applied or DEAD, and removes the
// broker.

const (
	// appliedTable has a row per application of an event by a consumer.
	appliedTable = "torture_applied"
	// suppressedTable has a row per message the inbox found applied
	// already (a redelivery it suppressed).
	suppressedTable = "torture_suppressed"
	// relayInboxTable is the consumers' inbox.
	relayInboxTable = "torture_inbox"
)

// relayRetry is the workers' RetryPolicy with -relay. Every publish that
// fails while the broker is away counts an attempt (sinks/nats README,
// "Outages longer than the retries"), so the delays between MaxAttempts
// attempts must outlast a fault of the broker: with jitter, at least
// 3.5 s from a second failed attempt to the last.
func relayRetry() outbox.RetryPolicy {
	return &outbox.ExponentialBackoff{Base: 500 * time.Millisecond, Max: 5 * time.Second}
}

// relayFlags registers the flags of -relay.
func relayFlags(c *config) {
	flag.StringVar(&c.relay, "relay", "", "deliver through a broker of the harness's own ("+strings.Join(relayNames(), ", ")+") to consumers that apply each event through the inbox, while the broker fails")
	flag.DurationVar(&c.brokerFaultEvery, "broker-fault-every", 3*time.Second, "with -relay: inject the broker's fault this often while the writers write (0: never)")
	flag.StringVar(&c.brokerURL, "broker-url", "", "internal: the broker the workers connect to")
	flag.StringVar(&c.relayRun, "relay-run", "", "internal: the name of the run on the broker")
}

// relayNames returns the names -relay takes, sorted.
func relayNames() []string { return slices.Sorted(maps.Keys(relayBrokers)) }

// checkRelay checks the flags of -relay.
func checkRelay(c config) error {
	if c.relay == "" {
		return nil
	}
	if _, ok := relayBrokers[c.relay]; !ok {
		return fmt.Errorf("-relay: want one of %s, got %q", strings.Join(relayNames(), ", "), c.relay)
	}
	switch {
	case c.dbFault() != "":
		return errors.New("-relay does not combine with -failover, -unsafe-commit or -mariadb-restart")
	case c.ordered:
		return errors.New("-relay does not combine with -ordered")
	case c.brokerFaultEvery < 0:
		return errors.New("-broker-fault-every: want 0 or more")
	}
	return nil
}

// relayArgs are the flags of -relay that a worker gets.
func relayArgs(c config) []string {
	if c.relay == "" {
		return nil
	}
	return []string{"-relay", c.relay, "-broker-url", c.brokerURL, "-relay-run", c.relayRun}
}

// deliveries is the table with a row per delivery the books count: the
// ledger's listener deliveries, or with -relay the consumers'
// applications (an event is delivered once a consumer applied it).
func (c config) deliveries() string {
	if c.relay != "" {
		return appliedTable
	}
	return ledgerTable
}

// relayTables are the statements that drop the tables of -relay and, with
// -relay, create the applied and suppressed tables (the inbox's is
// created by migrateInbox).
func relayTables(c config) []string {
	stmts := []string{"DROP TABLE IF EXISTS " + appliedTable, "DROP TABLE IF EXISTS " + suppressedTable, "DROP TABLE IF EXISTS " + relayInboxTable}
	if c.relay == "" {
		return stmts
	}
	id := fmt.Sprintf("VARCHAR(%d) NOT NULL", inbox.MaxIDLen)
	return append(stmts,
		"CREATE TABLE "+appliedTable+" (event_id "+id+", worker INT NOT NULL, pid INT NOT NULL)",
		"CREATE INDEX "+appliedTable+"_event ON "+appliedTable+" (event_id)",
		"CREATE TABLE "+suppressedTable+" (event_id "+id+", worker INT NOT NULL)")
}

// newInbox returns the consumers' inbox on db.
func newInbox(db *sql.DB, store *outboxsql.Store) (*inbox.Inbox, *outboxsql.TxManager, error) {
	tx := outboxsql.NewTxManager(db)
	in, err := inbox.New(inbox.Config{Store: store, TxContext: tx, Table: relayInboxTable})
	return in, tx, err
}

// migrateInbox creates the consumers' inbox table, with -relay.
func migrateInbox(ctx context.Context, c config, db *sql.DB, store *outboxsql.Store) error {
	if c.relay == "" {
		return nil
	}
	in, _, err := newInbox(db, store)
	if err != nil {
		return err
	}
	return in.Migrate(ctx)
}

// newRelayRun names a run on the broker: letters, digits and '-', which
// a NATS stream, a Kafka topic and an AMQP queue all take.
func newRelayRun() string {
	return "torture-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// startBroker starts the broker of -relay for the run and points the
// workers' flags at it.
func startBroker(ctx context.Context, c *config) (brokerServer, error) {
	c.relayRun = newRelayRun()
	srv, err := relayBrokers[c.relay].start(ctx, c.relayRun)
	if err != nil {
		return nil, fmt.Errorf("-relay %s: %w", c.relay, err)
	}
	c.brokerURL = srv.url()
	return srv, nil
}

// closeBroker removes what the broker's server made, also after the run
// was interrupted.
func closeBroker(srv brokerServer) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.close(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "torture: close the broker:", err)
	}
}

// brokerFault injects the broker's fault once and counts it. An error
// means the broker did not come back: the run cannot go on without it (its
// events would go DEAD, blaming the outbox for the harness).
func (co *coordinator) brokerFault(ctx context.Context, srv brokerServer) error {
	what, err := srv.fault(ctx)
	if err != nil {
		return fmt.Errorf("broker fault: %w", err)
	}
	co.mu.Lock()
	co.brokerFaults++
	co.mu.Unlock()
	fmt.Fprintf(os.Stderr, "torture: broker fault: %s\n", what)
	return nil
}

// unfinishedQuery counts the committed events (business rows) that were
// neither delivered (a row in the deliveries table) nor ended undelivered:
// lost, once the run is over.
func (c config) unfinishedQuery() string {
	return "SELECT COUNT(*) FROM " + ordersTable + " o WHERE NOT EXISTS (SELECT 1 FROM " + c.deliveries() + " l WHERE l.event_id = o.id)" +
		" AND NOT EXISTS (SELECT 1 FROM " + outboxTable + " x WHERE x.event_id = o.id AND " + endedUndelivered + ")"
}

// ackedUnapplied selects the outbox rows x of the events the broker
// acknowledged (DONE: the sink returned nil for them) that no consumer
// applied.
var ackedUnapplied = " FROM " + outboxTable + " x WHERE x.status = " + strconv.Itoa(int(outbox.StatusDone)) +
	" AND NOT EXISTS (SELECT 1 FROM " + appliedTable + " a WHERE a.event_id = x.event_id)"

// relayReport is the part of the line of a -relay run, "" without:
// relay=… applied=… applied_twice=… suppressed=… broker_faults=…
// acked_unapplied=…; its error says what the counts break. Lost events
// the broker acknowledged are named as such, with where the broker has
// them if it can tell (brokerAuditor).
func (co *coordinator) relayReport(ctx context.Context, one func(q string) int) (string, error) {
	if co.c.relay == "" {
		return "", nil
	}
	applied := one("SELECT COUNT(DISTINCT event_id) FROM " + appliedTable)
	twice := one("SELECT COUNT(*) FROM (SELECT event_id FROM " + appliedTable + " GROUP BY event_id HAVING COUNT(*) > 1) t")
	suppressed := one("SELECT COUNT(*) FROM " + suppressedTable)
	acked := one("SELECT COUNT(*)" + ackedUnapplied)
	co.mu.Lock()
	faults := co.brokerFaults
	co.mu.Unlock()
	line := fmt.Sprintf(" relay=%s applied=%d applied_twice=%d suppressed=%d broker_faults=%d acked_unapplied=%d", co.c.relay, applied, twice, suppressed, faults, acked)
	var errs []error
	switch {
	case twice < 0 || applied < 0 || acked < 0:
		errs = append(errs, errors.New("could not count the applied events"))
	case twice > 0:
		errs = append(errs, fmt.Errorf("%d events were applied more than once through the inbox", twice))
	}
	if acked > 0 {
		errs = append(errs, co.ackedUnappliedErr(ctx, acked))
	}
	return line, errors.Join(errs...)
}

// ackedUnappliedErr describes the n events the broker acknowledged that
// were never applied: with the broker's word on where they are, if it
// has one.
func (co *coordinator) ackedUnappliedErr(ctx context.Context, n int) error {
	err := fmt.Errorf("%d events were acknowledged by the broker (their outbox rows are DONE) but never applied by a consumer", n)
	a, ok := co.broker.(brokerAuditor)
	if !ok {
		return err
	}
	ids, qerr := co.ids(ctx, "SELECT x.event_id"+ackedUnapplied)
	if qerr != nil {
		return fmt.Errorf("%w (their ids: %w)", err, qerr)
	}
	where, aerr := a.audit(ctx, ids)
	if aerr != nil {
		return fmt.Errorf("%w (the broker could not tell where they are: %w)", err, aerr)
	}
	return fmt.Errorf("%w: %s", err, where)
}

// relayWorker is a worker's side of a -relay run: the broker's client,
// whose sink the listener publishes through, and the consumer that
// applies the run's messages through the inbox.
type relayWorker struct {
	c   config
	bc  brokerClient
	in  *inbox.Inbox
	tx  *outboxsql.TxManager
	pid int
	// cancel ends the consumer's context; done is closed once consume
	// has returned.
	cancel context.CancelFunc
	done   chan struct{}
	// insertApplied and insertSuppressed are bound for the dialect.
	insertApplied, insertSuppressed string
}

// startRelayWorker connects the worker to the broker and starts consuming
// until ctx ends or stop is called.
func startRelayWorker(ctx context.Context, c config, db *sql.DB, store *outboxsql.Store) (*relayWorker, error) {
	in, tx, err := newInbox(db, store)
	if err != nil {
		return nil, err
	}
	bc, err := relayBrokers[c.relay].dial(ctx, c.brokerURL, c.relayRun, c.workerID)
	if err != nil {
		return nil, fmt.Errorf("-relay %s: %w", c.relay, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &relayWorker{c: c, bc: bc, in: in, tx: tx, pid: os.Getpid(), cancel: cancel, done: make(chan struct{}),
		insertApplied:    bind(c.db, "INSERT INTO "+appliedTable+" (event_id, worker, pid) VALUES (?, ?, ?)"),
		insertSuppressed: bind(c.db, "INSERT INTO "+suppressedTable+" (event_id, worker) VALUES (?, ?)")}
	go func() {
		defer close(r.done)
		if err := bc.consume(ctx, r.apply); err != nil {
			fmt.Fprintf(os.Stderr, "worker %d: consume: %v\n", c.workerID, err)
		}
	}()
	return r, nil
}

// publish is the listener's delivery: the broker has the event once it
// returns nil.
func (r *relayWorker) publish(ctx context.Context, e outbox.Envelope) error {
	return r.bc.sink().Handle(ctx, e)
}

// apply applies one message: in one transaction, the inbox records its id
// and, the first time, a row goes into the applied table; a redelivery
// the inbox suppresses leaves a row in the suppressed table instead. A
// message whose id the inbox cannot hold (ErrInvalidID: no event of the
// run) is reported and acknowledged, not redelivered forever.
func (r *relayWorker) apply(ctx context.Context, eventID string, _ []byte) error {
	err := r.tx.InTx(ctx, func(ctx context.Context) error {
		tx, _ := r.tx.Tx(ctx)
		dup, err := r.in.Process(ctx, eventID, func(ctx context.Context) error {
			_, err := tx.ExecContext(ctx, r.insertApplied, eventID, r.c.workerID, r.pid)
			return err
		})
		if err == nil && dup {
			_, err = tx.ExecContext(ctx, r.insertSuppressed, eventID, r.c.workerID)
		}
		return err
	})
	if errors.Is(err, inbox.ErrInvalidID) {
		fmt.Fprintf(os.Stderr, "worker %d: dropped a message with an invalid event id (%d bytes)\n", r.c.workerID, len(eventID))
		return nil
	}
	return err
}

// stop stops the consumer, waits until it has stopped and closes the
// broker's client; call it after the Client that publishes through the
// sink is closed.
func (r *relayWorker) stop() error {
	r.cancel()
	<-r.done
	return r.bc.close()
}

// consumeWorkers is how many messages a worker's consumer applies at once.
const consumeWorkers = 4

// applyPool runs apply for the messages handed to it, consumeWorkers at a
// time, until ctx ends: the brokers' consumers share it.
type applyPool struct {
	wg   sync.WaitGroup
	msgs chan func()
}

// newApplyPool starts the pool's goroutines.
func newApplyPool(ctx context.Context) *applyPool {
	p := &applyPool{msgs: make(chan func())}
	for range consumeWorkers {
		p.wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case f := <-p.msgs:
					f()
				}
			}
		})
	}
	return p
}

// run hands f to the pool and reports true, or reports false once ctx has
// ended (f does not run).
func (p *applyPool) run(ctx context.Context, f func()) bool {
	select {
	case p.msgs <- f:
		return true
	case <-ctx.Done():
		return false
	}
}

// wait waits until the pool's goroutines have ended (after ctx).
func (p *applyPool) wait() { p.wg.Wait() }

// sleep waits for d and reports true, or reports false as soon as ctx
// ends.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
