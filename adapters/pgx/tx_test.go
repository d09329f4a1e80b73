package outboxpgx_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
	"github.com/go-outbox/outbox/core/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	outboxpgx "github.com/go-outbox/outbox/adapters/pgx"
)

var quietLogger = slog.New(slog.DiscardHandler)

var evt = outbox.EventName("Test")

func ev(t testing.TB, opts ...outbox.EnvelopeOption) outbox.Envelope {
	t.Helper()
	e, err := outbox.NewEnvelope(evt, append([]outbox.EnvelopeOption{outbox.WithJSON([]byte(`{"k":1}`))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// insert writes evs through the transaction in ctx.
func insert(ctx context.Context, txm *outboxpgx.TxManager, store *sqlstore.Store, evs ...outbox.Envelope) error {
	tx, err := txm.Current(ctx)
	if err != nil {
		return err
	}
	return store.Insert(ctx, tx, time.Now(), "", evs)
}

// callbacks registers named after-commit and after-rollback callbacks on the
// transaction in ctx and records which ran.
type callbacks struct{ ran []string }

func (c *callbacks) on(t testing.TB, ctx context.Context, txm *outboxpgx.TxManager, name string) {
	t.Helper()
	tx, err := txm.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx.AfterCommit(func() { c.ran = append(c.ran, name+"-commit") })
	tx.AfterRollback(func() { c.ran = append(c.ran, name+"-rollback") })
}

func (c *callbacks) want(t testing.TB, want ...string) {
	t.Helper()
	got := slices.Clone(c.ran)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("callbacks ran %v, want %v", c.ran, want)
	}
}

func TestOpenRejects(t *testing.T) {
	if _, err := outboxpgx.Open(nil); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Errorf("Open(nil) = %v, want ErrInvalidConfig", err)
	}
	pool := newPool(t, defaultSession)
	if _, err := outboxpgx.Open(pool, sqlstore.WithDialect(sqlstore.MySQL)); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Errorf("Open with the MySQL dialect = %v, want ErrInvalidConfig", err)
	}
	if _, err := outboxpgx.Open(pool, outboxpgx.WithTable("bad name; DROP")); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Errorf("Open with a bad table name = %v, want ErrInvalidConfig", err)
	}
	store, err := outboxpgx.Open(pool, sqlstore.WithDialect(sqlstore.PostgreSQL))
	if err != nil {
		t.Fatal(err)
	}
	if store.Dialect() != sqlstore.PostgreSQL || store.Table() != sqlstore.DefaultTable {
		t.Errorf("store on %s %s, want postgres %s", store.Dialect().Name(), store.Table(), sqlstore.DefaultTable)
	}
	var txm *outboxpgx.TxManager
	if err := txm.InTx(context.Background(), func(context.Context) error { return nil }); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Errorf("InTx of a nil TxManager = %v, want ErrInvalidConfig", err)
	}
}

