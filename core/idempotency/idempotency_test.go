package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/idempotency"
	"github.com/go-outbox/outbox/core/outboxmem"
	"github.com/go-outbox/outbox/core/outboxtest"
)

// memKeys is an in-memory Store over the transactions of outboxmem: a
// record becomes visible to other transactions when its own commits, and
// a second transaction reserving the same key waits for the first to end.
type memKeys struct {
	mu sync.Mutex
	m  map[[2]string]*entry
}

type entry struct {
	rec       idempotency.Record
	owner     outbox.Tx
	committed bool
	done      chan struct{}
	once      sync.Once
}

func (e *entry) end() { e.once.Do(func() { close(e.done) }) }

func newMemKeys() *memKeys { return &memKeys{m: map[[2]string]*entry{}} }

func (s *memKeys) Reserve(ctx context.Context, tx outbox.Tx, scope, key, fingerprint string, now time.Time) (idempotency.Record, bool, error) {
	k := [2]string{scope, key}
	for {
		s.mu.Lock()
		e := s.m[k]
		if e == nil {
			e = &entry{rec: idempotency.Record{Scope: scope, Key: key, Fingerprint: fingerprint, CreatedAt: now}, owner: tx, done: make(chan struct{})}
			s.m[k] = e
			s.mu.Unlock()
			tx.AfterCommit(func() {
				s.mu.Lock()
				e.committed, e.owner = true, nil
				s.mu.Unlock()
				e.end()
			})
			tx.AfterRollback(func() {
				s.mu.Lock()
				if s.m[k] == e && !e.committed {
					delete(s.m, k)
				}
				s.mu.Unlock()
				e.end()
			})
			return e.rec, true, nil
		}
		if e.committed || e.owner == tx {
			rec := e.rec
			s.mu.Unlock()
			return rec, false, nil
		}
		s.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return idempotency.Record{}, false, ctx.Err()
		}
	}
}

func (s *memKeys) Complete(_ context.Context, tx outbox.Tx, rec idempotency.Record, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[[2]string{rec.Scope, rec.Key}]
	if e == nil || e.owner != tx {
		return errors.New("memKeys: no reserved record")
	}
	e.rec.Response, e.rec.CompletedAt = rec.Response, now
	return nil
}

func (s *memKeys) Release(_ context.Context, tx outbox.Tx, scope, key string) error {
	s.mu.Lock()
	k := [2]string{scope, key}
	e := s.m[k]
	if e != nil && e.owner == tx {
		delete(s.m, k)
	}
	s.mu.Unlock()
	if e != nil {
		e.end()
	}
	return nil
}

func (s *memKeys) Purge(_ context.Context, before time.Time, limit int) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for k, e := range s.m {
		if int(n) < limit && e.committed && e.rec.CreatedAt.Before(before) {
			delete(s.m, k)
			n++
		}
	}
	return n, nil
}

// env is a Guard on memKeys and outboxmem.
type env struct {
	mem   *outboxmem.Store
	keys  *memKeys
	guard *idempotency.Guard
	clock *outboxtest.Clock
}

var t0 = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

