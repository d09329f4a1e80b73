// Command demo shows the outbox end to end on an embedded SQLite file, with
// no server: business writes and their events commit together, events are
// delivered right after commit (hot path) or by the poller (delayed and
// retried ones), a rolled-back transaction leaves nothing behind, and an
// event its listener can never accept (outbox.Permanent) ends in DEAD at
// once, without retries.
//
//	go run . -db /tmp/demo.db
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	_ "modernc.org/sqlite"
)

// The application's own typed names.
type orderEvent string

func (e orderEvent) Name() string { return string(e) }

const (
	orderPlaced      orderEvent = "OrderPlaced"
	paymentCaptured  orderEvent = "PaymentCaptured"
	reminderDue      orderEvent = "ReminderDue"
	invoiceIssued    orderEvent = "InvoiceIssued"
	ordersAggregate             = outbox.AggregateName("Order")
	settleTimeoutDef            = 15 * time.Second
)

func main() {
	dbPath := flag.String("db", filepath.Join(os.TempDir(), "outbox-demo.db"), "SQLite database file (recreated)")
	verbose := flag.Bool("v", false, "log the framework's debug output")
	flag.Parse()
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if err := run(context.Background(), *dbPath, logger); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type tally struct {
	written, rolledBack, delivered atomic.Int64
	mu                             sync.Mutex
	seen                           map[string]int
}

func (t *tally) deliver(e outbox.Envelope, what string) {
	t.mu.Lock()
	t.seen[e.ID()]++
	t.mu.Unlock()
	t.delivered.Add(1)
	fmt.Printf("  delivered %-16s %s %s\n", e.Type(), e.AggregateID(), what)
}

func run(ctx context.Context, path string, logger *slog.Logger) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(path + suffix)
	}
	db, err := sql.Open("sqlite", outboxsql.SQLiteDSN(path))
	if err != nil {
		return err
	}
	defer db.Close()

	store, err := outboxsql.Open(db)
	if err != nil {
		return err
	}
	if err := store.Migrate(ctx); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)`); err != nil {
		return err
	}
	tx := outboxsql.NewTxManager(db)
	fmt.Println("outbox demo on", path)

	// One Client writes events in our transactions and delivers them: right
	// after commit, and through its poller for delayed and retried ones.
	client, err := outbox.New(outbox.Config{
		Store: store, TxContext: tx, Logger: logger,
		PollInterval: 100 * time.Millisecond,
		RetryPolicy:  &outbox.ExponentialBackoff{Base: 100 * time.Millisecond, Max: time.Second},
	})
	if err != nil {
		return err
	}

	t := &tally{seen: map[string]int{}}
	var paymentCalls atomic.Int32
	must(client.Handle(orderPlaced, func(ctx context.Context, e outbox.Envelope) error {
		t.deliver(e, string(e.PayloadString()))
		return nil
	}))
	must(client.Handle(paymentCaptured, func(ctx context.Context, e outbox.Envelope) error {
		if paymentCalls.Add(1) == 1 {
			fmt.Printf("  failed    %-16s %s (payment gateway timeout, will retry)\n", e.Type(), e.AggregateID())
			return errors.New("payment gateway timeout")
		}
		t.deliver(e, "on retry")
		return nil
	}))
	must(client.Handle(reminderDue, func(ctx context.Context, e outbox.Envelope) error {
		t.deliver(e, "after its delay")
		return nil
	}))
	must(client.Handle(invoiceIssued, func(ctx context.Context, e outbox.Envelope) error {
		fmt.Printf("  refused   %-16s %s (no retry can mend it: DEAD at once)\n", e.Type(), e.AggregateID())
		return outbox.Permanent(errors.New("invoice has no tax id"))
	}))
	must(client.Start(ctx))

	// placeOrder inserts the order and its events in one transaction.
	placeOrder := func(id string, amount int, fail bool, extra ...outbox.Envelope) error {
		placed := outbox.MustEnvelope(orderPlaced, outbox.WithAggregate(ordersAggregate, id),
			outbox.WithJSONValue(map[string]any{"order": id, "amount": amount}))
		events := append([]outbox.Envelope{placed}, extra...)
		err := tx.InTx(ctx, func(ctx context.Context) error {
			sqlTx, _ := tx.Tx(ctx)
			if _, err := sqlTx.ExecContext(ctx, `INSERT INTO orders (id, amount) VALUES (?, ?)`, id, amount); err != nil {
				return err
			}
			if _, err := client.Write(ctx, events...); err != nil {
				return err
			}
			if fail {
				return errors.New("card declined")
			}
			return nil
		})
		if fail {
			t.rolledBack.Add(int64(len(events)))
			fmt.Printf("rolled back order %s (%v): its %d event(s) were never written\n", id, err, len(events))
			return nil
		}
		if err == nil {
			t.written.Add(int64(len(events)))
			fmt.Printf("committed order %s with %d event(s)\n", id, len(events))
		}
		return err
	}

	for i := 1; i <= 5; i++ {
		must(placeOrder(fmt.Sprintf("o-%d", i), i*100, false))
	}
	must(placeOrder("o-6", 600, true))
	must(placeOrder("o-7", 700, true))
	must(placeOrder("o-8", 800, false, outbox.MustEnvelope(paymentCaptured, outbox.WithAggregate(ordersAggregate, "o-8"), outbox.WithJSON([]byte(`{"captured":800}`)))))
	must(placeOrder("o-9", 900, false, outbox.MustEnvelope(reminderDue, outbox.WithAggregate(ordersAggregate, "o-9"),
		outbox.WithJSON([]byte(`{}`)), outbox.WithAvailableAt(time.Now().Add(500*time.Millisecond)))))
	must(placeOrder("o-10", 1000, false, outbox.MustEnvelope(invoiceIssued, outbox.WithAggregate(ordersAggregate, "o-10"), outbox.WithJSON([]byte(`{}`)))))

	// Wait until nothing is pending.
	deadline := time.Now().Add(settleTimeoutDef)
	for {
		stats, err := client.Stats(ctx)
		if err != nil {
			return err
		}
		n := stats.ByStatus[outbox.StatusNew] + stats.ByStatus[outbox.StatusRetry]
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d events still pending after %s", n, settleTimeoutDef)
		}
		time.Sleep(20 * time.Millisecond)
	}
	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	must(client.Close(closeCtx))

	dead, err := client.Dead().List(ctx, outbox.Query{})
	if err != nil {
		return err
	}
	for _, r := range dead {
		fmt.Printf("  dead      %-16s %s: %s\n", r.Envelope.Type(), r.Envelope.AggregateID(), r.LastError)
	}
	stats, err := client.Stats(ctx)
	if err != nil {
		return err
	}
	done := stats.ByStatus[outbox.StatusDone]
	var orders int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM orders`).Scan(&orders); err != nil {
		return err
	}
	duplicates := t.delivered.Load() - int64(len(t.seen))
	fmt.Printf("written=%d delivered=%d dead=%d rolled_back=%d duplicates=%d done_rows=%d orders=%d\n",
		t.written.Load(), t.delivered.Load(), len(dead), t.rolledBack.Load(), duplicates, done, orders)
	if int64(len(t.seen))+int64(len(dead)) != t.written.Load() || done != int64(len(t.seen)) || orders != 8 {
		return errors.New("inconsistent outcome: every committed event must be delivered or dead")
	}
	return nil
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
