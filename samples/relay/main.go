// Command relay shows an event's whole way with at-least-once delivery and
// an exactly-once effect: an order service writes each order and its
// OrderPlaced event in one transaction (the outbox); a relay publishes the
// events to a broker — NATS JetStream, or RabbitMQ with -broker amqp; a
// consumer applies each event to its own ledger table through the inbox,
// which drops redeliveries.
//
// Redeliveries are injected so that the deduplication shows: the relay is
// stopped and restarted halfway (the orders written meanwhile wait in the
// outbox), it publishes some events a second time (as after a crash
// between the broker's acknowledgement and the outbox's DONE), and the
// consumer withholds the acknowledgement of some events it applied (as
// after a crash between its commit and its ack), so the broker delivers
// them again. It prints one line,
//
//	written=… relayed=… applied=… duplicates_suppressed=…
//
// and exits 0 only if every order was applied exactly once. Run it against
// the local brokers:
//
//	go run .                      # SQLite file in $TMPDIR, NATS on 127.0.0.1:4222
//	go run . -broker amqp         # RabbitMQ on 127.0.0.1:5672
//	go run . -db 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/inbox"
	"github.com/go-outbox/outbox/core/outboxsql"
)

// options are the command line's settings.
type options struct {
	db       string // postgres://…, mysql://…, sqlite:path or a file path
	broker   string // nats or amqp
	natsURL  string
	amqpURL  string
	orders   int
	timeout  time.Duration
	verbose  bool
	story    io.Writer // what happens, step by step
	logOut   io.Writer // the framework's logs
	runLabel string    // names the run's stream or queue; random when empty
}

func main() {
	o := options{story: os.Stderr, logOut: os.Stderr}
	flag.StringVar(&o.db, "db", filepath.Join(os.TempDir(), "outbox-relay-demo.db"),
		"database: postgres://…, mysql://…, sqlite:path or a file path (recreated)")
	flag.StringVar(&o.broker, "broker", "nats", "nats (JetStream) or amqp (RabbitMQ)")
	flag.StringVar(&o.natsURL, "nats", "nats://127.0.0.1:4222", "NATS server, with JetStream enabled")
	flag.StringVar(&o.amqpURL, "amqp", "amqp://guest:guest@127.0.0.1:5672/", "RabbitMQ broker")
	flag.IntVar(&o.orders, "orders", 200, "orders to write")
	flag.DurationVar(&o.timeout, "timeout", time.Minute, "give up if the orders are not all applied by then")
	flag.BoolVar(&o.verbose, "v", false, "log the framework's debug output (the injected failures too)")
	flag.Parse()
	sum, err := run(context.Background(), o)
	if sum.written > 0 || err == nil {
		fmt.Println(sum)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay demo:", err)
		os.Exit(1)
	}
}

// The order service's event.
var (
	orderPlaced = outbox.EventName("OrderPlaced")
	orderAgg    = outbox.AggregateName("Order")
)

// order is OrderPlaced's payload.
type order struct {
	ID          string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
}

// summary is the run's outcome, printed as one line, and the redeliveries
// it injected.
type summary struct {
	written, relayed, applied, duplicates int64
	republished, withheld                 int64
}

func (s summary) String() string {
	return fmt.Sprintf("written=%d relayed=%d applied=%d duplicates_suppressed=%d", s.written, s.relayed, s.applied, s.duplicates)
}

// counters are kept by the order service, the relay and the consumer.
type counters struct {
	written, amountCents atomic.Int64 // committed orders and their total
	relayed              atomic.Int64 // publishes the broker acknowledged
	republished          atomic.Int64 // injected: events published again
	deliveries           atomic.Int64 // messages the consumer was given
	applied, duplicates  atomic.Int64 // by the inbox
	naks                 atomic.Int64 // messages sent back to be delivered again
	settled              atomic.Int64 // messages acknowledged or sent back
	withheld             atomic.Int64 // injected: applied, but not acknowledged

	mu       sync.Mutex
	awaiting map[string]bool // withheld ids whose redelivery has not come yet
}

func (c *counters) summary() summary {
	return summary{written: c.written.Load(), relayed: c.relayed.Load(), applied: c.applied.Load(), duplicates: c.duplicates.Load(),
		republished: c.republished.Load(), withheld: c.withheld.Load()}
}

func (c *counters) await(id string, waiting bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if waiting {
		c.awaiting[id] = true
	} else {
		delete(c.awaiting, id)
	}
}