func newEnv(t *testing.T, wait time.Duration) *env {
	t.Helper()
	e := &env{mem: outboxmem.New(), keys: newMemKeys(), clock: outboxtest.NewClock(t0)}
	g, err := idempotency.New(idempotency.Config{Store: e.keys, TxContext: e.mem, Wait: wait, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	e.guard = g
	return e
}

// do runs Do in a transaction of its own, committed unless Do fails.
func (e *env) do(key, fingerprint string, fn func(ctx context.Context) (idempotency.Response, error)) (idempotency.Outcome, error) {
	var out idempotency.Outcome
	err := e.mem.InTx(context.Background(), func(ctx context.Context) error {
		var err error
		out, err = e.guard.Do(ctx, "POST /orders", key, fingerprint, fn)
		return err
	})
	return out, err
}

func TestNewRejects(t *testing.T) {
	mem := outboxmem.New()
	for _, cfg := range []idempotency.Config{
		{TxContext: mem},
		{Store: newMemKeys()},
		{Store: newMemKeys(), TxContext: mem, Wait: -time.Second},
		{Store: newMemKeys(), TxContext: mem, MaxResponseBody: -1},
		{Store: newMemKeys(), TxContext: mem, MaxResponseBody: idempotency.MaxResponseBodyLimit + 1},
	} {
		if g, err := idempotency.New(cfg); g != nil || !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, %v; want ErrInvalidConfig", cfg, g, err)
		}
	}
	g, _ := idempotency.New(idempotency.Config{Store: newMemKeys(), TxContext: mem})
	caller := func(*http.Request) (string, error) { return "u", nil }
	for _, cfg := range []idempotency.MiddlewareConfig{
		{InTx: mem.InTx, Caller: caller},
		{Guard: g, Caller: caller},
		{Guard: g, InTx: mem.InTx}, // no Caller: keys would be shared by every caller
		{Guard: g, InTx: mem.InTx, Caller: caller, MaxBody: -1},
		{Guard: g, InTx: mem.InTx, Caller: caller, Header: "Bad: header"},
		{Guard: g, InTx: mem.InTx, Caller: caller, Header: "X-Key\r\nX-Other"},
	} {
		if mw, err := idempotency.Middleware(cfg); mw != nil || !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("Middleware(%+v) = %v; want ErrInvalidConfig", cfg, err)
		}
	}
}

