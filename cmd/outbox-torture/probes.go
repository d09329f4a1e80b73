package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
)

// Two probe events per run, written by the coordinator, each with its own
// business row:
//
//   - the hung event, written before the workers start, whose listener
//     blocks forever, ignoring its context, the first time it is delivered
//     (the one delivery that records the hang in hangTable) and succeeds
//     after that. Another claim must deliver it after the lease;
//   - the poison event, written once the hung event hangs, whose listener
//     ends its process with os.Exit at once every time it is delivered. It
//     must end DEAD with maxAttempts attempts after at most maxAttempts+1
//     deliveries started (a delivery taken over counts its attempt when it
//     starts; the first start of the fresh event counts only if it fails),
//     with ErrClaimExpired's text as its last error.
//
// Writing the poison event only then keeps the two out of one claim: rows
// taken over together are delivered side by side, and what runs beside a
// process-killing listener dies with it.
const (
	// maxAttempts is the workers' MaxAttempts.
	maxAttempts = 5
	// poisonExitCode is the exit status of a worker that delivered the poison event.
	poisonExitCode = 3
	// probeWorker is the worker column of the probes' business rows: no
	// worker counts them in its quota.
	probeWorker = -1
	// hangWait bounds the wait for the hung event's first delivery.
	hangWait = 30 * time.Second
)

// probeCount returns the number of probe events of the run.
func (c config) probeCount() int {
	n := 0
	for _, on := range []bool{c.poison, c.hung} {
		if on {
			n++
		}
	}
	return n
}

// probes writes the probe events with a writer-only Client.
type probes struct {
	c            config
	db           *sql.DB
	tx           *outboxsql.TxManager
	client       *outbox.Client
	poison, hung outbox.Envelope
}

// newProbes makes the probe events (not written yet) and the Client that writes them.
func newProbes(ctx context.Context, c config, db *sql.DB) (*probes, error) {
	store, err := outboxsql.Open(db, outboxsql.WithTable(outboxTable))
	if err != nil {
		return nil, err
	}
	p := &probes{c: c, db: db, tx: outboxsql.NewTxManager(db)}
	p.client, err = outbox.New(outbox.Config{Store: store, TxContext: p.tx, Mode: outbox.ModeWriterOnly, Ordered: c.ordered})
	if err != nil {
		return nil, err
	}
	if err := p.client.Start(ctx); err != nil {
		return nil, err
	}
	probe := func(kind, aggregate string) outbox.Envelope {
		return outbox.MustEnvelope(orderPlaced, outbox.WithAggregate(orderAgg, aggregate),
			outbox.WithJSON([]byte(`{"torture":true,"probe":"`+kind+`"}`)))
	}
	// With -ordered the poison event is ordered, on an aggregate of its
	// own: it ends DEAD and blocks nothing else.
	p.poison, p.hung = probe("poison", "poison"), probe("hung", "")
	return p, nil
}