func (c *counters) awaited() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.awaiting)
}

// The event of every republishEvery-th order is published once more (its
// first attempt fails after the broker took it); every withholdEvery-th
// event the consumer applies is not acknowledged (the broker delivers it
// again).
const (
	republishEvery = 7
	withholdEvery  = 5
)

func run(ctx context.Context, o options) (summary, error) {
	c := &counters{awaiting: map[string]bool{}}
	level := slog.LevelError // the injected failures are logged as warnings
	if o.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(o.logOut, &slog.HandlerOptions{Level: level}))
	say := func(format string, args ...any) { fmt.Fprintf(o.story, format+"\n", args...) }
	label := o.runLabel
	if label == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		label = hex.EncodeToString(b)
	}

	db, where, err := openDB(o.db)
	if err != nil {
		return summary{}, err
	}
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return summary{}, fmt.Errorf("database %s: %w", where, err)
	}
	if err := createTables(ctx, db); err != nil {
		return summary{}, err
	}
	store, err := outboxsql.Open(db, outboxsql.WithTable(outboxTable))
	if err != nil {
		return summary{}, err
	}
	if err := store.Migrate(ctx); err != nil {
		return summary{}, err
	}
	txm := outboxsql.NewTxManager(db, outboxsql.WithTxLogger(logger))
	in, err := inbox.New(inbox.Config{Store: store, TxContext: txm, Table: inboxTable})
	if err != nil {
		return summary{}, err
	}
	if err := in.Migrate(ctx); err != nil {
		return summary{}, err
	}
	// The consumer forgets processed ids after a week, through the
	// outbox's purge scheduler.
	purger, err := outbox.NewPurgeScheduler(outbox.PurgeConfig{Purger: in.Purger(), Retention: 7 * 24 * time.Hour, Logger: logger})
	if err != nil {
		return summary{}, err
	}
	if err := purger.Start(ctx); err != nil {
		return summary{}, err
	}
	defer func() { _ = purger.Close(context.WithoutCancel(ctx)) }()

	var b broker
	switch o.broker {
	case "nats":
		b, err = newNATS(ctx, o.natsURL, label)
	case "amqp":
		b, err = newAMQP(o.amqpURL, label, logger)
	default:
		err = fmt.Errorf("-broker %q: want nats or amqp", o.broker)
	}
	if err != nil {
		return summary{}, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := b.close(cctx); err != nil {
			logger.Warn("relay demo: broker cleanup", "error", err)
		}
	}()
	say("relay demo: %s → %s", where, b.describe())

	k := &consumer{txm: txm, in: in, dialect: store.Dialect(), c: c, log: logger}
	if err := b.consume(ctx, func(d delivery) { k.handle(ctx, d) }); err != nil {
		return c.summary(), err
	}

	// The order service writes through a Client that only writes; the
	// relay is a Client of its own that polls the outbox and publishes.
	writer, err := outbox.New(outbox.Config{Store: store, TxContext: txm, Mode: outbox.ModeWriterOnly, Logger: logger})
	if err != nil {
		return c.summary(), err
	}
	defer func() { _ = writer.Close(context.WithoutCancel(ctx)) }()
	svc := &orderService{txm: txm, writer: writer, dialect: store.Dialect(), c: c}

	relay1, err := startRelay(ctx, store, b, c, logger)
	if err != nil {
		return c.summary(), err
	}
	half := o.orders / 2
	if err := svc.write(ctx, 0, half); err != nil {
		_ = relay1.Close(ctx)
		return c.summary(), err
	}
	say("  wrote %d orders, each with its OrderPlaced event in the same transaction; the relay publishes them", half)
	// The orders are written faster than the relay's first poll: the
	// redeploy comes once it has published some of them, not before.
	if err := waitPublishes(ctx, o.timeout, c, int64(max(1, half/2))); err != nil {
		_ = relay1.Close(ctx)
		return c.summary(), err
	}
	if err := relay1.Close(ctx); err != nil {
		return c.summary(), err
	}
	say("  relay stopped (a deploy) after %d publishes; %d more orders are written meanwhile and wait in the outbox",
		c.relayed.Load(), o.orders-half)
	if err := svc.write(ctx, half, o.orders); err != nil {
		return c.summary(), err
	}
	relay2, err := startRelay(ctx, store, b, c, logger)
	if err != nil {
		return c.summary(), err
	}
	defer func() { _ = relay2.Close(context.WithoutCancel(ctx)) }()
	say("  relay restarted: its poller publishes the backlog")

	if err := waitSettled(ctx, o.timeout, store, b, c); err != nil {
		return c.summary(), err
	}
	if err := relay2.Close(ctx); err != nil {
		return c.summary(), err
	}
	if err := b.close(ctx); err != nil { // the consumer stops: the counts are final
		return c.summary(), err
	}
	sum := c.summary()
	say("  injected: %d events published twice by the relay, %d applied events not acknowledged by the consumer",
		sum.republished, sum.withheld)
	if o.broker == "nats" {
		say("  JetStream dropped the %d copies published inside its duplicate window; the inbox dropped %d redeliveries",
			sum.relayed-sum.written, sum.duplicates)
	} else {
		say("  RabbitMQ delivered every copy; the inbox dropped %d redeliveries", sum.duplicates)
	}
	if err := checkLedger(ctx, db, store.Dialect(), c); err != nil {
		return sum, err
	}
	say("  ledger: %d orders, each once, %d cents in all — as written", sum.written, c.amountCents.Load())
	if sum.applied != sum.written {
		return sum, fmt.Errorf("applied %d events, written %d", sum.applied, sum.written)
	}
	return sum, nil
}