func TestDo(t *testing.T) {
	e := newEnv(t, 0)
	runs := 0
	created := func(context.Context) (idempotency.Response, error) {
		runs++
		return idempotency.Response{Status: http.StatusCreated, Header: http.Header{"Location": {"/orders/1"}}, Body: []byte("o-1")}, nil
	}
	out, err := e.do("k1", "fp", created)
	if err != nil || out.Replayed || out.Response.Status != http.StatusCreated || runs != 1 {
		t.Fatalf("first Do = %+v, %v (runs %d)", out, err, runs)
	}
	out, err = e.do("k1", "fp", created)
	if err != nil || !out.Replayed || out.Response.Status != http.StatusCreated || string(out.Response.Body) != "o-1" ||
		out.Response.Header.Get("Location") != "/orders/1" || runs != 1 {
		t.Fatalf("replay = %+v, %v (runs %d)", out, err, runs)
	}
	if _, err := e.do("k1", "other", created); !errors.Is(err, idempotency.ErrMismatch) || runs != 1 {
		t.Fatalf("another fingerprint = %v (runs %d), want ErrMismatch", err, runs)
	}
	// A server error is not recorded: the key runs again.
	out, err = e.do("k2", "fp", func(context.Context) (idempotency.Response, error) {
		return idempotency.Response{Status: http.StatusServiceUnavailable}, nil
	})
	if !errors.Is(err, idempotency.ErrNotRecorded) || out.Response.Status != http.StatusServiceUnavailable {
		t.Fatalf("5xx = %+v, %v; want ErrNotRecorded with the response", out, err)
	}
	errFn := errors.New("the command failed")
	if _, err := e.do("k2", "fp", func(context.Context) (idempotency.Response, error) { return idempotency.Response{}, errFn }); !errors.Is(err, errFn) {
		t.Fatalf("failing fn = %v", err)
	}
	func() {
		defer func() { _ = recover() }()
		_, _ = e.do("k2", "fp", func(context.Context) (idempotency.Response, error) { panic("bug") })
	}()
	if out, err := e.do("k2", "fp", created); err != nil || out.Replayed || runs != 2 {
		t.Fatalf("after a 5xx, an error and a panic = %+v, %v (runs %d); want a fresh run", out, err, runs)
	}
	// Status 0 is 200; a status that is no HTTP status fails.
	if out, err := e.do("k3", "fp", func(context.Context) (idempotency.Response, error) { return idempotency.Response{}, nil }); err != nil || out.Response.Status != http.StatusOK {
		t.Fatalf("status 0 = %+v, %v; want 200", out, err)
	}
	if _, err := e.do("k4", "fp", func(context.Context) (idempotency.Response, error) { return idempotency.Response{Status: 42}, nil }); err == nil {
		t.Fatal("status 42 accepted")
	}
	// Twice in one transaction: the second is in flight.
	err = e.mem.InTx(context.Background(), func(ctx context.Context) error {
		_, err := e.guard.Do(ctx, "s", "k5", "fp", func(ctx context.Context) (idempotency.Response, error) {
			_, err := e.guard.Do(ctx, "s", "k5", "fp", created)
			return idempotency.Response{}, err
		})
		return err
	})
	if !errors.Is(err, idempotency.ErrInFlight) {
		t.Fatalf("Do inside Do with one key = %v, want ErrInFlight", err)
	}
	if _, err := e.guard.Do(context.Background(), "s", "k", "fp", created); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("Do without a transaction = %v", err)
	}
	for _, k := range [][3]string{{"s", "", "fp"}, {"s", strings.Repeat("k", 256), "fp"}, {"s", "bad\xff", "fp"},
		{strings.Repeat("s", 256), "k", "fp"}, {"s", "k", ""}, {"s", "k", strings.Repeat("f", 129)}} {
		err := e.mem.InTx(context.Background(), func(ctx context.Context) error {
			_, err := e.guard.Do(ctx, k[0], k[1], k[2], created)
			return err
		})
		if !errors.Is(err, idempotency.ErrInvalidKey) {
			t.Errorf("Do(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
	if runs != 2 {
		t.Fatalf("runs %d, want 2", runs)
	}
	// Purge by age.
	e.clock.Advance(2 * time.Hour)
	if _, err := e.do("k6", "fp", created); err != nil {
		t.Fatal(err)
	}
	if _, err := e.guard.Purge(context.Background(), 0); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("Purge(0) = %v", err)
	}
	if n, err := e.guard.Purge(context.Background(), time.Hour); n != 3 || err != nil { // k1, k2, k3
		t.Fatalf("Purge = %d, %v; want 3", n, err)
	}
	if out, err := e.do("k1", "other", created); err != nil || out.Replayed {
		t.Fatalf("a purged key = %+v, %v; want a fresh run", out, err)
	}
	if n, _ := e.guard.Purger().Purge(context.Background(), outbox.PurgeRequest{Status: outbox.StatusDead, Before: e.clock.Now(), Limit: 10}); n != 0 {
		t.Fatalf("Purger().Purge(DEAD) = %d", n)
	}
}

// server is an httptest server of the Middleware over a handler that
// counts its runs.
type server struct {
	*httptest.Server
	runs atomic.Int64
}

func newServer(t *testing.T, e *env, cfg idempotency.MiddlewareConfig, handler http.HandlerFunc) *server {
	t.Helper()
	cfg.Guard, cfg.InTx = e.guard, e.mem.InTx
	if cfg.Caller == nil {
		cfg.Caller = func(r *http.Request) (string, error) { return "u:" + r.Header.Get("X-User"), nil }
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	mw, err := idempotency.Middleware(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{}
	mux := http.NewServeMux()
	mux.Handle("/", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.runs.Add(1)
		handler(w, r)
	})))
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// reply is a response whose body was read and closed.
type reply struct {
	StatusCode int
	Header     http.Header
}

// send sends a request with the key (none when empty) and returns the
// response and its body.
func (s *server) send(t *testing.T, method, path, key, body string, header ...string) (reply, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(idempotency.DefaultHeader, key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header}, string(b)
}

func TestMiddleware(t *testing.T) {
	e := newEnv(t, 100*time.Millisecond)
	s := newServer(t, e, idempotency.MiddlewareConfig{MaxBody: 64}, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if _, err := e.mem.Current(r.Context()); err != nil && r.Method != http.MethodGet && r.Header.Get(idempotency.DefaultHeader) != "" {
			http.Error(w, "no transaction", http.StatusInternalServerError)
			return
		}
		switch string(body) {
		case "fail":
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		case "bad":
			http.Error(w, "bad order", http.StatusBadRequest)
			return
		case "busy":
			w.Header().Set("Retry-After", "3")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Location", "/orders/1")
		w.Header().Set("X-Request-Only", "yes")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(append([]byte("created "), body...))
	})
	check := func(what string, resp reply, body string, status int, replayed bool, runs int64) {
		t.Helper()
		if resp.StatusCode != status || (resp.Header.Get(idempotency.ReplayedHeader) == "true") != replayed || s.runs.Load() != runs {
			t.Fatalf("%s: %d %q (replayed %q), handler ran %d times; want %d, replayed %v, %d runs",
				what, resp.StatusCode, body, resp.Header.Get(idempotency.ReplayedHeader), s.runs.Load(), status, replayed, runs)
		}
	}
	resp, body := s.send(t, "POST", "/orders", "k1", "o-1")
	check("first", resp, body, http.StatusCreated, false, 1)
	if body != "created o-1" || resp.Header.Get("Location") != "/orders/1" || resp.Header.Get("X-Request-Only") != "yes" {
		t.Fatalf("first: %q %v", body, resp.Header)
	}
	resp, body = s.send(t, "POST", "/orders", "k1", "o-1")
	check("replay", resp, body, http.StatusCreated, true, 1)
	if body != "created o-1" || resp.Header.Get("Location") != "/orders/1" || resp.Header.Get("X-Request-Only") != "" ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("replay: %q %v; want the body and the kept headers only", body, resp.Header)
	}
	resp, body = s.send(t, "POST", "/orders", "k1", "o-2")
	check("another body", resp, body, http.StatusUnprocessableEntity, false, 1)
	resp, body = s.send(t, "PUT", "/orders", "k1", "o-1")
	check("another route", resp, body, http.StatusCreated, false, 2)
	resp, body = s.send(t, "POST", "/orders", "k2", "bad")
	check("4xx", resp, body, http.StatusBadRequest, false, 3)
	resp, body = s.send(t, "POST", "/orders", "k2", "bad")
	check("4xx replayed", resp, body, http.StatusBadRequest, true, 3)
	resp, body = s.send(t, "POST", "/orders", "k3", "fail")
	check("5xx", resp, body, http.StatusServiceUnavailable, false, 4)
	resp, body = s.send(t, "POST", "/orders", "k3", "fail")
	check("5xx again", resp, body, http.StatusServiceUnavailable, false, 5)
	resp, body = s.send(t, "POST", "/orders", "", "o-1")
	check("no key", resp, body, http.StatusCreated, false, 6)
	resp, body = s.send(t, "GET", "/orders", "k1", "")
	check("GET", resp, body, http.StatusCreated, false, 7)
	resp, body = s.send(t, "POST", "/orders", strings.Repeat("k", 256), "o-1")
	check("long key", resp, body, http.StatusBadRequest, false, 7)
	resp, body = s.send(t, "POST", "/orders", "k4", "o-1", idempotency.DefaultHeader, "k5")
	check("two keys", resp, body, http.StatusBadRequest, false, 7)
	resp, body = s.send(t, "POST", "/orders", "k4", strings.Repeat("x", 65))
	check("large body", resp, body, http.StatusRequestEntityTooLarge, false, 7)
	// A 429 asks for a retry: not recorded, the retry runs the handler.
	resp, body = s.send(t, "POST", "/orders", "k6", "busy")
	check("429", resp, body, http.StatusTooManyRequests, false, 8)
	resp, body = s.send(t, "POST", "/orders", "k6", "busy")
	check("429 again", resp, body, http.StatusTooManyRequests, false, 9)
	if resp.Header.Get("Retry-After") != "3" {
		t.Fatalf("429: Retry-After %q, want the handler's", resp.Header.Get("Retry-After"))
	}
}

