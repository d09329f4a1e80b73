package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/relay/relaytest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The books of a -relay run come from the consumers' applications: an
// event applied twice, a committed event neither applied nor DEAD and an
// applied event that was never committed each fail the run, on the line
// and in its error, a lost event the broker acknowledged (DONE) as such;
// a DEAD event is not lost.
func TestRelayBooks(t *testing.T) {
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			d, _, err := dialect(name)
			if err != nil {
				t.Fatal(err)
			}
			c := config{db: name, relay: "nats", events: 4, poisonPermille: 1000} // every DEAD event is one that always fails
			if name == "sqlite" {
				c.dsn = filepath.Join(t.TempDir(), "relay.db")
			} else if dsn, ok := outboxsqltest.ServerDSN(d); ok {
				c.dsn, c.ownDB = dsn, "outbox_torture_test" // not the database of a run going on
			}
			if c, err = isolate(c); err != nil {
				outboxsqltest.Unavailable(t, name, err)
			}
			db, err := open(c)
			if err != nil {
				outboxsqltest.Unavailable(t, name, err)
			}
			defer db.Close()
			ctx := context.Background()
			if err := createTables(ctx, c, db); err != nil {
				t.Fatal(err)
			}
			p, err := newProbes(ctx, c, db) // its writer commits an event with its business row
			if err != nil {
				t.Fatal(err)
			}
			defer p.close(ctx)
			ev := func() outbox.Envelope { return outbox.MustEnvelope(orderPlaced, outbox.WithJSON([]byte(`{}`))) }
			once, twice, dead, lost, ackedLost, rolledBack := ev(), ev(), ev(), ev(), ev(), ev()
			for _, e := range []outbox.Envelope{once, twice, dead, lost, ackedLost} {
				if err := p.write(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			exec := func(q string, args ...any) {
				t.Helper()
				if _, err := db.ExecContext(ctx, bind(name, q), args...); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			for _, id := range []string{once.ID(), twice.ID(), twice.ID(), rolledBack.ID()} {
				exec("INSERT INTO "+appliedTable+" (event_id, worker, pid) VALUES (?, 0, 1)", id)
			}
			exec("INSERT INTO "+suppressedTable+" (event_id, worker) VALUES (?, 1), (?, 2)", once.ID(), twice.ID())
			exec("UPDATE "+outboxTable+" SET status = 3 WHERE event_id = ?", dead.ID())
			exec("UPDATE "+outboxTable+" SET status = 1 WHERE event_id = ?", ackedLost.ID())
			var line strings.Builder
			co := &coordinator{c: c, db: db, out: &line, brokerFaults: 2}
			err = co.report(ctx, time.Second)
			for _, want := range []string{" delivered=3 lost=2 duplicates=1 dead=1 ", " rolled_back_delivered=1 ",
				" relay=nats applied=3 applied_twice=1 suppressed=2 broker_faults=2 acked_unapplied=1\n"} {
				if !strings.Contains(line.String(), want) {
					t.Errorf("the line lacks %q:\n%s", want, line.String())
				}
			}
			for _, want := range []string{"2 committed events lost", "1 events were applied more than once", "rolled-back events leaked: 1 delivered",
				"1 events were acknowledged by the broker (their outbox rows are DONE) but never applied by a consumer"} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("the run's error lacks %q: %v", want, err)
				}
			}
		})
	}
}

// The broker of -relay nats: a message published before the server's
// fault is still in the stream after it and is consumed; the sink
// publishes again once its connection is back; a message whose apply
// failed is delivered again; a re-published event is dropped by the
// stream; and close leaves neither the server nor its files behind.
func TestNATSBrokerThroughItsFault(t *testing.T) {
	if _, err := natsServerPath(); err != nil {
		relaytest.Unavailable(t, "nats-server", err)
	}
	noLeaks(t)
	ctx := context.Background()
	run := newRelayRun()
	srv, err := relayBrokers["nats"].start(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	s := srv.(*natsServer)
	defer s.close(ctx)
	bc, err := relayBrokers["nats"].dial(ctx, srv.url(), run, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer bc.close()

	const n = 20
	var mu sync.Mutex
	applied, failed := map[string]int{}, map[string]bool{}
	cctx, stop := context.WithCancel(ctx)
	consumed := make(chan error, 1)
	// finish stops the consumer and waits for it (at the latest when the
	// test ends, also on a failure).
	finish := sync.OnceValue(func() error { stop(); return <-consumed })
	defer func() { _ = finish() }()
	go func() {
		consumed <- bc.consume(cctx, func(_ context.Context, id string, _ []byte) error {
			mu.Lock()
			defer mu.Unlock()
			if len(failed) == 0 { // the first message fails once
				failed[id] = true
				return errors.New("apply failed")
			}
			applied[id]++
			return nil
		})
	}()
	var events []outbox.Envelope
	publish := func(e outbox.Envelope) {
		t.Helper()
		var err error
		for range 100 { // while the connection is away, a publish fails at once
			if err = bc.sink().Handle(ctx, e); err == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("publish %s: %v", e.ID(), err)
	}
	for i := range 2 * n {
		if i == n {
			if _, err := srv.fault(ctx); err != nil {
				t.Fatal(err)
			}
		}
		e := outbox.MustEnvelope(orderPlaced, outbox.WithJSON(fmt.Appendf(nil, `{"n":%d}`, i)))
		events = append(events, e)
		publish(e)
	}
	publish(events[0]) // again: inside the duplicate window

	var missing []string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		missing = missing[:0]
		for _, e := range events {
			if applied[e.ID()] == 0 {
				missing = append(missing, e.ID())
			}
		}
		refused := len(failed)
		mu.Unlock()
		if len(missing) == 0 && refused == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events not applied after a minute (%d refused): %v", len(missing), len(events), refused, missing)
		}
	}
	if err := finish(); err != nil {
		t.Fatal(err)
	}

	nc, err := nats.Connect(srv.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if msgs := st.CachedInfo().State.Msgs; msgs != 2*n {
		t.Errorf("the stream holds %d messages, want %d (one per event, the re-published one dropped)", msgs, 2*n)
	}
	nc.Close()

	if err := srv.close(ctx); err != nil {
		t.Fatal(err)
	}
	if s.proc != nil {
		t.Error("nats-server still runs after close")
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Errorf("close left %s behind: %v", s.dir, err)
	}
}