func TestMissingTable(t *testing.T) {
	pool := newPool(t, defaultSession)
	store, err := outboxpgx.Open(pool, outboxpgx.WithTable(outboxsqltest.TableName("outbox_pgx_missing")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Count(context.Background(), outbox.Query{}); !errors.Is(err, sqlstore.ErrNoTable) {
		t.Errorf("Count on a missing table = %v, want ErrNoTable", err)
	}
	_, err = store.Claim(context.Background(), outbox.ClaimRequest{Owner: "o", Now: time.Now(), Lease: time.Minute, Limit: 1})
	if !errors.Is(err, sqlstore.ErrNoTable) {
		t.Errorf("Claim on a missing table = %v, want ErrNoTable", err)
	}
}

// recorder is a sql.Scanner that keeps what it was given.
type recorder struct{ v any }

func (r *recorder) Scan(src any) error { r.v = src; return nil }

// TestScanValues checks that pgx hands the store's scan targets the values
// database/sql would, in every query mode, for every type of the outbox
// table.
func TestScanValues(t *testing.T) {
	for _, s := range []session{defaultSession, simpleTokyoSession, execSession} {
		t.Run(s.name, func(t *testing.T) {
			pool := newPool(t, s)
			txm := outboxpgx.NewTxManager(pool)
			at := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
			mustInTx(t, txm, func(ctx context.Context) error {
				cur, err := txm.Current(ctx)
				if err != nil {
					return err
				}
				c := cur.(sqlstore.Tx).Conn()
				rows, err := c.Query(ctx, `SELECT '{"a": [1, "ü"]}'::json, 'x'::text, 'y'::varchar(8), '\x00ff'::bytea,
					$1::timestamptz, 1::smallint, 2::integer, 3::bigint, NULL::json, NULL::timestamptz, NULL::text,
					4::smallint, 5::integer, COUNT(*), 'z'::varchar(8) COLLATE "C" FROM (VALUES (1)) AS v`, at)
				if err != nil {
					return err
				}
				defer rows.Close()
				if !rows.Next() {
					t.Fatalf("no row: %v", rows.Err())
				}
				sc := make([]recorder, 11)
				var i16, i32, n int64
				var str string
				dest := make([]any, 0, 15)
				for i := range sc {
					dest = append(dest, &sc[i])
				}
				if err := rows.Scan(append(dest, &i16, &i32, &n, &str)...); err != nil {
					return err
				}
				want := []any{[]byte(`{"a": [1, "ü"]}`), "x", "y", []byte{0, 0xff}, at, int64(1), int64(2), int64(3), nil, nil, nil}
				for i, w := range want {
					got := sc[i].v
					switch w := w.(type) {
					case time.Time:
						if g, ok := got.(time.Time); !ok || !g.Equal(w) {
							t.Errorf("column %d: %T %v, want time.Time %v", i+1, got, got, w)
						}
					case []byte:
						if g, ok := got.([]byte); !ok || string(g) != string(w) {
							t.Errorf("column %d: %T %v, want []byte %q", i+1, got, got, w)
						}
					default:
						if got != w {
							t.Errorf("column %d: %T %v, want %T %v", i+1, got, got, w, w)
						}
					}
				}
				if i16 != 4 || i32 != 5 || n != 1 || str != "z" {
					t.Errorf("*int64 and *string targets: %d %d %d %q, want 4 5 1 z", i16, i32, n, str)
				}
				if rows.Next() {
					t.Error("a second row")
				}
				return rows.Close()
			})
		})
	}
}

// migrated returns a Store of pool on table, migrated, dropped with its
// control tables at cleanup.
func migrated(t *testing.T, pool *pgxpool.Pool, table string) *sqlstore.Store {
	t.Helper()
	store, err := outboxpgx.Open(pool, outboxpgx.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, t := range append([]string{table}, store.ControlTables()...) {
			_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+t)
		}
	})
	if err := store.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return store
}

