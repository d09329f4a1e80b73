package bench

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	_ "modernc.org/sqlite"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// openSQLite returns a migrated store on a fresh SQLite file.
func openSQLite(b *testing.B) (*sql.DB, *outboxsql.Store) {
	b.Helper()
	db, err := sql.Open("sqlite", outboxsql.SQLiteDSN(filepath.Join(b.TempDir(), "bench.db")))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	store, err := outboxsql.Open(db)
	if err != nil {
		b.Fatal(err)
	}
	if err := store.Migrate(context.Background(), db); err != nil {
		b.Fatal(err)
	}
	return db, store
}

func event(b *testing.B, i int, headers int) outbox.Envelope {
	opts := []outbox.EnvelopeOption{outbox.WithAggregate(outbox.AggregateName("Order"), "o-"+strconv.Itoa(i)),
		outbox.WithJSON([]byte(`{"order":"o-1","amount":1200,"currency":"EUR"}`))}
	for h := range headers {
		opts = append(opts, outbox.WithHeader("header-"+strconv.Itoa(h), "4bf92f3577b34da6a3ce929d0e0e4736"))
	}
	e, err := outbox.NewEnvelope(outbox.EventName("OrderPlaced"), opts...)
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// hotSetup starts a dispatcher on a SQLite store whose listener signals
// delivered, with b.N events inserted claimed by it, as the Writer would
// have inserted them (not timed).
func hotSetup(b *testing.B, delivered chan<- struct{}) (*outbox.Dispatcher, []outbox.Envelope) {
	b.Helper()
	db, store := openSQLite(b)
	ctx := context.Background()
	reg := outbox.NewRegistry()
	if err := reg.Register(outbox.AggregateName("Order"), outbox.EventName("OrderPlaced"),
		outbox.ListenerFunc(func(context.Context, outbox.Envelope) error { delivered <- struct{}{}; return nil })); err != nil {
		b.Fatal(err)
	}
	d, err := outbox.NewDispatcher(outbox.DispatcherConfig{Store: store, DB: db, Registry: reg, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	events := make([]outbox.Envelope, b.N)
	for i := range events {
		events[i] = event(b, i, 1)
	}
	for chunk := range slices.Chunk(events, 500) {
		if err := store.Insert(ctx, db, time.Now(), d.Owner(), chunk); err != nil {
			b.Fatal(err)
		}
	}
	if err := d.Start(ctx); err != nil {
		b.Fatal(err)
	}
	return d, events
}

// BenchmarkHotHandoff measures the dispatcher's hot path in process:
// EnqueueHot → worker → listener, one event at a time, with the DONE acks
// batched into a real SQLite store.
func BenchmarkHotHandoff(b *testing.B) {
	ctx := context.Background()
	got := make(chan struct{}, 1)
	d, events := hotSetup(b, got)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if !d.EnqueueHot(events[i]) {
			b.Fatal("hot queue refused an event")
		}
		<-got
	}
	b.StopTimer()
	if err := d.Close(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkHotHandoffParallel is BenchmarkHotHandoff with the queue kept
// full: every goroutine enqueues and the listener only counts.
func BenchmarkHotHandoffParallel(b *testing.B) {
	ctx := context.Background()
	done := make(chan struct{}, 1024)
	d, events := hotSetup(b, done)
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		for _, e := range events {
			for !d.EnqueueHot(e) { // full: wait for the workers
				time.Sleep(10 * time.Microsecond)
			}
		}
	}()
	for range b.N {
		<-done
	}
	b.StopTimer()
	if err := d.Close(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkHeaderCodec measures the header encoding and decoding of the SQL
// store through its public API on SQLite: Insert of one event (headers
// encoded to JSON) and List reading it back (headers decoded), per
// header count. Compare with headers=0 to see the codec's share.
func BenchmarkHeaderCodec(b *testing.B) {
	for _, n := range []int{0, 1, 8} {
		b.Run("headers="+strconv.Itoa(n), func(b *testing.B) {
			db, store := openSQLite(b)
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				e := event(b, i, n)
				i++
				if err := store.Insert(ctx, db, time.Now(), "", []outbox.Envelope{e}); err != nil {
					b.Fatal(err)
				}
				recs, err := store.List(ctx, db, outbox.Query{AfterID: e.ID()[:25], Limit: 1})
				if err != nil || len(recs) != 1 || recs[0].Envelope.NumHeaders() != n {
					b.Fatalf("list: %v, %d records", err, len(recs))
				}
			}
		})
	}
}
