package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
)

// horizonWait bounds the waits of the horizon tests for what PostgreSQL
// reports later than it happens (its statistics are flushed about once a
// second): a limit on a hang, not a timed assertion.
const horizonWait = time.Minute

// postgresBackends runs fn for each PostgreSQL backend.
func postgresBackends(t *testing.T, fn func(t *testing.T, b outboxsqltest.Backend)) {
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		if b.Dialect != outboxsql.PostgreSQL {
			t.Skipf("%s has no vacuum horizon: its Store.Horizon says ErrUnsupported (the shared store suite checks it)", b.Name)
		}
		fn(t, b)
	})
}

// TestHorizonGuardPinnedByTransaction holds a REPEATABLE READ snapshot open
// in another session while events are written and delivered: the guard
// reports that session as the oldest holder of the horizon, the dead
// tuples the deliveries left, the table's size, and, with low thresholds,
// a warning in the logs, Stats and Health.
func TestHorizonGuardPinnedByTransaction(t *testing.T) {
	postgresBackends(t, func(t *testing.T, b outboxsqltest.Backend) {
		ctx := context.Background()
		db := b.Open(t)
		f := fixtureOn(t, b, db)

		// The other session: a snapshot taken, then idle in transaction.
		pin, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer pin.Close()
		var pinPID int
		if err := pin.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pinPID); err != nil {
			t.Fatal(err)
		}
		if _, err := pin.ExecContext(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ"); err != nil {
			t.Fatal(err)
		}
		defer pin.ExecContext(ctx, "ROLLBACK") //nolint:errcheck // the session closes anyway
		var n int
		if err := pin.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+f.Table).Scan(&n); err != nil {
			t.Fatal(err)
		}

		logger, logs := outboxtest.NewLogBuffer()
		var delivered atomic.Int64
		cfg := outbox.Config{HorizonInterval: time.Second, HorizonAge: time.Second, HorizonDeadTuples: 1000, HorizonTableMegabytes: 1}
		c := startNode(t, f, cfg, func(context.Context, outbox.Envelope) error { delivered.Add(1); return nil })
		// startNode's quiet logger is replaced: the warnings are what is
		// checked. A second Client on the table, logging.
		cfg.Store, cfg.TxContext, cfg.Logger, cfg.Mode = f.Store, f.TxContext, logger, outbox.ModeWriterOnly
		w, err := outbox.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := w.Close(context.Background()); err != nil {
				t.Errorf("close: %v", err)
			}
		})

		// Write and deliver 2,000 events of 1 KiB: past 1 MB, with a
		// dead version each that the pinned snapshot keeps.
		const events = 2000
		payload := []byte(`{"pad":"` + strings.Repeat("x", 1024) + `"}`)
		for i := 0; i < events; i += 100 {
			err := f.InTx(ctx, func(ctx context.Context) error {
				evs := make([]outbox.Envelope, 100)
				for j := range evs {
					e, err := outbox.NewEnvelope(outbox.EventName("Ping"), outbox.WithJSON(payload))
					if err != nil {
						return err
					}
					evs[j] = e
				}
				_, err := c.Write(ctx, evs...)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "every event delivered", func() (bool, string) {
			return delivered.Load() >= events, fmt.Sprintf("%d delivered", delivered.Load())
		})

		var r *outbox.HorizonReport
		waitFor(t, "the guard's three warnings", func() (bool, string) {
			st, err := w.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			r = st.Horizon
			return r != nil && len(r.Warnings) == 3, fmt.Sprintf("%+v", r)
		})
		ho, ok := r.Oldest()
		if !ok || ho.Kind != outbox.HolderTransaction || ho.Age <= time.Second || ho.XIDAge <= 0 {
			t.Fatalf("oldest holder %+v (found: %v), want a transaction over a second old", ho, ok)
		}
		// Another session of the shared server may hold the horizon
		// further back; this one's, then, is not the oldest.
		if ho.PID != pinPID {
			var age int64
			if err := db.QueryRowContext(ctx, "SELECT age(backend_xmin) FROM pg_stat_activity WHERE pid = $1", pinPID).Scan(&age); err != nil {
				t.Fatal(err)
			}
			if ho.XIDAge < age {
				t.Fatalf("oldest holder %+v is younger than the pinning session %d (%d transactions)", ho, pinPID, age)
			}
		}
		if r.DeadTuples <= 0 || r.TableSize <= 1<<20 || r.LiveTuples <= 0 {
			t.Fatalf("horizon %+v: want dead tuples, live tuples, more than 1 MiB", r.Horizon)
		}
		h, err := w.Health(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !h.Horizon.Warning() {
			t.Fatalf("health's horizon %+v, want the warnings", h.Horizon)
		}
		for _, check := range []string{outbox.CheckDeadTuples, outbox.CheckHolderAge, outbox.CheckTableSize} {
			line := logLine(logs.String(), "check="+check)
			if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "horizon guard") {
				t.Errorf("log has no warning of %s:\n%s", check, logs)
			}
		}
		for _, check := range []string{outbox.CheckDeadTuples, outbox.CheckHolderAge, outbox.CheckTableSize} {
			t.Logf("warning: %s", logLine(logs.String(), "check="+check))
		}
	})
}