// orderService writes orders and their events.
type orderService struct {
	txm     *outboxsql.TxManager
	writer  *outbox.Client
	dialect outboxsql.Dialect
	c       *counters
}

// write commits orders from..to-1, each with its OrderPlaced event in one
// transaction.
func (s *orderService) write(ctx context.Context, from, to int) error {
	insert := outboxsql.Rebind(s.dialect, "INSERT INTO "+ordersTable+" (id, amount_cents) VALUES (?, ?)")
	for i := from; i < to; i++ {
		o := order{ID: fmt.Sprintf("o-%05d", i+1), AmountCents: int64(100 * (1 + i*37%50))}
		ev, err := outbox.NewEnvelope(orderPlaced, outbox.WithAggregate(orderAgg, o.ID), outbox.WithJSONValue(o))
		if err != nil {
			return err
		}
		err = s.txm.InTx(ctx, func(ctx context.Context) error {
			tx, _ := s.txm.Tx(ctx)
			if _, err := tx.ExecContext(ctx, insert, o.ID, o.AmountCents); err != nil {
				return err
			}
			_, err := s.writer.Write(ctx, ev)
			return err
		})
		if err != nil {
			return fmt.Errorf("order %s: %w", o.ID, err)
		}
		s.c.written.Add(1)
		s.c.amountCents.Add(o.AmountCents)
	}
	return nil
}

// errRelayCrash is the injected failure of a relay that published an event
// but stopped before the outbox marked it DONE.
var errRelayCrash = errors.New("relay stopped after the broker took the event, before DONE (injected)")

// startRelay starts a Client that polls the outbox and publishes every
// event through the broker's sink. The event of every republishEvery-th
// order fails its first attempt after the broker took it, so the outbox
// publishes it again.
func startRelay(ctx context.Context, store *outboxsql.Store, b broker, c *counters, logger *slog.Logger) (*outbox.Client, error) {
	client, err := outbox.New(outbox.Config{
		Store: store, Mode: outbox.ModePollerOnly, Logger: logger,
		PollInterval: 50 * time.Millisecond, Workers: 8,
		MaxAttempts: 20, RetryPolicy: &outbox.ExponentialBackoff{Base: 50 * time.Millisecond, Max: time.Second},
	})
	if err != nil {
		return nil, err
	}
	sink := b.sink()
	err = client.HandleAll(outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		if err := sink.Handle(ctx, e); err != nil {
			return err
		}
		c.relayed.Add(1)
		var n int
		if _, err := fmt.Sscanf(e.AggregateID(), "o-%d", &n); err == nil && n%republishEvery == 0 && outbox.DeliveryAttempt(ctx) == 1 {
			c.republished.Add(1)
			return errRelayCrash
		}
		return nil
	}))
	if err == nil {
		err = client.Start(ctx)
	}
	if err != nil {
		_ = client.Close(ctx)
		return nil, err
	}
	return client, nil
}

// consumer applies OrderPlaced events to its ledger through the inbox.
type consumer struct {
	txm     *outboxsql.TxManager
	in      *inbox.Inbox
	dialect outboxsql.Dialect
	c       *counters
	log     *slog.Logger
}

