package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
)

var (
	orderPlaced = outbox.EventName("OrderPlaced")
	orderAgg    = outbox.AggregateName("Order")
	errRollback = errors.New("business rule: roll back")
)

// drainTimeout is the workers' DrainTimeout.
const drainTimeout = 2 * time.Second

// fate decides deterministically, from the event id, how the listener treats an event.
func fate(id string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return h.Sum32() % 1000
}

func runWorker(c config) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})).With("worker", c.workerID)
	db, err := open(c)
	if err != nil {
		return err
	}
	defer db.Close()
	store, err := outboxsql.Open(db, outboxsql.WithTable(outboxTable))
	if err != nil {
		return err
	}
	tx := outboxsql.NewTxManager(db)
	pid := os.Getpid()
	sk := newSkew(c, db, pid)
	var slowOnce sync.Map
	ledgerInsert := bind(c.db, "INSERT INTO "+ledgerTable+" (event_id, worker, pid, attempt) VALUES (?, ?, ?, ?)")
	var jr *journal // with a fault of the database: the books are kept outside it
	if c.journal != "" {
		if jr, err = openJournal(c.journal, c.workerID); err != nil {
			return err
		}
		defer jr.close()
	}
	startInsert := bind(c.db, "INSERT INTO "+startsTable+" (event_id, worker, start_us) VALUES (?, ?, ?)")
	// With -relay the listener publishes to the broker and the worker
	// consumes, until ctx ends; it closes the broker's client last.
	var rw *relayWorker
	retry := outbox.RetryPolicy(&outbox.ExponentialBackoff{Base: 50 * time.Millisecond, Max: time.Second})
	if c.relay != "" {
		if rw, err = startRelayWorker(ctx, c, db, store); err != nil {
			return err
		}
		defer func() {
			if err := rw.stop(); err != nil {
				fmt.Fprintf(os.Stderr, "worker %d: close the broker's client: %v\n", c.workerID, err)
			}
		}()
		retry = relayRetry()
	}
	listener := func(ctx context.Context, e outbox.Envelope) error {
		f, attempt := fate(e.ID()), outbox.DeliveryAttempt(ctx)
		if err := sk.delivery(ctx, e); err != nil {
			return err
		}
		if c.ordered {
			// Every start is on record, so that the coordinator can tell
			// whether one came before the previous event of its key was DONE.
			if _, err := db.ExecContext(ctx, startInsert, e.ID(), c.workerID, time.Now().UnixMicro()); err != nil {
				return err
			}
		}
		poison := uint32(c.poisonPermille)
		failTo := poison + uint32(c.failPct*10)
		panicTo := failTo + uint32(c.panicPct*10)
		switch {
		case e.ID() == c.poisonID:
			fmt.Fprintf(os.Stderr, "worker %d: poison event %s, delivery %d: exiting\n", c.workerID, e.ID(), attempt)
			os.Exit(poisonExitCode)
		case e.ID() == c.hungID:
			first, err := firstHang(ctx, c, db, e.ID())
			if err != nil {
				return err
			}
			if first {
				fmt.Fprintf(os.Stderr, "worker %d: hung event %s, delivery %d: blocking forever\n", c.workerID, e.ID(), attempt)
				select {} // ignores its context: only a later claim can deliver the event
			}
		case f < poison:
			return errors.New("poison event: always fails")
		case f < failTo && attempt == 1:
			return errors.New("injected failure")
		case f < panicTo && attempt == 1:
			panic("injected panic")
		case f >= 1000-uint32(c.slowPermille) && attempt == 1:
			// Only the first delivery is slow: a take-over is a later
			// attempt, and slowOnce covers a re-claim by this process after
			// the lease (the same attempt). Slow in every process, the event
			// would cost an attempt per process, as each take-over counts one.
			if _, seen := slowOnce.LoadOrStore(e.ID(), true); !seen {
				time.Sleep(2 * c.lease) // outlive the lease, ignoring ctx: another worker takes the event over
				// Its work is done late, after ListenerTimeout cancelled ctx: record it.
				ctx = context.WithoutCancel(ctx)
			}
		}
		if jr != nil {
			return jr.record(recDelivered, e.ID())
		}
		if rw != nil {
			return rw.publish(ctx, e)
		}
		_, err := db.ExecContext(ctx, ledgerInsert, e.ID(), c.workerID, pid, attempt)
		return err
	}
	// One Client per process (hot path, claiming poller and purge) with a
	// short lease, so that killed workers' events are recovered quickly.
	client, err := outbox.New(outbox.Config{
		Store: sk.store(store), TxContext: tx, Logger: logger, Lease: c.lease, ListenerTimeout: c.lease / 2,
		Clock: sk.clock(), MaxClockSkew: sk.maxClockSkew(), Owner: sk.owner(),
		Workers: 8, MaxAttempts: maxAttempts, DrainTimeout: drainTimeout, Ordered: c.ordered, OrderedRun: c.run,
		RetryPolicy:  retry,
		PollInterval: 200 * time.Millisecond, PollBatchSize: 100, MaxPollBackoff: time.Second,
	})
	if err != nil {
		return err
	}
	if err := client.Handle(orderPlaced, listener); err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}

	var committed atomic.Int64
	countSQL := bind(c.db, "SELECT COUNT(*) FROM "+ordersTable+" WHERE worker = ?")
	var n int64
	for attempt := 0; jr == nil; attempt++ { // the coordinator may be cutting connections right now
		err := db.QueryRowContext(ctx, countSQL, c.workerID).Scan(&n)
		if err == nil {
			break
		}
		if attempt == 50 {
			return fmt.Errorf("count own orders: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if jr != nil { // the database may have lost acknowledged commits: the journal has them
		acked, err := ackedIn(c.journal, c.workerID)
		if err != nil {
			return err
		}
		n = int64(acked)
	}
	committed.Store(n)
	insertOrder := bind(c.db, "INSERT INTO "+ordersTable+" (id, worker) VALUES (?, ?)")
	updateKey := bind(c.db, "UPDATE "+keysTable+" SET version = version + 1 WHERE k = ?")
	var wg sync.WaitGroup
	var seq atomic.Int64
	for range c.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && committed.Load() < int64(c.quota) {
				n := seq.Add(1)
				key := "" // one event in ten has no aggregate: unordered
				if c.ordered && n%10 != 0 {
					key = aggregateKey(rand.IntN(c.keys))
				}
				e := outbox.MustEnvelope(orderPlaced, append(sk.payload(n), outbox.WithAggregate(orderAgg, key))...)
				rollback := int(n%100) < c.rollbackPct
				err := tx.InTx(ctx, func(ctx context.Context) error {
					sqlTx, _ := tx.Tx(ctx)
					if key != "" {
						// The aggregate's row first: its transactions are
						// serialized, so its events' order is their commit order.
						if _, err := sqlTx.ExecContext(ctx, updateKey, key); err != nil {
							return err
						}
					}
					if _, err := sqlTx.ExecContext(ctx, insertOrder, e.ID(), c.workerID); err != nil {
						return err
					}
					if _, err := client.Write(ctx, e); err != nil {
						return err
					}
					if rollback {
						return errRollback
					}
					return nil
				})
				switch {
				case err == nil:
					committed.Add(1)
					jr.note(recAcked, e.ID())
				case errors.Is(err, errRollback):
					jr.note(recRolledBack, e.ID())
				default:
					time.Sleep(20 * time.Millisecond) // database trouble: try again
				}
			}
		}()
	}
	wg.Wait()
	<-ctx.Done()
	// A hung listener never returns, so Close cannot drain: it gives up when
	// closeCtx ends (plus a short grace) and the process exits with its error.
	closeCtx, cancel := context.WithTimeout(context.Background(), drainTimeout+3*time.Second)
	defer cancel()
	if err := client.Close(closeCtx); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}
