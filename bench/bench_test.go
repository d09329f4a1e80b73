package bench

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	_ "modernc.org/sqlite"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// sqliteClient returns a Client of mode on a migrated store in a fresh
// SQLite file, and its TxManager. It is closed when b ends.
func sqliteClient(b *testing.B, mode outbox.Mode) (*outbox.Client, *outboxsql.TxManager) {
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
	if err := store.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	txm := outboxsql.NewTxManager(db)
	c, err := outbox.New(outbox.Config{Store: store, TxContext: txm, Mode: mode, Logger: quiet, DisablePurge: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			b.Error(err)
		}
	})
	return c, txm
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

// hotClient starts a Client in ModeHotPathOnly on SQLite whose listener
// counts deliveries.
func hotClient(b *testing.B, delivered *atomic.Int64) (*outbox.Client, *outboxsql.TxManager) {
	b.Helper()
	c, txm := sqliteClient(b, outbox.ModeHotPathOnly)
	if err := c.Handle(outbox.EventName("OrderPlaced"), func(context.Context, outbox.Envelope) error {
		delivered.Add(1)
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return c, txm
}

// write writes events in one transaction.
func write(b *testing.B, c *outbox.Client, txm *outboxsql.TxManager, events ...outbox.Envelope) {
	if err := txm.InTx(context.Background(), func(ctx context.Context) error {
		_, err := c.Write(ctx, events...)
		return err
	}); err != nil {
		b.Fatal(err)
	}
}

// waitFor waits until delivered reaches n.
func waitFor(b *testing.B, delivered *atomic.Int64, n int64) {
	deadline := time.Now().Add(time.Minute)
	for delivered.Load() < n {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d events delivered after a minute", delivered.Load(), n)
		}
		time.Sleep(5 * time.Microsecond)
	}
}

// BenchmarkHotPath measures the hot path end to end on a real SQLite
// store, one event at a time: a transaction that writes one event and
// commits, the after-commit handoff to a worker, the listener; the DONE
// acks are batched in the background.
func BenchmarkHotPath(b *testing.B) {
	var delivered atomic.Int64
	c, txm := hotClient(b, &delivered)
	events := make([]outbox.Envelope, b.N)
	for i := range events {
		events[i] = event(b, i, 1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		write(b, c, txm, events[i])
		waitFor(b, &delivered, int64(i+1))
	}
}

// BenchmarkHotPathBatch is BenchmarkHotPath with 100 events per
// transaction and the hot queue kept busy: the writer runs ahead of the
// workers by up to 500 events. ns/op is per event.
func BenchmarkHotPathBatch(b *testing.B) {
	const batch, ahead = 100, 500
	var delivered atomic.Int64
	c, txm := hotClient(b, &delivered)
	events := make([]outbox.Envelope, b.N)
	for i := range events {
		events[i] = event(b, i, 1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for from := 0; from < b.N; from += batch {
		waitFor(b, &delivered, int64(from-ahead))
		write(b, c, txm, events[from:min(from+batch, b.N)]...)
	}
	waitFor(b, &delivered, int64(b.N))
}

// BenchmarkHeaderCodec measures the header encoding and decoding of the SQL
// store through the public API on SQLite: Client.Write of one event
// (headers encoded to JSON) and Client.Get reading it back (headers
// decoded), per header count. Compare with headers=0 to see the codec's
// share.
func BenchmarkHeaderCodec(b *testing.B) {
	for _, n := range []int{0, 1, 8} {
		b.Run("headers="+strconv.Itoa(n), func(b *testing.B) {
			c, txm := sqliteClient(b, outbox.ModeWriterOnly)
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				e := event(b, i, n)
				i++
				write(b, c, txm, e)
				rec, err := c.Get(ctx, e.ID())
				if err != nil || rec.Envelope.NumHeaders() != n {
					b.Fatalf("get: %v, %d headers", err, rec.Envelope.NumHeaders())
				}
			}
		})
	}
}