// TestCopyFrom writes batches around sqlstore.CopyThreshold into tables
// whose names PostgreSQL folds (mixed case) or qualifies with a schema:
// CopyFrom must name the same table as the SQL text does.
func TestCopyFrom(t *testing.T) {
	pool := newPool(t, defaultSession)
	schema := outboxsqltest.TableName("outbox_pgx_schema")
	exec(t, pool, "CREATE SCHEMA "+schema)
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	for _, table := range []string{
		"Outbox_Mixed_" + strings.TrimPrefix(outboxsqltest.TableName(""), "_"),
		strings.ToUpper(schema) + ".Events",
	} {
		t.Run(table, func(t *testing.T) {
			store := migrated(t, pool, table)
			txm := outboxpgx.NewTxManager(pool)
			var all []outbox.Envelope
			for _, n := range []int{sqlstore.CopyThreshold - 1, sqlstore.CopyThreshold, 300} {
				evs := make([]outbox.Envelope, n)
				for i := range evs {
					switch i % 3 {
					case 0:
						evs[i] = ev(t, outbox.WithHeader("h", "ü"), outbox.WithAggregate(outbox.AggregateName("Order"), "o"))
					case 1:
						evs[i] = outbox.MustEnvelope(evt, outbox.WithBytes([]byte{0, 1, 0xff}), outbox.WithTenant("t"))
					default:
						evs[i] = ev(t, outbox.WithAvailableAt(time.Now().Add(time.Hour)))
					}
				}
				mustInTx(t, txm, func(ctx context.Context) error {
					cur, err := txm.Current(ctx)
					if err != nil {
						return err
					}
					if _, ok := cur.(sqlstore.Tx).Conn().(sqlstore.Copier); !ok {
						t.Fatal("the transaction's Conn is no sqlstore.Copier")
					}
					return store.Insert(ctx, cur, time.Now(), "owner", evs)
				})
				all = append(all, evs...)
			}
			recs, err := store.List(context.Background(), outbox.Query{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != len(all) {
				t.Fatalf("%d rows, want %d", len(recs), len(all))
			}
			byID := map[string]outbox.Envelope{}
			for _, e := range all {
				byID[e.ID()] = e
			}
			for _, r := range recs {
				want := byID[r.ID]
				if r.Err != nil {
					t.Fatalf("%s: %v", r.ID, r.Err)
				}
				got := r.Envelope
				h, _ := got.Header("h")
				wh, _ := want.Header("h")
				if got.PayloadKind() != want.PayloadKind() || got.PayloadString() != want.PayloadString() || h != wh ||
					got.TenantID() != want.TenantID() || got.AggregateType() != want.AggregateType() ||
					r.Status != outbox.StatusNew || r.Attempts != 0 || (r.LockedBy == "") != want.Delayed() {
					t.Fatalf("row %s = %+v, want %+v (claimed unless delayed)", r.ID, r, want)
				}
			}
		})
	}
}

// TestCopyDuplicateRace: another transaction writes an id of a bulk batch
// while the batch's COPY runs. The COPY waits for that transaction, then
// fails on the id; Insert returns ErrDuplicateEvent and the caller's
// transaction stays usable (the COPY ran in a savepoint). Looking the ids up
// before the COPY cannot see an id written by a transaction that has not
// committed yet.
func TestCopyDuplicateRace(t *testing.T) {
	pool := newPool(t, defaultSession)
	table := outboxsqltest.TableName("outbox_pgx_race")
	store := migrated(t, pool, table)
	txm := outboxpgx.NewTxManager(pool)
	ctx := context.Background()
	contested := ev(t)
	batch := []outbox.Envelope{contested}
	for range sqlstore.CopyThreshold {
		batch = append(batch, ev(t))
	}
	after := ev(t)

	// The other writer: inserts the contested id and holds its transaction
	// open until told to commit.
	inserted, commit := make(chan struct{}), make(chan struct{})
	other := make(chan error, 1)
	go func() {
		other <- txm.InTx(ctx, func(ctx context.Context) error {
			if err := insert(ctx, txm, store, contested); err != nil {
				return err
			}
			close(inserted)
			<-commit
			return nil
		})
	}()
	<-inserted

	var pid int32
	copyErr := make(chan error, 1)
	done := make(chan error, 1)
	pidKnown := make(chan struct{})
	go func() {
		done <- txm.InTx(ctx, func(ctx context.Context) error {
			tx, _ := txm.Tx(ctx)
			if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				return err
			}
			close(pidKnown)
			copyErr <- insert(ctx, txm, store, batch...) // waits for the other writer
			return insert(ctx, txm, store, after)        // the transaction goes on
		})
	}()
	<-pidKnown
	// Commit the other writer once the COPY waits for its lock.
	for waiting := false; !waiting; {
		if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND NOT granted)", pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if !waiting {
			select {
			case err := <-copyErr:
				t.Fatalf("the COPY ended (%v) before the other writer committed", err)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	close(commit)
	if err := <-other; err != nil {
		t.Fatalf("the other writer: %v", err)
	}
	if err := <-copyErr; !errors.Is(err, outbox.ErrDuplicateEvent) || !strings.Contains(err.Error(), contested.ID()) {
		t.Fatalf("Insert of the batch = %v, want ErrDuplicateEvent naming %s", err, contested.ID())
	}
	if err := <-done; err != nil {
		t.Fatalf("the transaction did not survive the duplicate: %v", err)
	}
	if n := count(t, pool, table); n != 2 {
		t.Fatalf("%d rows, want the other writer's event and the one written after the duplicate", n)
	}
}

// TestBusinessSavepoints checks that savepoints set through the pgx.Tx of
// TxManager.Tx, with Begin or with SQL, are tracked: the events of one
// rolled back are never announced as committed.
func TestBusinessSavepoints(t *testing.T) {
	pool := newPool(t, defaultSession)
	store := newStore(t, pool)
	txm := outboxpgx.NewTxManager(pool)
	var cb callbacks
	kept := ev(t)
	mustInTx(t, txm, func(ctx context.Context) error {
		tx, ok := txm.Tx(ctx)
		if !ok {
			t.Fatal("Tx: no transaction")
		}
		// Begin, then Rollback.
		sp, err := tx.Begin(ctx)
		if err != nil {
			return err
		}
		cb.on(t, ctx, txm, "begin-rolled-back")
		if err := insert(ctx, txm, store, ev(t)); err != nil {
			return err
		}
		if err := sp.Rollback(ctx); err != nil {
			return err
		}
		if err := sp.Rollback(ctx); !errors.Is(err, pgx.ErrTxClosed) {
			t.Errorf("second Rollback = %v, want ErrTxClosed", err)
		}
		cb.want(t, "begin-rolled-back-rollback")
		// Begin, nested Begin, Commit both.
		sp, err = tx.Begin(ctx)
		if err != nil {
			return err
		}
		inner, err := sp.Begin(ctx)
		if err != nil {
			return err
		}
		cb.on(t, ctx, txm, "begin-committed")
		if err := insert(ctx, txm, store, kept); err != nil {
			return err
		}
		if err := inner.Commit(ctx); err != nil {
			return err
		}
		if err := sp.Commit(ctx); err != nil {
			return err
		}
		if err := sp.Rollback(ctx); !errors.Is(err, pgx.ErrTxClosed) {
			t.Errorf("Rollback after Commit = %v, want ErrTxClosed", err)
		}
		// Savepoints in SQL.
		if _, err := tx.Exec(ctx, "SAVEPOINT business"); err != nil {
			return err
		}
		cb.on(t, ctx, txm, "sql-rolled-back")
		if err := insert(ctx, txm, store, ev(t)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT business"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "RELEASE SAVEPOINT business"); err != nil {
			return err
		}
		cb.want(t, "begin-rolled-back-rollback", "sql-rolled-back-rollback")
		// The transaction itself belongs to InTx.
		if err := tx.Commit(ctx); err == nil || errors.Is(err, pgx.ErrTxClosed) {
			t.Errorf("Commit of InTx's transaction = %v, want a refusal", err)
		}
		if err := tx.Rollback(ctx); err == nil || errors.Is(err, pgx.ErrTxClosed) {
			t.Errorf("Rollback of InTx's transaction = %v, want a refusal", err)
		}
		return nil
	})
	cb.want(t, "begin-rolled-back-rollback", "sql-rolled-back-rollback", "begin-committed-commit")
	recs, err := store.List(context.Background(), outbox.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].ID != kept.ID() {
		t.Fatalf("rows %v, want only %s", recs, kept.ID())
	}
}

// TestContextAfterEnd checks what a context kept after its transaction or
// savepoint ended carries.
func TestContextAfterEnd(t *testing.T) {
	pool := newPool(t, defaultSession)
	store := newStore(t, pool)
	txm := outboxpgx.NewTxManager(pool)
	if _, ok := txm.Tx(context.Background()); ok {
		t.Error("Tx outside InTx reports a transaction")
	}
	var outerCtx context.Context
	mustInTx(t, txm, func(ctx context.Context) error {
		outerCtx = ctx
		var innerCtx context.Context
		if err := txm.InTx(ctx, func(ctx context.Context) error {
			innerCtx = ctx
			return insert(ctx, txm, store, ev(t))
		}); err != nil {
			return err
		}
		// The savepoint was released: its context now reaches the
		// enclosing transaction, which goes on.
		if err := insert(innerCtx, txm, store, ev(t)); err != nil {
			t.Errorf("write with the context of a released savepoint: %v", err)
		}
		if _, ok := txm.Tx(innerCtx); !ok {
			t.Error("Tx with the context of a released savepoint: none")
		}
		return nil
	})
	if _, ok := txm.Tx(outerCtx); ok {
		t.Error("Tx after the commit reports a transaction")
	}
	if err := insert(outerCtx, txm, store, ev(t)); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Errorf("write after the commit = %v, want ErrNoTransaction", err)
	}
	if n := count(t, pool, store.Table()); n != 2 {
		t.Errorf("%d rows, want 2", n)
	}
	outboxtest.WantNewTxAfterEnd(t, txm, txm.InTx)
}

// TestFailedCommits checks that a transaction whose COMMIT does not commit
// runs its after-rollback callbacks and returns an error.
func TestFailedCommits(t *testing.T) {
	pool := newPool(t, defaultSession)
	store := newStore(t, pool)
	txm := outboxpgx.NewTxManager(pool)

	// A statement failed and fn ignored it: PostgreSQL rolls back at COMMIT.
	// (A duplicate event id no longer does this: Insert keeps the
	// transaction usable.)
	var cb callbacks
	err := txm.InTx(context.Background(), func(ctx context.Context) error {
		cb.on(t, ctx, txm, "ignored")
		if err := insert(ctx, txm, store, ev(t)); err != nil {
			t.Error(err)
		}
		tx, _ := txm.Tx(ctx)
		if _, err := tx.Exec(ctx, "SELECT 1 / 0"); err == nil {
			t.Error("a division by zero succeeded")
		}
		return nil
	})
	if !errors.Is(err, pgx.ErrTxCommitRollback) {
		t.Errorf("InTx = %v, want ErrTxCommitRollback", err)
	}
	cb.want(t, "ignored-rollback")

	// A deferred constraint fails the COMMIT itself.
	cb = callbacks{}
	failSQL := commitFailure(t, pool)
	err = txm.InTx(context.Background(), func(ctx context.Context) error {
		cb.on(t, ctx, txm, "deferred")
		if err := insert(ctx, txm, store, ev(t)); err != nil {
			return err
		}
		tx, _ := txm.Tx(ctx)
		_, err := tx.Exec(ctx, failSQL)
		return err
	})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23503" {
		t.Errorf("InTx = %v, want a foreign key violation at commit", err)
	}
	cb.want(t, "deferred-rollback")
	if n := count(t, pool, store.Table()); n != 0 {
		t.Errorf("%d rows, want none: neither transaction committed", n)
	}
}