func TestMiddlewareRequiredCallerAndHeader(t *testing.T) {
	e := newEnv(t, 0)
	s := newServer(t, e, idempotency.MiddlewareConfig{
		Required: true,
		Header:   "x-request-id",
	}, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) })
	send := func(key, user string) int {
		req, _ := http.NewRequest("POST", s.URL+"/pay", bytes.NewReader([]byte("x")))
		if key != "" {
			req.Header.Set("X-Request-Id", key)
		}
		req.Header.Set("X-User", user)
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if got := send("", "u1"); got != http.StatusBadRequest || s.runs.Load() != 0 {
		t.Fatalf("without the required key: %d (runs %d)", got, s.runs.Load())
	}
	for _, user := range []string{"u1", "u2", "u1", "u2"} {
		if got := send("k", user); got != http.StatusAccepted {
			t.Fatalf("user %s: %d", user, got)
		}
	}
	if s.runs.Load() != 2 {
		t.Fatalf("handler ran %d times, want once per user", s.runs.Load())
	}
}

// A request with the key of a request that is still running waits for it
// (Config.Wait) and is answered 409; the handler runs once.
func TestMiddlewareInFlight(t *testing.T) {
	e := newEnv(t, 50*time.Millisecond)
	inside, release := make(chan struct{}), make(chan struct{})
	s := newServer(t, e, idempotency.MiddlewareConfig{}, func(w http.ResponseWriter, _ *http.Request) {
		close(inside)
		<-release
		w.WriteHeader(http.StatusCreated)
	})
	first := make(chan int, 1)
	go func() { // no t.Fatal off the test's goroutine
		req, _ := http.NewRequest("POST", s.URL+"/orders", strings.NewReader("o"))
		req.Header.Set(idempotency.DefaultHeader, "k")
		resp, err := s.Client().Do(req)
		if err != nil {
			first <- 0
			return
		}
		_ = resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-inside
	resp, _ := s.send(t, "POST", "/orders", "k", "o")
	if resp.StatusCode != http.StatusConflict || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("second while the first runs: %d %v; want 409 with Retry-After", resp.StatusCode, resp.Header)
	}
	close(release)
	if got := <-first; got != http.StatusCreated {
		t.Fatalf("first: %d", got)
	}
	resp, _ = s.send(t, "POST", "/orders", "k", "o")
	if resp.StatusCode != http.StatusCreated || resp.Header.Get(idempotency.ReplayedHeader) != "true" || s.runs.Load() != 1 {
		t.Fatalf("after the first: %d %v (runs %d)", resp.StatusCode, resp.Header, s.runs.Load())
	}
}

