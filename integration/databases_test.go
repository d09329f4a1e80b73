package integration

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	_ "time/tzdata" // Asia/Tokyo on hosts without a zoneinfo database

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
	"github.com/go-outbox/outbox/core/sqlstore"
)

// The whole test binary runs with a non-UTC local time zone, so that code
// reading wall clocks or time.Local instead of UTC instants fails the suites.
func init() {
	tokyo, err := time.LoadLocation(outboxsqltest.SessionZone)
	if err != nil {
		panic(err)
	}
	time.Local = tokyo
}

// openDSN opens a pool of its own on dsn, closed at cleanup; a server that
// cannot be reached skips the test (fails under OUTBOX_TEST_REQUIRE_DBS=1).
func openDSN(t *testing.T, b outboxsqltest.Backend, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(b.DriverName, dsn)
	if err == nil {
		err = db.PingContext(context.Background())
	}
	if err != nil {
		if db != nil {
			_ = db.Close()
		}
		outboxsqltest.Unavailable(t, b.Name+" ("+b.DriverName+")", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// fixtureOn is newFixture on a given pool.
func fixtureOn(t *testing.T, b outboxsqltest.Backend, db *sql.DB) outboxtest.Fixture {
	t.Helper()
	store := b.NewStore(t, db)
	txm := outboxsql.NewTxManager(db, outboxsql.WithTxLogger(quietLogger))
	return outboxsqltest.Fixture(db, store, txm, txm.InTx)
}

func pingEvent(t testing.TB, opts ...outbox.EnvelopeOption) outbox.Envelope {
	t.Helper()
	e, err := outbox.NewEnvelope(outbox.EventName("Ping"), append([]outbox.EnvelopeOption{outbox.WithJSON([]byte(`{"n":1}`))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestDetectDialectPerBackend(t *testing.T) {
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		db := b.Open(t)
		d, err := outboxsql.DetectDialect(db)
		if err != nil {
			t.Fatal(err)
		}
		if d != b.Dialect {
			t.Fatalf("detected %s for driver %q, want %s", d.Name(), b.DriverName, b.Dialect.Name())
		}
		store, err := outboxsql.Open(db)
		if err != nil || store.Dialect() != b.Dialect {
			t.Fatalf("Open = %v, %v; want a %s store", store, err, b.Dialect.Name())
		}
	})
}

// TestMissingTable: a store whose table was never created fails with an
// error that names the table and says how to create it.
func TestMissingTable(t *testing.T) {
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		ctx := context.Background()
		db := b.Open(t)
		table := outboxsqltest.TableName("outbox_missing")
		store, err := outboxsql.Open(db, outboxsql.WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		txm := outboxsql.NewTxManager(db)
		check := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, sqlstore.ErrNoTable) {
				t.Errorf("%s on a missing table: %v, want an error wrapping ErrNoTable", op, err)
				return
			}
			if msg := err.Error(); !strings.Contains(msg, table) || !strings.Contains(msg, "Migrate") {
				t.Errorf("%s: %q does not name the table and Migrate", op, msg)
			}
			t.Logf("%s: %v", op, err)
		}
		check("Insert", txm.InTx(ctx, func(ctx context.Context) error {
			tx, err := txm.Current(ctx)
			if err != nil {
				return err
			}
			return store.Insert(ctx, tx, time.Now(), "", []outbox.Envelope{pingEvent(t)})
		}))
		_, err = store.Claim(ctx, outbox.ClaimRequest{Owner: "o", Now: time.Now(), Lease: time.Minute, Limit: 10})
		check("Claim", err)
		_, err = store.MarkDone(ctx, "o", []string{"x"}, time.Now())
		check("MarkDone", err)
		_, err = store.Get(ctx, "x")
		check("Get", err)
		_, err = store.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDone, Before: time.Now(), Limit: 10})
		check("Purge", err)
	})
}

