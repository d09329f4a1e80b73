package idempotencytest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/idempotency"
	"github.com/go-outbox/outbox/core/outboxtest"
	"github.com/go-outbox/outbox/core/sqlstore"
)

// The suite's clock runs in a non-UTC zone: the records must store and
// compare instants.
var (
	zoneEast = time.FixedZone("X", 9*3600)
	t0       = time.Date(2024, 5, 6, 7, 8, 9, 123456000, zoneEast)
)

// scope is the scope of the suite's commands unless a test names another.
const scope = "POST /orders"

// errCommand is the error of a command that fails on purpose.
var errCommand = errors.New("idempotencytest: the command failed")

// RunSuite checks the idempotency keys on one database and transaction
// style: the first request with a key runs the command and records its
// response, which every later request with the key and the same
// fingerprint gets back without the command running again; another
// fingerprint is ErrMismatch; concurrent requests with one key run the
// command once, the others replaying its response or failing with
// ErrInFlight; a request that waits longer than Config.Wait fails with
// ErrInFlight; a server error, a failing or panicking command, a rolled-
// back transaction or savepoint leave no record, so the key runs again;
// scopes, keys and fingerprints are compared byte for byte; purges delete
// records by age, also through the outbox's PurgeScheduler; a missing
// table is reported as sqlstore.ErrNoTable; the command's business rows,
// its outbox events and its record commit together; and the Middleware,
// in front of a real HTTP server, answers replays, 422, 409 and 5xx as
// documented.
//
// newFixture is called once per subtest and must return a fresh table
// (the idempotency table is named after it, with the suffix "_idem");
// Store must be a *sqlstore.Store, InsertBusiness must accept names of up
// to 64 characters, and Exec is used to drop the idempotency table at
// cleanup. Subtests run in parallel.
func RunSuite(t *testing.T, newFixture func(t *testing.T) outboxtest.AdapterFixture) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, f outboxtest.AdapterFixture)
	}{
		{"FirstRequestRecords", first},
		{"ReplayDoesNotRunTheCommand", replay},
		{"OtherFingerprintIsMismatch", mismatch},
		{"ConcurrentDuplicatesRunOnce", concurrent},
		{"InFlightWaitsOrConflicts", inFlight},
		{"ServerErrorNotRecorded", serverError},
		{"FailedCommandLeavesNoRecord", failedCommand},
		{"RollbackLeavesNoRecord", rollback},
		{"SavepointRollbackLeavesNoRecord", savepoint},
		{"NoTransaction", noTransaction},
		{"KeysComparedByteForByte", byteForByte},
		{"Purge", purge},
		{"MigrateAndSchema", migrate},
		{"MissingTable", missingTable},
		{"OutboxWriteInTheSameTransaction", withOutbox},
		{"Middleware", middleware},
		{"UnrecordedStatusesRunAgain", unrecorded},
		{"LargeResponseRecordedWithout", largeResponse},
		{"MiddlewareKeysPerCaller", perCaller},
		{"MiddlewareLargeResponse", middlewareLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newFixture(t))
		})
	}
}

// env is one subtest's fixture with an idempotency table next to its
// store's table.
type env struct {
	f     outboxtest.AdapterFixture
	store *sqlstore.Store
	keys  *idempotency.SQLStore
	guard *idempotency.Guard
	clock *outboxtest.Clock
	runs  atomic.Int64 // runs of the commands of command
}

func newEnv(t *testing.T, f outboxtest.AdapterFixture) *env {
	t.Helper()
	store, ok := f.Store.(*sqlstore.Store)
	if !ok {
		t.Fatalf("idempotencytest: the fixture's Store is a %T, want a *sqlstore.Store", f.Store)
	}
	e := &env{f: f, store: store, clock: outboxtest.NewClock(t0)}
	e.keys = e.newKeys(t, f.Table+"_idem", true)
	e.guard = e.newGuard(t, f.TxContext, e.keys, 30*time.Second)
	return e
}

