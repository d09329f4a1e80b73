package integration

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/sqlstore"
)

// sqliteFile opens a new SQLite database in the test's temp dir.
func sqliteFile(t *testing.T) *sql.DB {
	t.Helper()
	return openSQLite(t, outboxsql.SQLiteDSN(filepath.Join(t.TempDir(), "outbox.db")))
}

// openSQLite opens a SQLite pool on dsn, closed at cleanup.
func openSQLite(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func tableExists(t *testing.T, db *sql.DB, name string) bool {
	t.Helper()
	return queryCount(t, db, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?", name) == 1
}

func TestTableNameInjectionIsRejected(t *testing.T) {
	ctx := context.Background()
	db := sqliteFile(t)
	if _, err := db.Exec("CREATE TABLE users (id INTEGER)"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"outbox_event; DROP TABLE users", "outbox_event;DROP TABLE users;--", "users --", "x) ; DROP TABLE users; --"} {
		if s, err := outboxsql.Open(db, outboxsql.WithTable(name)); !errors.Is(err, outbox.ErrInvalidConfig) || s != nil {
			t.Fatalf("Open(WithTable(%q)) = %v; want ErrInvalidConfig", name, err)
		}
	}
	// A valid, schema-qualified name works end to end.
	s, err := outboxsql.Open(db, outboxsql.WithTable("main.custom_outbox"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	outboxsqltest.Insert(t, db, s, outbox.MustEnvelope(outbox.EventName("E"), outbox.WithJSON([]byte(`{}`))))
	if n, err := s.Count(ctx, outbox.Query{}); err != nil || n != 1 {
		t.Fatalf("count = %d, %v", n, err)
	}
	if !tableExists(t, db, "users") || !tableExists(t, db, "custom_outbox") {
		t.Fatal("tables missing")
	}
}

// otherDriver is a database/sql driver the package does not know.
type otherDriver struct{}

func (otherDriver) Open(string) (driver.Conn, error) { return nil, errors.New("not a real driver") }

func init() { sql.Register("outboxsql-test-other", otherDriver{}) }

func TestDetectDialect(t *testing.T) {
	d, err := outboxsql.DetectDialect(sqliteFile(t))
	if err != nil || d != outboxsql.SQLite {
		t.Fatalf("DetectDialect(modernc sqlite) = %v, %v; want SQLite", d, err)
	}
	other, err := sql.Open("outboxsql-test-other", "")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = outboxsql.DetectDialect(other)
	if !errors.Is(err, outbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "WithDialect") ||
		!strings.Contains(err.Error(), "integration.otherDriver") {
		t.Fatalf("DetectDialect(unknown) = %v; want ErrInvalidConfig naming the driver and the remedy", err)
	}
	if _, err := outboxsql.Open(other); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("Open(unknown driver) = %v", err)
	}
	// An explicit dialect works with any driver.
	if s, err := outboxsql.Open(other, outboxsql.WithDialect(outboxsql.SQLite)); err != nil || s.Dialect() != outboxsql.SQLite {
		t.Fatalf("Open(unknown driver, WithDialect) = %v, %v", s, err)
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	ctx := context.Background()
	db := sqliteFile(t)
	s, err := outboxsql.Open(db, outboxsql.WithTable("events_out"))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
	}
	rows, err := db.Query("SELECT name FROM sqlite_master WHERE tbl_name = 'events_out' AND type = 'index' AND sql IS NOT NULL ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var idx []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		idx = append(idx, n)
	}
	if strings.Join(idx, ",") != "events_out_due_idx,events_out_lease_idx,events_out_order_idx,events_out_owed_idx,events_out_park_idx,events_out_purge_idx,events_out_tnt_idx,events_out_type_idx,events_out_walk_idx" {
		t.Fatalf("indexes %v", idx)
	}
	// Schema() is what Migrate runs: applying it in a transaction by hand works too.
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, st := range s.Schema() {
		if _, err := tx.Exec(st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
}

func TestMissingTableError(t *testing.T) {
	db := sqliteFile(t)
	s, err := outboxsql.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Count(context.Background(), outbox.Query{})
	if err == nil || !strings.Contains(err.Error(), sqlstore.DefaultTable) {
		t.Fatalf("Count on a missing table = %v; want an error naming the table", err)
	}
}

func TestSQLiteDSNPragmas(t *testing.T) {
	db := sqliteFile(t)
	for pragma, want := range map[string]string{"journal_mode": "wal", "busy_timeout": "10000", "foreign_keys": "1"} {
		var got string
		if err := db.QueryRow("PRAGMA " + pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %q, want %q", pragma, got, want)
		}
	}
}

// TestSQLiteClaimUsesPartialIndex checks the plan of the claim's row
// selection: the partial index serves both the filter and the order, so no
// sort of the whole backlog is needed.
func TestSQLiteClaimUsesPartialIndex(t *testing.T) {
	ctx := context.Background()
	db := sqliteFile(t)
	s, err := outboxsql.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// The claim's two statements, as the store runs them.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &stmtRecorder{tx: tx}
	recorded, err := sqlstore.New(rec, sqlstore.WithDialect(sqlstore.SQLite))
	if err != nil {
		t.Fatal(err)
	}
	_, err = recorded.Claim(ctx, outbox.ClaimRequest{Owner: "o", Now: time.Now(), Lease: time.Minute, Limit: 10})
	_ = tx.Rollback()
	if err != nil || len(rec.stmts) != 2 {
		t.Fatalf("claim: %v, %d statements", err, len(rec.stmts))
	}
	for i, index := range []string{"outbox_event_lease_idx", "outbox_event_due_idx"} {
		if plan := explain(t, db, rec.stmts[i].query, rec.stmts[i].args...); !strings.Contains(plan, index) || strings.Contains(plan, "TEMP B-TREE") {
			t.Fatalf("claim statement %d does not walk %s in order:\n%s", i, index, plan)
		}
	}
	const purge = "SELECT event_id FROM outbox_event WHERE status IN (1, 3) AND COALESCE(done_at, created_at) < ? LIMIT ?"
	if plan := explain(t, db, purge, 1, 10); !strings.Contains(plan, "outbox_event_purge_idx") {
		t.Fatalf("purge plan does not use the purge index:\n%s", plan)
	}
}

func explain(t *testing.T, db *sql.DB, query string, args ...any) string {
	t.Helper()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		b.WriteString(detail + "\n")
	}
	return b.String()
}

func TestTxManagerBusinessWritesAndNesting(t *testing.T) {
	ctx := context.Background()
	db := sqliteFile(t)
	if _, err := db.Exec("CREATE TABLE orders (id INTEGER PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	m := outboxsql.NewTxManager(db, outboxsql.WithTxLogger(quietLogger))
	if _, ok := m.Tx(ctx); ok {
		t.Fatal("Tx outside InTx reports a transaction")
	}
	countOrders := func() int {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM orders").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Business code reaches the *sql.Tx; nested InTx runs in a savepoint of it.
	err := m.InTx(ctx, func(ctx context.Context) error {
		tx, ok := m.Tx(ctx)
		if !ok {
			t.Fatal("no *sql.Tx inside InTx")
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id) VALUES (1)"); err != nil {
			return err
		}
		return m.InTx(ctx, func(inner context.Context) error {
			innerTx, _ := m.Tx(inner)
			if innerTx != tx {
				t.Error("nested InTx began a second transaction instead of a savepoint")
			}
			_, err := innerTx.ExecContext(inner, "INSERT INTO orders (id) VALUES (2)")
			return err
		})
	})
	if err != nil || countOrders() != 2 {
		t.Fatalf("InTx = %v, %d orders; want 2", err, countOrders())
	}
	// A nested failure rolls back to its savepoint only: the outer function
	// may swallow it and commit its own work.
	var innerRolledBack, innerCommitted bool
	err = m.InTx(ctx, func(ctx context.Context) error {
		tx, _ := m.Tx(ctx)
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id) VALUES (3)"); err != nil {
			return err
		}
		inner := m.InTx(ctx, func(ctx context.Context) error {
			cur, _ := m.Current(ctx)
			cur.AfterRollback(func() { innerRolledBack = true })
			cur.AfterCommit(func() { innerCommitted = true })
			tx, _ := m.Tx(ctx)
			if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id) VALUES (4)"); err != nil {
				return err
			}
			return errors.New("inner fails")
		})
		if inner == nil {
			t.Error("nested InTx swallowed its function's error")
		}
		return nil
	})
	if err != nil || !innerRolledBack || innerCommitted || countOrders() != 3 {
		t.Fatalf("swallowed nested failure: InTx = %v, inner rolled back %v, inner committed %v, %d orders; want nil, true, false, 3",
			err, innerRolledBack, innerCommitted, countOrders())
	}
}

func TestTxManagersOfTwoDatabasesAreIndependent(t *testing.T) {
	ctx := context.Background()
	db1, db2 := sqliteFile(t), sqliteFile(t)
	m1, m2 := outboxsql.NewTxManager(db1), outboxsql.NewTxManager(db2)
	err := m1.InTx(ctx, func(ctx context.Context) error {
		if _, err := m2.Current(ctx); !errors.Is(err, outbox.ErrNoTransaction) {
			t.Errorf("db2's manager sees db1's transaction: %v", err)
		}
		return m2.InTx(ctx, func(ctx context.Context) error {
			tx1, ok1 := m1.Tx(ctx)
			tx2, ok2 := m2.Tx(ctx)
			if !ok1 || !ok2 || tx1 == tx2 {
				t.Error("the two transactions are not carried side by side")
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// recordingDriver refuses every transaction, remembering the options asked for.
type recordingDriver struct{ opts chan driver.TxOptions }

type recordingConn struct{ d recordingDriver }

func (d recordingDriver) Open(string) (driver.Conn, error) { return recordingConn{d}, nil }
func (recordingConn) Prepare(string) (driver.Stmt, error)  { return nil, errors.New("unsupported") }
func (recordingConn) Close() error                         { return nil }
func (recordingConn) Begin() (driver.Tx, error)            { return nil, errors.New("unsupported") }
func (c recordingConn) BeginTx(_ context.Context, o driver.TxOptions) (driver.Tx, error) {
	c.d.opts <- o
	return nil, errors.New("begin refused")
}

var recorder = recordingDriver{opts: make(chan driver.TxOptions, 1)}

func init() { sql.Register("outboxsql-test-recording", recorder) }

func TestTxManagerOptions(t *testing.T) {
	db, err := sql.Open("outboxsql-test-recording", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := outboxsql.NewTxManager(db, outboxsql.WithTxOptions(sql.TxOptions{Isolation: sql.LevelSerializable, ReadOnly: true}))
	called := false
	err = m.InTx(context.Background(), func(context.Context) error { called = true; return nil })
	if err == nil || called || !strings.Contains(err.Error(), "begin refused") {
		t.Fatalf("InTx = %v (fn called: %v); want the BeginTx error", err, called)
	}
	if o := <-recorder.opts; o.Isolation != driver.IsolationLevel(sql.LevelSerializable) || !o.ReadOnly {
		t.Fatalf("driver got %+v, want serializable read-only", o)
	}
}

// TestSQLiteStoreWritesTakeTurns: SQLite has one write lock, and the
// store's own writes in one process take turns for it instead of meeting
// in SQLite's busy handler (which sleeps and retries). On a pool without a
// busy timeout, where a write that finds the lock taken fails at once with
// SQLITE_BUSY, concurrent claims, heartbeats and acknowledgements of eight
// owners all succeed and every event ends DONE.
func TestSQLiteStoreWritesTakeTurns(t *testing.T) {
	ctx := context.Background()
	db := openSQLite(t, "file:"+filepath.Join(t.TempDir(), "outbox.db")+"?_pragma=journal_mode(WAL)&_txlock=immediate")
	s, err := outboxsql.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	events := make([]outbox.Envelope, n)
	for i := range events {
		events[i] = pingEvent(t)
	}
	outboxsqltest.Insert(t, db, s, events...)
	errs := make(chan error, 8)
	for w := range 8 {
		owner := "owner-" + strconv.Itoa(w)
		go func() {
			errs <- func() error {
				for {
					recs, err := s.Claim(ctx, outbox.ClaimRequest{Owner: owner, Now: time.Now(), Lease: time.Minute, Limit: 25})
					if err != nil || len(recs) == 0 {
						return err
					}
					ids := make([]string, len(recs))
					for i, r := range recs {
						ids[i] = r.ID
					}
					if _, err := s.Renew(ctx, owner, ids, time.Now()); err != nil {
						return err
					}
					if _, err := s.MarkDone(ctx, owner, ids, time.Now()); err != nil {
						return err
					}
				}
			}()
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatalf("a store write failed instead of waiting for its turn: %v", err)
		}
	}
	if done, err := s.Count(ctx, outbox.Query{Statuses: []outbox.Status{outbox.StatusDone}}); err != nil || done != n {
		t.Fatalf("%d events DONE (%v), want %d", done, err, n)
	}
}