// TestSessionTimeZone runs the store suite and a real-clock delayed delivery
// on pools whose database session is in Asia/Tokyo (UTC+9): due events are
// claimed when due, neither nine hours early nor nine hours late.
func TestSessionTimeZone(t *testing.T) {
	if _, off := time.Now().Zone(); off == 0 {
		t.Fatalf("time.Local is %v: the test binary must run in a non-UTC zone", time.Local)
	}
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		dsn, ok := b.ZonedDSN(t)
		if !ok {
			t.Skipf("%s has no session time zone", b.Name)
		}
		db := openDSN(t, b, dsn)
		var zone string
		query := "SHOW TimeZone"
		if b.Dialect == outboxsql.MySQL {
			query = "SELECT @@session.time_zone"
		}
		if err := db.QueryRowContext(context.Background(), query).Scan(&zone); err != nil {
			t.Fatal(err)
		}
		if zone != outboxsqltest.SessionZone && zone != "+09:00" {
			t.Fatalf("session time zone is %q, want %s", zone, outboxsqltest.SessionZone)
		}
		t.Logf("session time zone %s, time.Local %s", zone, time.Local)
		t.Run("StoreSuite", func(t *testing.T) {
			outboxtest.RunStoreSuite(t, func(t *testing.T) outboxtest.Fixture { return fixtureOn(t, b, db) })
		})
		t.Run("DelayedDeliveredOnTime", func(t *testing.T) { delayedOnTime(t, b, db, fixtureOn(t, b, db)) })
	})
}

// delayedOnTime writes an event due in a moment through the real clock and
// checks that the poller delivers it once due, and stores UTC.
func delayedOnTime(t *testing.T, b outboxsqltest.Backend, db *sql.DB, f outboxtest.Fixture) {
	ctx := context.Background()
	var deliveredAt atomic.Int64
	w := startNode(t, f, outbox.Config{PollInterval: 20 * time.Millisecond}, func(context.Context, outbox.Envelope) error {
		deliveredAt.CompareAndSwap(0, time.Now().UnixNano())
		return nil
	})
	due := time.Now().Add(700 * time.Millisecond)
	e := pingEvent(t, outbox.WithAvailableAt(due))
	if err := f.InTx(ctx, func(ctx context.Context) error { _, err := w.Write(ctx, e); return err }); err != nil {
		t.Fatal(err)
	}
	// The stored value is the due instant in UTC, whatever the session zone.
	var stored string
	query := "SELECT to_char(available_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') FROM " + f.Table + " WHERE event_id = $1"
	if b.Dialect == outboxsql.MySQL {
		query = "SELECT CAST(available_at AS CHAR) FROM " + f.Table + " WHERE event_id = ?"
	}
	if err := db.QueryRowContext(ctx, query, e.ID()).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if want := due.UTC().Truncate(time.Microsecond).Format("2006-01-02 15:04:05.000000"); stored != want {
		t.Fatalf("available_at stored as %s, want UTC %s", stored, want)
	}
	outboxtest.Eventually(t, 20*time.Second, "the delayed event delivered", func() bool { return deliveredAt.Load() != 0 })
	at := time.Unix(0, deliveredAt.Load())
	t.Logf("due %s, delivered %s (%+v after due)", due.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano), at.Sub(due))
	if at.Before(due) {
		t.Fatalf("delivered %v before it was due", due.Sub(at))
	}
	if late := at.Sub(due); late > 10*time.Second {
		t.Fatalf("delivered %v late", late)
	}
}

// startNode starts a Client on f with cfg and fn as the listener of Ping
// events; it is closed at cleanup.
func startNode(t *testing.T, f outboxtest.Fixture, cfg outbox.Config, fn func(context.Context, outbox.Envelope) error) *outbox.Client {
	t.Helper()
	cfg.Store, cfg.TxContext, cfg.Logger = f.Store, f.TxContext, quietLogger
	c, err := outbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Handle(outbox.EventName("Ping"), fn); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("client close: %v", err)
		}
	})
	return c
}