func TestFingerprintAndScope(t *testing.T) {
	a := idempotency.Fingerprint("POST", "/a", []byte("b"))
	for _, other := range []string{
		idempotency.Fingerprint("POST", "/ab", nil),
		idempotency.Fingerprint("PUT", "/a", []byte("b")),
		idempotency.Fingerprint("POST", "/a?x=1", []byte("b")),
		idempotency.Fingerprint("POST", "/a", []byte("c")),
	} {
		if other == a {
			t.Fatal("two requests share a fingerprint")
		}
	}
	if len(a) != 64 || a != idempotency.Fingerprint("POST", "/a", []byte("b")) {
		t.Fatalf("fingerprint %q", a)
	}
	r := httptest.NewRequest("POST", "/orders/7", nil)
	if got := idempotency.DefaultScope(r); got != "POST /orders/7" {
		t.Fatalf("DefaultScope without a route = %q", got)
	}
	r.Pattern = "POST /orders/{id}"
	if got := idempotency.DefaultScope(r); got != "POST /orders/{id}" {
		t.Fatalf("DefaultScope of a route = %q", got)
	}
	r.Pattern = "/orders/{id}"
	if got := idempotency.DefaultScope(r); got != "POST /orders/{id}" {
		t.Fatalf("DefaultScope of a route without a method = %q", got)
	}
}