// write commits e with its business row, retrying through cut connections.
func (p *probes) write(ctx context.Context, e outbox.Envelope) error {
	insertOrder := bind(p.c.db, "INSERT INTO "+ordersTable+" (id, worker) VALUES (?, ?)")
	var err error
	for range 50 {
		err = p.tx.InTx(ctx, func(ctx context.Context) error {
			sqlTx, _ := p.tx.Tx(ctx)
			if _, err := sqlTx.ExecContext(ctx, insertOrder, e.ID(), probeWorker); err != nil {
				return err
			}
			_, err := p.client.Write(ctx, e)
			return err
		})
		if err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("write probe event %s: %w", e.ID(), err)
}

// awaitHang waits until a delivery of the hung event hangs, at most hangWait.
func (p *probes) awaitHang(ctx context.Context) bool {
	q := bind(p.c.db, "SELECT COUNT(*) FROM "+hangTable+" WHERE event_id = ?")
	for deadline := time.Now().Add(hangWait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var n int
		if err := p.db.QueryRowContext(ctx, q, p.hung.ID()).Scan(&n); err == nil && n > 0 {
			return true
		}
	}
	return false
}

func (p *probes) close(ctx context.Context) error { return p.client.Close(ctx) }

// firstHang reports whether this delivery of the hung event is the first
// one, by recording the hang in hangTable: only one insert succeeds.
func firstHang(ctx context.Context, c config, db *sql.DB, id string) (bool, error) {
	insert := bind(c.db, "INSERT INTO "+hangTable+" (event_id, worker, pid) VALUES (?, ?, ?)")
	_, err := db.ExecContext(ctx, insert, id, c.workerID, os.Getpid())
	if err == nil {
		return true, nil
	}
	// Most likely the key exists: a delivery hung already. Anything else
	// (a cut connection) fails this delivery, to be retried.
	var n int
	if qerr := db.QueryRowContext(ctx, bind(c.db, "SELECT COUNT(*) FROM "+hangTable+" WHERE event_id = ?"), id).Scan(&n); qerr != nil {
		return false, fmt.Errorf("record the hang: %w (and look it up: %w)", err, qerr)
	}
	if n == 0 {
		return false, fmt.Errorf("record the hang: %w", err)
	}
	return false, nil
}

// probeResults checks how the probe events of the run ended (0 for a probe
// the run does not write).
//
// poisonDead: DEAD with maxAttempts attempts and ErrClaimExpired's text as
// last error, after at least one and at most maxAttempts+1 deliveries
// started (poisonExits).
//
// hungRecovered: one delivery hung, and a later one delivered the event (a
// ledger entry; with -relay, an application) and marked it DONE.
func (co *coordinator) probeResults(ctx context.Context, poisonExits int) (poisonDead, hungRecovered int) {
	store, err := outboxsql.Open(co.db, outboxsql.WithTable(outboxTable))
	if err != nil {
		fmt.Fprintln(os.Stderr, "torture: probes:", err)
		return 0, 0
	}
	get := func(id string) (outbox.Record, bool) {
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		r, err := store.Get(gctx, id)
		if err != nil {
			fmt.Fprintf(os.Stderr, "torture: probe %s: %v\n", id, err)
			return r, false
		}
		return r, true
	}
	if co.c.poison {
		if r, ok := get(co.c.poisonID); ok {
			if r.Status == outbox.StatusDead && r.Attempts == maxAttempts &&
				strings.Contains(r.LastError, outbox.ErrClaimExpired.Error()) && poisonExits >= 1 && poisonExits <= maxAttempts+1 {
				poisonDead = 1
			} else {
				fmt.Fprintf(os.Stderr, "torture: poison event %s: status=%s attempts=%d poison_exits=%d last_error=%q\n",
					r.ID, r.Status, r.Attempts, poisonExits, r.LastError)
			}
		}
	}
	if co.c.hung {
		if r, ok := get(co.c.hungID); ok {
			hangs, delivered := co.countFor(ctx, hangTable, r.ID), co.countFor(ctx, co.c.deliveries(), r.ID)
			if r.Status == outbox.StatusDone && hangs == 1 && delivered >= 1 {
				hungRecovered = 1
			} else {
				fmt.Fprintf(os.Stderr, "torture: hung event %s: status=%s attempts=%d hangs=%d deliveries=%d last_error=%q\n",
					r.ID, r.Status, r.Attempts, hangs, delivered, r.LastError)
			}
		}
	}
	return poisonDead, hungRecovered
}

// countFor counts the rows of table for event id (-1 on error).
func (co *coordinator) countFor(ctx context.Context, table, id string) int {
	var n int
	if err := co.db.QueryRowContext(ctx, bind(co.c.db, "SELECT COUNT(*) FROM "+table+" WHERE event_id = ?"), id).Scan(&n); err != nil {
		fmt.Fprintf(os.Stderr, "torture: %s for %s: %v\n", table, id, err)
		return -1
	}
	return n
}