// handle applies one message in a transaction and acknowledges it after
// the commit. Every withholdEvery-th application is not acknowledged: the
// broker delivers it again, and the inbox reports the duplicate.
func (k *consumer) handle(ctx context.Context, d delivery) {
	k.c.deliveries.Add(1)
	defer k.c.settled.Add(1)
	var o order
	if err := json.Unmarshal(d.data, &o); err != nil || d.eventID == "" {
		k.log.Error("consumer: a message without an event id or order; dropped", "event_id", d.eventID, "error", err)
		_ = d.ack()
		return
	}
	insert := outboxsql.Rebind(k.dialect, "INSERT INTO "+ledgerTable+" (event_id, order_id, amount_cents) VALUES (?, ?, ?)")
	var dup bool
	err := k.txm.InTx(ctx, func(ctx context.Context) error {
		var err error
		dup, err = k.in.Process(ctx, d.eventID, func(ctx context.Context) error {
			tx, _ := k.txm.Tx(ctx)
			_, err := tx.ExecContext(ctx, insert, d.eventID, o.ID, o.AmountCents)
			return err
		})
		return err
	})
	switch {
	case err != nil: // nothing was applied: deliver it again
		k.log.Warn("consumer: applying an event failed; it is delivered again", "event_id", d.eventID, "error", err)
		k.c.naks.Add(1)
		_ = d.nak()
	case dup:
		k.c.duplicates.Add(1)
		k.c.await(d.eventID, false)
		_ = d.ack()
	case k.c.applied.Add(1)%withholdEvery == 0:
		k.c.withheld.Add(1)
		k.c.naks.Add(1)
		k.c.await(d.eventID, true)
		_ = d.nak() // as if the consumer crashed after its commit
	default:
		_ = d.ack()
	}
}

// waitPublishes waits until the relay has published at least n events:
// a redeploy before the first publish would show nothing.
func waitPublishes(ctx context.Context, timeout time.Duration, c *counters, n int64) error {
	deadline := time.Now().Add(timeout)
	for c.relayed.Load() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("the relay published %d events in %s, want %d before its redeploy", c.relayed.Load(), timeout, n)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// waitSettled waits until the outbox has no pending event, every order was
// applied, every withheld message came back and the broker holds nothing
// more for the consumer.
func waitSettled(ctx context.Context, timeout time.Duration, store *outboxsql.Store, b broker, c *counters) error {
	deadline := time.Now().Add(timeout)
	for {
		pending, err := store.Count(ctx, outbox.Query{Statuses: []outbox.Status{outbox.StatusNew, outbox.StatusRetry}})
		if err != nil {
			return err
		}
		dead, err := store.Count(ctx, outbox.Query{Statuses: []outbox.Status{outbox.StatusDead}})
		if err != nil {
			return err
		}
		if dead > 0 {
			recs, _ := store.List(ctx, outbox.Query{Statuses: []outbox.Status{outbox.StatusDead}, Limit: 1})
			last := ""
			if len(recs) > 0 {
				last = recs[0].LastError
			}
			return fmt.Errorf("%d events are DEAD: the relay could not publish them (last error: %s)", dead, last)
		}
		if pending == 0 && c.applied.Load() >= c.written.Load() && c.awaited() == 0 {
			drained, err := b.drained(ctx, c)
			if err != nil {
				return err
			}
			if drained {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not settled after %s: %d events pending in the outbox, %s, %d withheld messages not delivered again",
				timeout, pending, c.summary(), c.awaited())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkLedger compares the consumer's ledger with what the order service
// wrote: every order once, the same total.
func checkLedger(ctx context.Context, db *sql.DB, d outboxsql.Dialect, c *counters) error {
	var rows, distinct, total int64
	err := db.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT order_id), COALESCE(SUM(amount_cents), 0) FROM "+ledgerTable).
		Scan(&rows, &distinct, &total)
	if err != nil {
		return fmt.Errorf("read the ledger: %w", err)
	}
	var orders int64
	if err := db.QueryRowContext(ctx, outboxsql.Rebind(d, "SELECT COUNT(*) FROM "+ordersTable)).Scan(&orders); err != nil {
		return fmt.Errorf("count the orders: %w", err)
	}
	if rows != c.written.Load() || distinct != rows || total != c.amountCents.Load() || orders != rows {
		return fmt.Errorf("ledger: %d rows for %d orders (%d distinct), %d cents; want %d orders once each, %d cents",
			rows, orders, distinct, total, c.written.Load(), c.amountCents.Load())
	}
	return nil
}