// TestConcurrentPollers: four nodes (dispatcher + poller each) share a
// backlog of 10,000 events; every event is delivered exactly once.
func TestConcurrentPollers(t *testing.T) {
	const events, nodes = 10_000, 4
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		if !b.IsServer() {
			t.Skip("several nodes share a database server; an embedded database serves one process")
		}
		ctx := context.Background()
		f := fixtureOn(t, b, b.Open(t))
		start := time.Now()
		for i := 0; i < events; i += 1000 {
			batch := make([]outbox.Envelope, 1000)
			for j := range batch {
				batch[j] = pingEvent(t)
			}
			if err := f.InTx(ctx, func(ctx context.Context) error {
				tx, err := f.TxContext.Current(ctx)
				if err != nil {
					return err
				}
				return f.Store.Insert(ctx, tx, time.Now(), "", batch)
			}); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("wrote %d events in %v", events, time.Since(start).Round(time.Millisecond))
		l := outboxtest.NewLedger()
		perNode := make([]atomic.Int64, nodes)
		start = time.Now()
		for i := range nodes {
			startNode(t, f, outbox.Config{Mode: outbox.ModePollerOnly, PollInterval: 10 * time.Millisecond, PollBatchSize: 100},
				func(_ context.Context, e outbox.Envelope) error {
					perNode[i].Add(1)
					l.Record(e.ID())
					return nil
				})
		}
		outboxtest.Eventually(t, 90*time.Second, "every event DONE", func() bool {
			n, err := f.Store.Count(ctx, outbox.Query{Statuses: []outbox.Status{outbox.StatusDone}})
			if err != nil {
				t.Fatal(err)
			}
			return n == events
		})
		elapsed := time.Since(start)
		total, distinct, dups := l.Summary()
		t.Logf("pollers=%d written=%d delivered=%d distinct=%d duplicates=%d per-node=[%d %d %d %d] in %v (%.0f events/s)",
			nodes, events, total, distinct, dups, perNode[0].Load(), perNode[1].Load(), perNode[2].Load(), perNode[3].Load(),
			elapsed.Round(time.Millisecond), float64(events)/elapsed.Seconds())
		if distinct != events || dups != 0 {
			t.Fatalf("delivered %d distinct events with %d duplicates, want %d exactly once", distinct, dups, events)
		}
	})
}

// TestMySQLDSNOptions: a pool with a loc other than UTC fails the claim
// with an error that names the option, and claims nothing; writes through
// such a pool still store UTC. (A pool without parseTime=true works: see
// TestMySQLWithoutParseTime.)
func TestMySQLDSNOptions(t *testing.T) {
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		if b.Dialect != outboxsql.MySQL {
			t.Skip("MySQL DSN options")
		}
		ctx := context.Background()
		good := b.Open(t)
		store := b.NewStore(t, good)
		dsn := b.DSN(t)
		for _, tc := range []struct {
			name, dsn, want string
		}{
			{"LocNotUTC", withoutDSNParam(dsn, "loc") + "&loc=Asia%2FTokyo", "loc"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				badDB := openDSN(t, b, tc.dsn)
				bad, err := outboxsql.Open(badDB, outboxsql.WithTable(store.Table()))
				if err != nil {
					t.Fatal(err)
				}
				now := time.Now().UTC().Truncate(time.Microsecond)
				e := pingEvent(t)
				txm := outboxsql.NewTxManager(badDB)
				if err := txm.InTx(ctx, func(ctx context.Context) error {
					tx, err := txm.Current(ctx)
					if err != nil {
						return err
					}
					return bad.Insert(ctx, tx, now, "", []outbox.Envelope{e})
				}); err != nil {
					t.Fatalf("insert through %s: %v", tc.name, err)
				}
				_, err = bad.Claim(ctx, outbox.ClaimRequest{Owner: "o", Now: now.Add(time.Second), Lease: time.Minute, Limit: 10})
				if err == nil || !errors.Is(err, outbox.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("claim through a pool %s: %v; want an ErrInvalidConfig naming %s", tc.name, err, tc.want)
				}
				t.Logf("claim: %v", err)
				if _, err := bad.Stats(ctx, time.Now()); err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("stats: %v; want an error naming %s", err, tc.want)
				}
				recs, err := store.List(ctx, outbox.Query{AfterID: "", Limit: 1000})
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range recs {
					if r.ID != e.ID() {
						continue
					}
					if r.Status != outbox.StatusNew || r.LockedBy != "" {
						t.Errorf("the failed claim changed the row: %v locked by %q", r.Status, r.LockedBy)
					}
					if !r.CreatedAt.Equal(now) {
						t.Errorf("created_at written through %s reads %v, want %v", tc.name, r.CreatedAt, now)
					}
				}
			})
		}
	})
}

// withoutDSNParam removes a parameter from a go-sql-driver/mysql DSN.
func withoutDSNParam(dsn, name string) string {
	base, query, _ := strings.Cut(dsn, "?")
	var keep []string
	for _, kv := range strings.Split(query, "&") {
		if k, _, _ := strings.Cut(kv, "="); kv != "" && !strings.EqualFold(k, name) {
			keep = append(keep, kv)
		}
	}
	return base + "?" + strings.Join(append(keep, "timeout=10s"), "&")
}