// newKeys returns the Store of table, migrated when migrate is set; the
// table is dropped at cleanup.
func (e *env) newKeys(t *testing.T, table string, migrate bool) *idempotency.SQLStore {
	t.Helper()
	keys, err := idempotency.NewSQLStore(e.store, table)
	if err != nil {
		t.Fatal(err)
	}
	if e.f.Exec != nil {
		t.Cleanup(func() { _ = e.f.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })
	}
	if migrate {
		if err := keys.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func (e *env) newGuard(t *testing.T, tc outbox.TxContext, keys idempotency.Store, wait time.Duration) *idempotency.Guard {
	t.Helper()
	g, err := idempotency.New(idempotency.Config{Store: keys, TxContext: tc, Wait: wait, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// body is the response body of the suite's commands: binary, to check that
// bodies are kept byte for byte.
func body(name string) []byte { return append([]byte("created "+name+" \x00\xff"), 0) }

// command returns a command that inserts the business row name and answers
// 201 with a Location header and body(name).
func (e *env) command(name string) func(ctx context.Context) (idempotency.Response, error) {
	return func(ctx context.Context) (idempotency.Response, error) {
		e.runs.Add(1)
		if err := e.f.InsertBusiness(ctx, name); err != nil {
			return idempotency.Response{}, err
		}
		h := http.Header{"Location": {"/orders/" + name}, "Content-Type": {"application/octet-stream"}}
		return idempotency.Response{Status: http.StatusCreated, Header: h, Body: body(name)}, nil
	}
}

// do runs Do with g in a transaction of its own, committed unless Do fails.
func (e *env) do(g *idempotency.Guard, scope, key, fingerprint string, fn func(ctx context.Context) (idempotency.Response, error)) (idempotency.Outcome, error) {
	var out idempotency.Outcome
	err := e.f.InTx(context.Background(), func(ctx context.Context) error {
		var err error
		out, err = g.Do(ctx, scope, key, fingerprint, fn)
		return err
	})
	return out, err
}

// ran runs the command name with key and fails t unless it ran and its
// response was recorded.
func (e *env) ran(t testing.TB, key, name string) {
	t.Helper()
	before := e.runs.Load()
	out, err := e.do(e.guard, scope, key, fingerprint(key), e.command(name))
	if err != nil || out.Replayed || e.runs.Load() != before+1 {
		t.Fatalf("%s: %+v, %v (the command ran %d times); want it run", key, out, err, e.runs.Load()-before)
	}
}

// replayed runs the command with key and fails t unless the response of
// the command name was replayed without the command running.
func (e *env) replayed(t testing.TB, key, name string) {
	t.Helper()
	before := e.runs.Load()
	out, err := e.do(e.guard, scope, key, fingerprint(key), e.command("never-"+name))
	if err != nil || !out.Replayed || e.runs.Load() != before {
		t.Fatalf("%s: replayed %v, %v (the command ran %d times); want a replay", key, out.Replayed, err, e.runs.Load()-before)
	}
	wantResponse(t, key, out.Response, name)
}

// fingerprint is the fingerprint of the suite's requests with key.
func fingerprint(key string) string {
	return idempotency.Fingerprint(http.MethodPost, "/orders", []byte(key))
}

// wantResponse fails t unless r is the response of the command name.
func wantResponse(t testing.TB, what string, r idempotency.Response, name string) {
	t.Helper()
	if err := responseErr(r, name); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// responseErr returns an error unless r is the response of the command name.
func responseErr(r idempotency.Response, name string) error {
	if r.Status != http.StatusCreated || r.Header.Get("Location") != "/orders/"+name ||
		r.Header.Get("Content-Type") != "application/octet-stream" || !bytes.Equal(r.Body, body(name)) {
		return fmt.Errorf("response %d %v %q; want the response of %s", r.Status, r.Header, r.Body, name)
	}
	return nil
}

// wantRows fails t unless the committed business rows are want, in any order.
func (e *env) wantRows(t testing.TB, want ...string) {
	t.Helper()
	got := e.f.BusinessRows(t)
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("business rows %q, want %q", got, want)
	}
}

func first(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	out, err := e.do(e.guard, scope, "k1", fingerprint("k1"), e.command("o-1"))
	if err != nil || out.Replayed {
		t.Fatalf("first request: %+v, %v", out, err)
	}
	wantResponse(t, "first request", out.Response, "o-1")
	e.wantRows(t, "o-1")
	e.replayed(t, "k1", "o-1")
}

func replay(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	e.ran(t, "k1", "o-1")
	for range 3 {
		e.replayed(t, "k1", "o-1")
	}
	e.ran(t, "k2", "o-2")
	e.replayed(t, "k2", "o-2")
	e.replayed(t, "k1", "o-1")
	if e.runs.Load() != 2 {
		t.Fatalf("the commands ran %d times, want 2", e.runs.Load())
	}
	e.wantRows(t, "o-1", "o-2")
}

func mismatch(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	e.ran(t, "k1", "o-1")
	out, err := e.do(e.guard, scope, "k1", "another request", e.command("o-2"))
	if !errors.Is(err, idempotency.ErrMismatch) || out.Replayed || e.runs.Load() != 1 {
		t.Fatalf("another fingerprint: %+v, %v (runs %d); want ErrMismatch", out, err, e.runs.Load())
	}
	// The same key in another scope is another command.
	if out, err := e.do(e.guard, "PUT /orders", "k1", "another request", e.command("o-3")); err != nil || out.Replayed {
		t.Fatalf("the key in another scope: %+v, %v; want it run", out, err)
	}
	e.replayed(t, "k1", "o-1")
	e.wantRows(t, "o-1", "o-3")
}

// concurrent sends each of several keys from several goroutines at once,
// each request in its own transaction and retried when it fails otherwise
// than by ErrInFlight (a deadlock, a busy database): each key's command runs
// exactly once, and every other request replays its response or fails
// with ErrInFlight.
func concurrent(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	const keys, copies, maxAttempts = 4, 6, 50
	var (
		mu       sync.Mutex
		ran      = map[string]int{}
		replays  atomic.Int64
		inFlight atomic.Int64
		errs     []error
		start    = make(chan struct{})
		wg       sync.WaitGroup
	)
	for i := range keys {
		key := fmt.Sprintf("key-%02d", i)
		for c := range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for attempt := 1; ; attempt++ {
					out, err := e.do(e.guard, scope, key, "fp", func(ctx context.Context) (idempotency.Response, error) {
						mu.Lock()
						ran[key]++
						mu.Unlock()
						return e.command(key)(ctx)
					})
					switch {
					case err == nil && out.Replayed:
						replays.Add(1)
						if err := responseErr(out.Response, key); err != nil {
							mu.Lock()
							errs = append(errs, fmt.Errorf("%s copy %d: %w", key, c, err))
							mu.Unlock()
						}
						return
					case err == nil:
						return
					case errors.Is(err, idempotency.ErrInFlight):
						inFlight.Add(1)
						return
					case errors.Is(err, idempotency.ErrMismatch):
						mu.Lock()
						errs = append(errs, fmt.Errorf("%s copy %d: %w", key, c, err))
						mu.Unlock()
						return
					}
					if attempt == maxAttempts {
						mu.Lock()
						errs = append(errs, fmt.Errorf("%s copy %d: %d attempts, the last: %w", key, c, attempt, err))
						mu.Unlock()
						return
					}
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range keys {
		key := fmt.Sprintf("key-%02d", i)
		want = append(want, key)
		if ran[key] != 1 {
			t.Errorf("%s: the command ran %d times, want once", key, ran[key])
		}
	}
	if got := replays.Load() + inFlight.Load(); got != keys*(copies-1) {
		t.Errorf("%d replays and %d in flight, want %d together", replays.Load(), inFlight.Load(), keys*(copies-1))
	}
	e.wantRows(t, want...)
}

// inFlight holds the first request of a key inside its command while a
// second request with the key starts. With a short Config.Wait the second
// fails with ErrInFlight; with a long one it waits for the first and then
// replays its response (the first committed) or runs the command itself
// (the first rolled back). SQLite runs one write transaction at a time:
// there the second cannot begin before the first ends, and replays.
func inFlight(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	arr := outboxtest.NewArrivals(f.TxContext)
	serialized := e.store.Dialect() == sqlstore.SQLite
	patient := e.newGuard(t, arr, e.keys, 30*time.Second)
	impatient := e.newGuard(t, arr, e.keys, 300*time.Millisecond)
	for _, tc := range []struct {
		name         string
		second       *idempotency.Guard
		firstCommits bool
	}{{"conflict", impatient, true}, {"commit", patient, true}, {"rollback", patient, false}} {
		key := "key-" + tc.name
		ctx := outboxtest.WithArrival(context.Background(), key)
		inside, release := make(chan struct{}), make(chan struct{})
		firstDone := make(chan error, 1)
		go func() {
			firstDone <- f.InTx(ctx, func(ctx context.Context) error {
				_, err := patient.Do(ctx, scope, key, "fp", func(ctx context.Context) (idempotency.Response, error) {
					resp, err := e.command("first-" + key)(ctx)
					close(inside)
					if !serialized {
						<-release
					}
					if err == nil && !tc.firstCommits {
						err = errCommand
					}
					return resp, err
				})
				return err
			})
		}()
		<-inside
		if !serialized && tc.second == patient {
			// The first ends once the second is about to record the key
			// (bounded, so that a pool too small for both transactions
			// cannot hang the test).
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				arr.Wait(wctx, key, 2)
				cancel()
				close(release)
			}()
		}
		before := e.runs.Load()
		var out idempotency.Outcome
		err := f.InTx(ctx, func(ctx context.Context) error {
			var err error
			out, err = tc.second.Do(ctx, scope, key, "fp", e.command("second-"+key))
			return err
		})
		if !serialized && tc.second == impatient {
			close(release)
		}
		firstErr := <-firstDone
		if tc.firstCommits && firstErr != nil || !tc.firstCommits && !errors.Is(firstErr, errCommand) {
			t.Fatalf("%s: first request = %v", tc.name, firstErr)
		}
		runs := e.runs.Load() - before
		switch {
		case tc.second == impatient && !serialized:
			if !errors.Is(err, idempotency.ErrInFlight) || runs != 0 {
				t.Fatalf("%s: second request while the first runs = %v (the command ran %d times); want ErrInFlight", tc.name, err, runs)
			}
			e.replayedWith(t, key, "first-"+key)
		case tc.firstCommits:
			if err != nil || !out.Replayed || runs != 0 {
				t.Fatalf("%s: second request after the first committed = %+v, %v (the command ran %d times); want a replay", tc.name, out, err, runs)
			}
			wantResponse(t, tc.name, out.Response, "first-"+key)
		default:
			if err != nil || out.Replayed || runs != 1 {
				t.Fatalf("%s: second request after the first rolled back = %+v, %v (the command ran %d times); want it run", tc.name, out, err, runs)
			}
		}
	}
	e.wantRows(t, "first-key-conflict", "first-key-commit", "second-key-rollback")
}

// replayedWith is replayed for a key whose fingerprint is "fp".
func (e *env) replayedWith(t testing.TB, key, name string) {
	t.Helper()
	out, err := e.do(e.guard, scope, key, "fp", e.command("never"))
	if err != nil || !out.Replayed {
		t.Fatalf("%s: %+v, %v; want a replay", key, out, err)
	}
	wantResponse(t, key, out.Response, name)
}

func serverError(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	unavailable := func(name string) func(ctx context.Context) (idempotency.Response, error) {
		return func(ctx context.Context) (idempotency.Response, error) {
			e.runs.Add(1)
			if err := f.InsertBusiness(ctx, name); err != nil {
				return idempotency.Response{}, err
			}
			return idempotency.Response{Status: http.StatusServiceUnavailable, Body: []byte("try later")}, nil
		}
	}
	// The caller returns the error: the command's writes roll back too.
	out, err := e.do(e.guard, scope, "k1", fingerprint("k1"), unavailable("rolled back"))
	if !errors.Is(err, idempotency.ErrNotRecorded) || out.Response.Status != http.StatusServiceUnavailable || string(out.Response.Body) != "try later" {
		t.Fatalf("a 503: %+v, %v; want ErrNotRecorded with the response", out, err)
	}
	e.wantRows(t)
	// The caller commits anyway: the key is not recorded.
	err = f.InTx(context.Background(), func(ctx context.Context) error {
		_, err := e.guard.Do(ctx, scope, "k2", fingerprint("k2"), unavailable("committed"))
		if !errors.Is(err, idempotency.ErrNotRecorded) {
			return fmt.Errorf("do = %w, want ErrNotRecorded", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.ran(t, "k1", "o-1")
	e.ran(t, "k2", "o-2")
	e.replayed(t, "k1", "o-1")
	e.replayed(t, "k2", "o-2")
	e.wantRows(t, "committed", "o-1", "o-2")
}

func failedCommand(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	// The caller ignores the command's error and commits: the key must
	// not stay recorded without the command's effect.
	var derr error
	err := f.InTx(context.Background(), func(ctx context.Context) error {
		_, derr = e.guard.Do(ctx, scope, "k1", fingerprint("k1"), func(context.Context) (idempotency.Response, error) {
			return idempotency.Response{}, errCommand
		})
		return nil
	})
	if err != nil || !errors.Is(derr, errCommand) {
		t.Fatalf("a failing command: %v (commit: %v); want the command's error", derr, err)
	}
	e.ran(t, "k1", "o-1")
	// A panicking command, recovered by the caller, which commits.
	var recovered any
	err = f.InTx(context.Background(), func(ctx context.Context) error {
		func() {
			defer func() { recovered = recover() }()
			_, _ = e.guard.Do(ctx, scope, "k2", fingerprint("k2"), func(context.Context) (idempotency.Response, error) { panic("command bug") })
		}()
		return nil
	})
	if err != nil || recovered != "command bug" {
		t.Fatalf("a panicking command: recovered %v, commit %v", recovered, err)
	}
	e.ran(t, "k2", "o-2")
	e.replayed(t, "k1", "o-1")
	e.replayed(t, "k2", "o-2")
	e.wantRows(t, "o-1", "o-2")
}

func rollback(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	errLater := errors.New("a later step of the transaction failed")
	err := f.InTx(context.Background(), func(ctx context.Context) error {
		if _, err := e.guard.Do(ctx, scope, "k1", fingerprint("k1"), e.command("rolled back")); err != nil {
			return err
		}
		return errLater
	})
	if !errors.Is(err, errLater) {
		t.Fatalf("InTx = %v, want the transaction's own error", err)
	}
	e.wantRows(t)
	e.ran(t, "k1", "o-1")
	e.replayed(t, "k1", "o-1")
	e.wantRows(t, "o-1")
}

func savepoint(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	errInner := errors.New("the nested transaction failed")
	err := f.InTx(context.Background(), func(ctx context.Context) error {
		if err := f.InsertBusiness(ctx, "outer"); err != nil {
			return err
		}
		err := f.InTx(ctx, func(ctx context.Context) error {
			if _, err := e.guard.Do(ctx, scope, "k1", fingerprint("k1"), e.command("inner")); err != nil {
				return err
			}
			return errInner
		})
		if !errors.Is(err, errInner) {
			return fmt.Errorf("nested InTx = %w, want its own error", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.wantRows(t, "outer")
	e.ran(t, "k1", "o-1")
	e.replayed(t, "k1", "o-1")
	e.wantRows(t, "outer", "o-1")
}

func noTransaction(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	out, err := e.guard.Do(context.Background(), scope, "k1", fingerprint("k1"), e.command("o-1"))
	if out.Replayed || e.runs.Load() != 0 || !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("Do without a transaction = %+v, %v (runs %d); want ErrNoTransaction", out, err, e.runs.Load())
	}
	e.ran(t, "k1", "o-1")
}

func byteForByte(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	long := strings.Repeat("é", 127) + "x" // 255 bytes
	keys := []string{"ab", "Ab", "AB", "ab ", " ab", "ab\t", "äb", "a\u0308b", long}
	for i, key := range keys {
		e.ran(t, key, fmt.Sprintf("row-%d", i))
	}
	for i, key := range keys {
		e.replayed(t, key, fmt.Sprintf("row-%d", i))
	}
	// Scopes too, and the longest one.
	for i, s := range []string{"", "ab ", "AB", long} {
		if out, err := e.do(e.guard, s, "ab", fingerprint("ab"), e.command(fmt.Sprintf("scope-%d", i))); err != nil || out.Replayed {
			t.Fatalf("key ab in scope %q: %+v, %v; want it run", s, out, err)
		}
	}
	for _, k := range [][3]string{{scope, "", "fp"}, {scope, long + "y", "fp"}, {scope, "bad\xff", "fp"}, {long + "y", "k", "fp"},
		{scope, "k", ""}, {scope, "k", strings.Repeat("f", idempotency.MaxFingerprintLen+1)}} {
		_, err := e.do(e.guard, k[0], k[1], k[2], func(context.Context) (idempotency.Response, error) {
			return idempotency.Response{}, errors.New("must not run")
		})
		if !errors.Is(err, idempotency.ErrInvalidKey) {
			t.Errorf("Do(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
	if got := len(f.BusinessRows(t)); got != len(keys)+4 {
		t.Fatalf("%d business rows, want %d", got, len(keys)+4)
	}
}

func purge(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	ctx := context.Background()
	e.ran(t, "a", "a1")
	e.ran(t, "b", "b1")
	e.clock.Advance(time.Hour)
	e.ran(t, "c", "c1")
	// Now t0+1h: the cutoff t0+30m takes a and b.
	if n, err := e.guard.Purge(ctx, 30*time.Minute); n != 2 || err != nil {
		t.Fatalf("Purge = %d, %v; want 2", n, err)
	}
	if n, err := e.guard.Purge(ctx, 30*time.Minute); n != 0 || err != nil {
		t.Fatalf("second Purge = %d, %v; want 0", n, err)
	}
	if n, err := e.guard.Purger().Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDead, Before: t0.Add(24 * time.Hour), Limit: 10}); n != 0 || err != nil {
		t.Fatalf("Purger().Purge(DEAD) = %d, %v; want 0", n, err)
	}
	e.ran(t, "a", "a2") // purged: runs again
	e.replayed(t, "c", "c1")
	// The outbox's scheduler, one retention later: at t0+3h, the cutoff
	// t0+1h30 takes c and a (both at t0+1h).
	e.clock.Advance(2 * time.Hour)
	sched, err := outbox.NewPurgeScheduler(outbox.PurgeConfig{Purger: e.guard.Purger(), Retention: 90 * time.Minute, BatchSize: 1, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := sched.PurgeOnce(ctx); n != 2 || err != nil {
		t.Fatalf("PurgeOnce = %d, %v; want 2", n, err)
	}
	e.ran(t, "c", "c2")
	e.wantRows(t, "a1", "b1", "c1", "a2", "c2")
}

func migrate(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	e.ran(t, "k1", "o-1")
	if err := e.keys.Migrate(context.Background()); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	e.replayed(t, "k1", "o-1")
	schema := e.keys.Schema()
	if len(schema) == 0 || !strings.Contains(schema[0], e.keys.Table()) {
		t.Fatalf("Schema does not create %s: %q", e.keys.Table(), schema)
	}
}

func missingTable(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	keys := e.newKeys(t, f.Table+"_absent", false)
	g := e.newGuard(t, f.TxContext, keys, 0)
	_, err := e.do(g, scope, "k1", "fp", e.command("o-1"))
	if e.runs.Load() != 0 || !errors.Is(err, sqlstore.ErrNoTable) || !strings.Contains(err.Error(), keys.Table()) {
		t.Fatalf("Do on a missing table = %v (runs %d); want ErrNoTable naming the table", err, e.runs.Load())
	}
	if _, err := g.Purge(context.Background(), time.Hour); !errors.Is(err, sqlstore.ErrNoTable) {
		t.Fatalf("Purge on a missing table = %v, want ErrNoTable", err)
	}
}

// withOutbox is a command that writes a business row and an outbox event:
// the record, the row and the event commit together, a replay writes
// nothing, and a rollback takes all three.
func withOutbox(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	client, err := outbox.New(outbox.Config{Store: f.Store, TxContext: f.TxContext, Mode: outbox.ModeWriterOnly})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	place := func(key string, fail bool) (idempotency.Outcome, []string, error) {
		var written []string
		var out idempotency.Outcome
		err := f.InTx(context.Background(), func(ctx context.Context) error {
			var err error
			out, err = e.guard.Do(ctx, scope, key, fingerprint(key), func(ctx context.Context) (idempotency.Response, error) {
				resp, err := e.command("order-" + key)(ctx)
				if err != nil {
					return resp, err
				}
				ev, err := outbox.NewEnvelope(outbox.EventName("OrderPlaced"), outbox.WithJSON([]byte(`{"order":"`+key+`"}`)))
				if err != nil {
					return resp, err
				}
				written, err = client.Write(ctx, ev)
				return resp, err
			})
			if err == nil && fail {
				err = errCommand
			}
			return err
		})
		return out, written, err
	}
	if out, written, err := place("k1", false); err != nil || out.Replayed || len(written) != 1 {
		t.Fatalf("first request: %+v, %v, wrote %v", out, err, written)
	}
	if out, written, err := place("k1", false); err != nil || !out.Replayed || len(written) != 0 {
		t.Fatalf("retry: %+v, %v, wrote %v; want a replay writing nothing", out, err, written)
	}
	if _, _, err := place("k2", true); !errors.Is(err, errCommand) {
		t.Fatalf("rolled back request: %v", err)
	}
	if n, err := f.Store.Count(context.Background(), outbox.Query{}); n != 1 || err != nil {
		t.Fatalf("%d outbox rows (%v), want 1", n, err)
	}
	if out, written, err := place("k2", false); err != nil || out.Replayed || len(written) != 1 {
		t.Fatalf("retry of the rolled-back request: %+v, %v, wrote %v; want it run", out, err, written)
	}
	e.wantRows(t, "order-k1", "order-k2")
}

// middleware serves the Middleware from a real HTTP server in front of a
// handler that writes a business row in the request's transaction.
func middleware(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	var runs atomic.Int64
	mw, err := idempotency.Middleware(idempotency.MiddlewareConfig{
		Guard: e.newGuard(t, f.TxContext, e.keys, 30*time.Second), InTx: f.InTx, Caller: testCaller,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /orders", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		name, _ := io.ReadAll(r.Body)
		if err := f.InsertBusiness(r.Context(), string(name)); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if strings.HasPrefix(string(name), "fail") {
			http.Error(w, "unavailable", http.StatusServiceUnavailable) // rolls the row back
			return
		}
		w.Header().Set("Location", "/orders/"+string(name))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"order":%q}`, name)
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	post := func(key, name string) (int, http.Header, string) {
		a, err := send(srv, key, "", name)
		if err != nil {
			t.Error(err)
		}
		return a.status, a.header, a.body
	}
	status, h, b := post("k1", "o-1")
	if status != http.StatusCreated || h.Get(idempotency.ReplayedHeader) != "" || b != `{"order":"o-1"}` {
		t.Fatalf("first request: %d %v %s", status, h, b)
	}
	for range 2 {
		status, h, b = post("k1", "o-1")
		if status != http.StatusCreated || h.Get(idempotency.ReplayedHeader) != "true" || h.Get("Location") != "/orders/o-1" ||
			h.Get("Content-Type") != "application/json" || b != `{"order":"o-1"}` || runs.Load() != 1 {
			t.Fatalf("retry: %d %v %s (runs %d); want the replayed 201", status, h, b, runs.Load())
		}
	}
	if status, _, _ = post("k1", "o-2"); status != http.StatusUnprocessableEntity || runs.Load() != 1 {
		t.Fatalf("the key with another body: %d (runs %d); want 422", status, runs.Load())
	}
	if status, _, _ = post("k2", "fail-1"); status != http.StatusServiceUnavailable {
		t.Fatalf("a 503: %d", status)
	}
	if status, _, _ = post("k2", "fail-2"); status != http.StatusServiceUnavailable || runs.Load() != 3 {
		t.Fatalf("the 503's key again: %d (runs %d); want the handler run again", status, runs.Load())
	}
	// Concurrent requests with one key: the handler runs once; the others
	// replay or are answered 409 (500s, a deadlock or a busy database,
	// are retried as a client would).
	const copies = 6
	var wg sync.WaitGroup
	statuses := make([]int, copies)
	for i := range copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if statuses[i], _, _ = post("k3", "o-3"); statuses[i] != http.StatusInternalServerError {
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusCreated && s != http.StatusConflict {
			t.Errorf("concurrent request %d: %d, want 201 or 409", i, s)
		}
	}
	if runs.Load() != 4 {
		t.Fatalf("the handler ran %d times, want 4", runs.Load())
	}
	e.wantRows(t, "o-1", "o-3")
}

// callerHeader carries the suite's caller: the stand-in for an
// authentication in front of the Middleware.
const callerHeader = "X-Test-Caller"

// errNoCaller is testCaller's error for a request without a caller.
var errNoCaller = errors.New("idempotencytest: no caller")

// testCaller is the suite's MiddlewareConfig.Caller: the caller named by
// callerHeader, "default" without it, and an error for "!".
func testCaller(r *http.Request) (string, error) {
	switch c := r.Header.Get(callerHeader); c {
	case "":
		return "default", nil
	case "!":
		return "", errNoCaller
	case "-":
		return "", nil
	default:
		return c, nil
	}
}

// unrecorded checks that a response asking for a retry (408, 425, 429), a
// server error and an informational status are not recorded: the key is
// taken back and the command runs again, while a 4xx that is final is
// replayed.
func unrecorded(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	answer := func(status int) func(ctx context.Context) (idempotency.Response, error) {
		return func(ctx context.Context) (idempotency.Response, error) {
			e.runs.Add(1)
			return idempotency.Response{Status: status, Header: http.Header{"Retry-After": {"1"}}, Body: []byte("later")}, nil
		}
	}
	for _, status := range []int{http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusEarlyHints} {
		key := fmt.Sprintf("k-%d", status)
		for range 2 { // the key is not kept: the command runs each time
			before := e.runs.Load()
			out, err := e.do(e.guard, scope, key, fingerprint(key), answer(status))
			if !errors.Is(err, idempotency.ErrNotRecorded) || out.Replayed || out.Response.Status != status || e.runs.Load() != before+1 {
				t.Fatalf("status %d: %+v, %v (the command ran %d times); want ErrNotRecorded and a run", status, out, err, e.runs.Load()-before)
			}
		}
		e.ran(t, key, "o-"+key)
		e.replayed(t, key, "o-"+key)
	}
	// A final client error is recorded and replayed.
	if _, err := e.do(e.guard, scope, "k-409", fingerprint("k-409"), answer(http.StatusConflict)); err != nil {
		t.Fatal(err)
	}
	before := e.runs.Load()
	if out, err := e.do(e.guard, scope, "k-409", fingerprint("k-409"), answer(http.StatusConflict)); err != nil || !out.Replayed || e.runs.Load() != before {
		t.Fatalf("a 409 of the command: %+v, %v; want it replayed", out, err)
	}
}

// largeResponse checks the size limits: a body over MaxResponseBody and
// kept headers over MaxRecordedHeaderBytes reach the first caller whole,
// and are recorded without, with OmittedHeader; the command runs once.
func largeResponse(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	small, err := idempotency.New(idempotency.Config{Store: e.keys, TxContext: f.TxContext, Clock: e.clock, MaxResponseBody: 64})
	if err != nil {
		t.Fatal(err)
	}
	const loc = len("Location")
	for _, tc := range []struct {
		name     string
		g        *idempotency.Guard
		body     int
		location int // the length of the Location header's value
		omitted  string
	}{
		{"at the limit", small, 64, 9, ""},
		{"over the limit", small, 65, 9, "body"},
		{"over the default", e.guard, idempotency.DefaultMaxResponseBody + 1, 9, "body"},
		{"headers at the limit", small, 1, idempotency.MaxRecordedHeaderBytes - loc, ""},
		{"headers over the limit", small, 1, idempotency.MaxRecordedHeaderBytes - loc + 1, "headers"},
		{"both", small, 100, idempotency.MaxRecordedHeaderBytes, "body, headers"},
	} {
		key := "k-" + tc.name
		// The command's own OmittedHeader is neither recorded nor counted.
		resp := idempotency.Response{Status: http.StatusCreated, Body: bytes.Repeat([]byte{0xff}, tc.body),
			Header: http.Header{"Location": {strings.Repeat("x", tc.location)}, idempotency.OmittedHeader: {"forged"}}}
		cmd := func(ctx context.Context) (idempotency.Response, error) {
			n := e.runs.Add(1)
			return resp, f.InsertBusiness(ctx, "large-"+strconv.FormatInt(n, 10))
		}
		out, err := e.do(tc.g, scope, key, "fp", cmd)
		if err != nil || out.Replayed || len(out.Response.Body) != tc.body {
			t.Fatalf("%s: first: %d bytes, %v; want the whole body", tc.name, len(out.Response.Body), err)
		}
		before := e.runs.Load()
		out, err = e.do(tc.g, scope, key, "fp", cmd)
		if err != nil || !out.Replayed || e.runs.Load() != before || out.Response.Status != http.StatusCreated {
			t.Fatalf("%s: retry: %d, %v (ran %d times); want a replay", tc.name, out.Response.Status, err, e.runs.Load()-before)
		}
		if got := out.Response.Header.Get(idempotency.OmittedHeader); got != tc.omitted {
			t.Fatalf("%s: %s = %q, want %q", tc.name, idempotency.OmittedHeader, got, tc.omitted)
		}
		wantBody, wantLocation := tc.body, tc.location
		if strings.Contains(tc.omitted, "body") {
			wantBody = 0
		}
		if strings.Contains(tc.omitted, "headers") {
			wantLocation = 0
		}
		if len(out.Response.Body) != wantBody || len(out.Response.Header.Get("Location")) != wantLocation {
			t.Fatalf("%s: replayed %d bytes, Location of %d bytes; want %d and %d", tc.name, len(out.Response.Body),
				len(out.Response.Header.Get("Location")), wantBody, wantLocation)
		}
	}
	if got := len(f.BusinessRows(t)); got != 6 {
		t.Fatalf("%d business rows, want 6: the commands ran once each", got)
	}
}

// newMiddlewareServer serves the Middleware (with testCaller, and cfg's
// other fields) in front of handler, counting the handler's runs.
func (e *env) newMiddlewareServer(t *testing.T, cfg idempotency.MiddlewareConfig, handler http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	cfg.Guard, cfg.InTx = e.guard, e.f.InTx
	if cfg.Caller == nil {
		cfg.Caller = testCaller
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	mw, err := idempotency.Middleware(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runs := new(atomic.Int64)
	mux := http.NewServeMux()
	mux.Handle("POST /orders", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		handler(w, r)
	})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, runs
}

// answer is one response of the suite's HTTP server, its body read.
type answer struct {
	status int
	header http.Header
	body   string
}

// send sends POST /orders to srv with key, caller (none when empty),
// body and header's name-value pairs, and reads the answer.
func send(srv *httptest.Server, key, caller, body string, header ...string) (answer, error) {
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set(idempotency.DefaultHeader, key)
	if caller != "" {
		header = append(header, callerHeader, caller)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}, err
}

// post is send on the test's goroutine, failing t on an error.
func post(t *testing.T, srv *httptest.Server, key, caller, body string, header ...string) answer {
	t.Helper()
	a, err := send(srv, key, caller, body, header...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// perCaller sends one key from several callers: each caller's use of it
// is its own command; no caller gets another's response, a 422 or a 409
// for it; a request without an authenticated caller runs nothing.
func perCaller(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	inside, release := make(chan struct{}, 1), make(chan struct{})
	srv, runs := e.newMiddlewareServer(t, idempotency.MiddlewareConfig{
		Scope: func(r *http.Request) string { return r.Header.Get("X-Test-Scope") },
	}, func(w http.ResponseWriter, r *http.Request) {
		name, _ := io.ReadAll(r.Body)
		if string(name) == "hold" {
			inside <- struct{}{}
			<-release
		}
		caller := r.Header.Get(callerHeader)
		if err := f.InsertBusiness(r.Context(), fmt.Sprintf("%.20s/%s", caller, name)); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, "%s for %s", name, caller)
	})
	check := func(what string, a answer, status int, replayed bool, body string, wantRuns int64) {
		t.Helper()
		if a.status != status || (a.header.Get(idempotency.ReplayedHeader) == "true") != replayed || a.body != body || runs.Load() != wantRuns {
			t.Fatalf("%s: %d %q (replayed %q), %d runs; want %d %q (replayed %v), %d runs",
				what, a.status, a.body, a.header.Get(idempotency.ReplayedHeader), runs.Load(), status, body, replayed, wantRuns)
		}
	}
	check("alice", post(t, srv, "k1", "alice", "o-1"), http.StatusCreated, false, "o-1 for alice", 1)
	check("bob, alice's key and body", post(t, srv, "k1", "bob", "o-1"), http.StatusCreated, false, "o-1 for bob", 2)
	check("carol, alice's key, another body", post(t, srv, "k1", "carol", "o-2"), http.StatusCreated, false, "o-2 for carol", 3)
	check("alice again", post(t, srv, "k1", "alice", "o-1"), http.StatusCreated, true, "o-1 for alice", 3)
	check("bob again", post(t, srv, "k1", "bob", "o-1"), http.StatusCreated, true, "o-1 for bob", 3)
	check("alice, another body", post(t, srv, "k1", "alice", "o-9"), http.StatusUnprocessableEntity, false,
		"the Idempotency-Key was used for a different request\n", 3)
	// Callers that only differ in case or by an invisible character are
	// other callers.
	check("ALICE", post(t, srv, "k1", "ALICE", "o-1"), http.StatusCreated, false, "o-1 for ALICE", 4)
	check("alice and a zero-width space", post(t, srv, "k1", "alice\u200b", "o-1"), http.StatusCreated, false, "o-1 for alice\u200b", 5)
	// A caller and a scope that join into another pair's text.
	check("caller a, scope b|c", post(t, srv, "k2", "a", "o-3", "X-Test-Scope", "b|c"), http.StatusCreated, false, "o-3 for a", 6)
	check("caller a|b, scope c", post(t, srv, "k2", "a|b", "o-3", "X-Test-Scope", "c"), http.StatusCreated, false, "o-3 for a|b", 7)
	check("caller 1:a, scope b", post(t, srv, "k2", "1:a", "o-3", "X-Test-Scope", "b"), http.StatusCreated, false, "o-3 for 1:a", 8)
	// Callers too long for the scope column are told apart by digest.
	long := strings.Repeat("u", idempotency.MaxKeyLen)
	check("a long caller", post(t, srv, "k3", long, "o-4"), http.StatusCreated, false, "o-4 for "+long, 9)
	check("a longer caller", post(t, srv, "k3", long+"v", "o-4"), http.StatusCreated, false, "o-4 for "+long+"v", 10)
	check("the long caller again", post(t, srv, "k3", long, "o-4"), http.StatusCreated, true, "o-4 for "+long, 10)
	// No authenticated caller: 401, nothing runs.
	check("caller error", post(t, srv, "k1", "!", "o-1"), http.StatusUnauthorized, false, "Unauthorized\n", 10)
	check("empty caller", post(t, srv, "k1", "-", "o-1"), http.StatusUnauthorized, false, "Unauthorized\n", 10)
	// Alice's request in flight does not hold back bob's with the key.
	first := make(chan answer, 1)
	go func() {
		a, _ := send(srv, "k4", "alice", "hold") // an error is a zero answer
		first <- a
	}()
	<-inside
	if e.store.Dialect() != sqlstore.SQLite { // SQLite runs one write transaction at a time
		check("bob while alice's runs", post(t, srv, "k4", "bob", "o-5"), http.StatusCreated, false, "o-5 for bob", 12)
	}
	close(release)
	if a := <-first; a.status != http.StatusCreated || a.body != "hold for alice" {
		t.Fatalf("alice's held request: %d %q", a.status, a.body)
	}
	rows := f.BusinessRows(t)
	if e.store.Dialect() != sqlstore.SQLite && len(rows) != 12 || e.store.Dialect() == sqlstore.SQLite && len(rows) != 11 {
		t.Fatalf("business rows %q: want one per run", rows)
	}
}

// middlewareLarge answers a body larger than MySQL's default
// max_allowed_packet (16 MiB on MariaDB): the first request gets it whole,
// a retry gets the status and headers without the body, and the handler
// runs once.
func middlewareLarge(t *testing.T, f outboxtest.AdapterFixture) {
	e := newEnv(t, f)
	const size = 17 << 20
	srv, runs := e.newMiddlewareServer(t, idempotency.MiddlewareConfig{}, func(w http.ResponseWriter, r *http.Request) {
		if err := f.InsertBusiness(r.Context(), "large"); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Location", "/orders/large")
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(bytes.Repeat([]byte{'x'}, size))
	})
	a := post(t, srv, "k1", "alice", "o-1")
	if a.status != http.StatusCreated || len(a.body) != size || a.header.Get(idempotency.OmittedHeader) != "" || runs.Load() != 1 {
		t.Fatalf("first: %d, %d bytes, %s %q, %d runs; want 201 with the whole body", a.status, len(a.body),
			idempotency.OmittedHeader, a.header.Get(idempotency.OmittedHeader), runs.Load())
	}
	for range 2 {
		a = post(t, srv, "k1", "alice", "o-1")
		if a.status != http.StatusCreated || a.body != "" || a.header.Get(idempotency.ReplayedHeader) != "true" ||
			a.header.Get(idempotency.OmittedHeader) != "body" || a.header.Get("Location") != "/orders/large" || runs.Load() != 1 {
			t.Fatalf("retry: %d, %d bytes, %v, %d runs; want the replayed 201 without its body", a.status, len(a.body), a.header, runs.Load())
		}
	}
	e.wantRows(t, "large")
}