func TestTxOptions(t *testing.T) {
	pool := newPool(t, defaultSession)
	store := newStore(t, pool)
	ro := outboxpgx.NewTxManager(pool, outboxpgx.WithTxOptions(pgx.TxOptions{AccessMode: pgx.ReadOnly}))
	err := ro.InTx(context.Background(), func(ctx context.Context) error { return insert(ctx, ro, store, ev(t)) })
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25006" { // read_only_sql_transaction
		t.Errorf("insert in a read-only transaction = %v, want SQLSTATE 25006", err)
	}
	serializable := outboxpgx.NewTxManager(pool, outboxpgx.WithTxOptions(pgx.TxOptions{IsoLevel: pgx.Serializable}))
	mustInTx(t, serializable, func(ctx context.Context) error {
		tx, _ := serializable.Tx(ctx)
		var level string
		if err := tx.QueryRow(ctx, "SHOW transaction_isolation").Scan(&level); err != nil {
			return err
		}
		if level != "serializable" {
			t.Errorf("isolation %q, want serializable", level)
		}
		return insert(ctx, serializable, store, ev(t))
	})
}

func TestBeginFails(t *testing.T) {
	pool := newPool(t, defaultSession)
	txm := outboxpgx.NewTxManager(pool)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	err := txm.InTx(ctx, func(context.Context) error { called = true; return nil })
	if !errors.Is(err, context.Canceled) || called {
		t.Errorf("InTx with a cancelled context = %v (fn called: %v), want context.Canceled without a call", err, called)
	}
}