// TestHorizonReplicationSlot creates a physical replication slot: one
// without a standby holds no xmin, so it holds the horizon back for no
// table, and the guard does not report it as a holder. (A slot holds one
// once a standby with hot_standby_feedback reports through it; that
// needs a replication connection, which a test of the shared server does
// not open.)
func TestHorizonReplicationSlot(t *testing.T) {
	postgresBackends(t, func(t *testing.T, b outboxsqltest.Backend) {
		ctx := context.Background()
		db := b.Open(t)
		store := b.NewStore(t, db)
		slot := outboxsqltest.TableName("outbox_test_slot")
		if _, err := db.ExecContext(ctx, "SELECT pg_create_physical_replication_slot($1, true)", slot); err != nil {
			t.Skipf("the server refuses a replication slot to this role: %v", err)
		}
		t.Cleanup(func() { _, _ = db.ExecContext(ctx, "SELECT pg_drop_replication_slot($1)", slot) })
		var xmin sql.NullString
		if err := db.QueryRowContext(ctx, "SELECT xmin::text FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&xmin); err != nil {
			t.Fatal(err)
		}
		h, err := store.Horizon(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ho := range h.Holders {
			if ho.Kind == outbox.HolderSlot && ho.Name == slot && !xmin.Valid {
				t.Fatalf("slot %s without an xmin reported as holder %+v", slot, ho)
			}
			if ho.Kind == outbox.HolderSlot && (ho.XIDAge <= 0 || (ho.State != "active" && ho.State != "inactive")) {
				t.Errorf("slot holder %+v: want its age in transactions and its state", ho)
			}
		}
	})
}

// TestHorizonMissingTable: the guard's read of a table that does not exist
// is an error wrapping ErrNotFound.
func TestHorizonMissingTable(t *testing.T) {
	postgresBackends(t, func(t *testing.T, b outboxsqltest.Backend) {
		store, err := outboxsql.Open(b.Open(t), outboxsql.WithDialect(b.Dialect), outboxsql.WithTable(outboxsqltest.TableName("outbox_missing")))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Horizon(context.Background()); !errors.Is(err, outbox.ErrNotFound) {
			t.Fatalf("horizon of a missing table: %v, want ErrNotFound", err)
		}
	})
}

// waitFor polls cond until it holds, failing the test with cond's last
// word after horizonWait.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(horizonWait)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s: %s", horizonWait, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logLine returns the first line of logs that contains s.
func logLine(logs, s string) string {
	for line := range strings.Lines(logs) {
		if strings.Contains(line, s) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// BenchmarkHorizon measures one read of the horizon guard (two catalog
// and statistics statements) on PostgreSQL, against a claim of an empty
// table in the same process: the raw cost the guard adds once per
// HorizonInterval.
func BenchmarkHorizon(b *testing.B) {
	for _, be := range outboxsqltest.Backends() {
		if be.Dialect != outboxsql.PostgreSQL {
			continue
		}
		b.Run(be.Name, func(b *testing.B) {
			dsn, _ := outboxsqltest.ServerDSN(be.Dialect)
			db, err := sql.Open(be.DriverName, dsn)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if err := db.Ping(); err != nil {
				b.Skipf("PostgreSQL unavailable: %v", err)
			}
			table := outboxsqltest.TableName("outbox_bench")
			store, err := outboxsql.Open(db, outboxsql.WithDialect(be.Dialect), outboxsql.WithTable(table))
			if err != nil {
				b.Fatal(err)
			}
			defer outboxsqltest.DropTables(db, store)
			ctx := context.Background()
			if err := store.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			b.Run("horizon", func(b *testing.B) {
				for b.Loop() {
					if _, err := store.Horizon(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("claim-empty", func(b *testing.B) {
				req := outbox.ClaimRequest{Owner: "bench", Lease: time.Minute, Limit: 50, NoRecovery: true}
				for b.Loop() {
					req.Now = time.Now()
					if _, err := store.Claim(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
