package outboxpgx

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/sqlstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// testPool returns a pool on the test server, configured by configure
// (nil: as the DSN says) and closed at tb's cleanup (after its subtests,
// parallel ones included). An unreachable server skips tb, or fails it
// under OUTBOX_TEST_REQUIRE_DBS=1.
func testPool(tb testing.TB, configure func(c *pgxpool.Config)) *pgxpool.Pool {
	tb.Helper()
	dsn := os.Getenv(outboxsqltest.EnvPostgresDSN)
	if dsn == "" {
		dsn = outboxsqltest.DefaultPostgresDSN
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	if configure != nil {
		configure(cfg)
	}
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		if err = pool.Ping(ctx); err != nil {
			pool.Close()
		}
	}
	if err != nil {
		outboxsqltest.Unavailable(tb, "PostgreSQL (pgx) at "+outboxsqltest.EnvPostgresDSN+" (or the local default)", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// testStore returns a migrated Store on a fresh table of pool, dropped
// with its control tables at cleanup.
func testStore(tb testing.TB, pool *pgxpool.Pool, opts ...Option) *sqlstore.Store {
	tb.Helper()
	table := outboxsqltest.TableName("outbox_pgx")
	store, err := Open(pool, append(opts, WithTable(table))...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		for _, t := range append([]string{table}, store.ControlTables()...) {
			_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+t)
		}
	})
	if err := store.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return store
}

// TestReadCommitted checks the pool's transactions (the Store's dialects
// with several-statement claims use them): commit, rollback on an error and
// on a panic, and that the connection goes back to the pool each time.
func TestReadCommitted(t *testing.T) {
	pool := testPool(t, nil)
	db := poolDB{pool}
	ctx := context.Background()
	table := outboxsqltest.TableName("rc_pgx")
	if _, err := db.Exec(ctx, "CREATE TABLE "+table+" (n INTEGER NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(ctx, "DROP TABLE IF EXISTS "+table) })
	insert := func(tx sqlstore.Conn) error {
		var level string
		rows, err := tx.Query(ctx, "SHOW transaction_isolation")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := rows.Scan(&level); err != nil {
				return err
			}
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if level != "read committed" {
			t.Errorf("isolation %q, want read committed", level)
		}
		n, err := tx.Exec(ctx, "INSERT INTO "+table+" (n) VALUES (1), (2)")
		if n != 2 {
			t.Errorf("inserted %d rows, want 2", n)
		}
		return err
	}
	if err := db.ReadCommitted(ctx, insert); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := db.ReadCommitted(ctx, func(tx sqlstore.Conn) error { _ = insert(tx); return boom }); !errors.Is(err, boom) {
		t.Fatalf("ReadCommitted = %v, want %v", err, boom)
	}
	func() {
		defer func() { _ = recover() }()
		_ = db.ReadCommitted(ctx, func(tx sqlstore.Conn) error { _ = insert(tx); panic("boom") })
	}()
	var n int64
	if err := pool.QueryRow(ctx, "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d rows (%v), want the 2 committed ones", n, err)
	}
	if acquired := pool.Stat().AcquiredConns(); acquired != 0 {
		t.Fatalf("%d connections still acquired", acquired)
	}
}

// insertOnly hides the CopyFrom of a Conn.
type insertOnly struct{ sqlstore.Conn }

// noCopyTx is a transaction whose Conn cannot copy: Store.Insert then
// always uses multi-row INSERTs.
type noCopyTx struct{ *level }

func (t noCopyTx) Conn() sqlstore.Conn { return insertOnly{t.level.Conn()} }

// BenchmarkInsert compares the two ways Store.Insert writes a batch of
// events in one transaction: multi-row INSERTs (at most 500 rows each) and
// COPY (pgx's CopyFrom), around sqlstore.CopyThreshold. Each iteration
// writes one batch each way, alternately, so that both see the same load;
// the metrics are per batch: insert-µs and copy-µs for Store.Insert alone,
// insert-tx-µs and copy-tx-µs for the whole transaction (BEGIN to COMMIT).
//
//	go test -run '^$' -bench Insert -benchtime 200x -count 5
func BenchmarkInsert(b *testing.B) {
	pool := testPool(b, nil)
	payload := []byte(`{"orderId":"o-42","total":1200,"currency":"EUR","lines":[{"sku":"A-1","qty":2}]}`)
	for _, n := range []int{16, 32, 64, 128, 256, 512, 1000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			store := testStore(b, pool)
			txm := NewTxManager(pool)
			ctx := context.Background()
			now := time.Now()
			evs := make([]outbox.Envelope, n)
			var spent [2]struct{ insert, tx time.Duration }
			for b.Loop() {
				for mode := range 2 { // 0: multi-row INSERT, 1: COPY
					for i := range evs {
						evs[i] = outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithJSON(payload),
							outbox.WithAggregate(outbox.AggregateName("Order"), "o-42"), outbox.WithHeader("trace-id", "t-1"))
					}
					begin := time.Now()
					err := txm.InTx(ctx, func(ctx context.Context) error {
						cur, err := txm.Current(ctx)
						if err != nil {
							return err
						}
						if mode == 0 {
							cur = noCopyTx{cur.(*level)}
						}
						start := time.Now()
						err = store.Insert(ctx, cur, now, "node-1", evs)
						spent[mode].insert += time.Since(start)
						return err
					})
					spent[mode].tx += time.Since(begin)
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
			b.ReportMetric(per(spent[0].insert), "insert-µs")
			b.ReportMetric(per(spent[1].insert), "copy-µs")
			b.ReportMetric(per(spent[0].tx), "insert-tx-µs")
			b.ReportMetric(per(spent[1].tx), "copy-tx-µs")
		})
	}
}
