package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Headers of the Middleware.
const (
	// DefaultHeader is the request header that carries the key unless
	// MiddlewareConfig.Header names another.
	DefaultHeader = "Idempotency-Key"
	// ReplayedHeader is set to "true" on a replayed response.
	ReplayedHeader = "Idempotent-Replayed"
)

// DefaultMaxBody is the largest request body, in bytes, the Middleware
// reads unless MiddlewareConfig.MaxBody sets another size.
const DefaultMaxBody = 1 << 20

// DefaultKeptHeaders are the response headers the Middleware records and
// replays unless MiddlewareConfig.KeepHeaders names others.
var DefaultKeptHeaders = []string{"Content-Type", "Content-Language", "Content-Location", "Location", "ETag", "Last-Modified"}

// MiddlewareConfig configures Middleware. Middleware validates it
// (MiddlewareConfig.Validate).
type MiddlewareConfig struct {
	// Guard runs the commands (required). Its Config decides what is
	// recorded: the statuses (Recordable) and the largest body
	// (Config.MaxResponseBody).
	Guard *Guard
	// InTx runs fn in a new transaction of the service's database, the
	// one Guard's TxContext finds (required): outboxsql.TxManager.InTx,
	// or an adapter's. The handler runs inside it, with the transaction
	// in its request's context.
	InTx func(ctx context.Context, fn func(ctx context.Context) error) error
	// Caller returns the authenticated principal of a request — its
	// user, API client or tenant, as the authentication in front of the
	// Middleware established it, never a value the request states
	// unchecked (required). Keys are kept per caller: a key never
	// replays another caller's response, and another caller's use of
	// the same key neither conflicts with it nor reveals that it exists.
	// An error or an empty principal answers 401 Unauthorized and the
	// handler does not run. A route without authentication may return a
	// constant, such as "public": its callers then share one key space,
	// and a key is a secret that replays its response to whoever sends it.
	Caller func(r *http.Request) (string, error)
	// Header is the request header that carries the key (default
	// DefaultHeader).
	Header string
	// Required rejects a request without the header with 400 Bad Request;
	// otherwise such a request passes through to the handler, outside any
	// transaction of the Middleware.
	Required bool
	// Scope returns the scope of a request's key within its caller's
	// keys (default DefaultScope: the method and the route). Keys are
	// unique within the caller and the scope.
	Scope func(r *http.Request) string
	// Fingerprint returns the digest of a request and its body (default:
	// Fingerprint of the method, the request target and the body). A key
	// reused with another fingerprint is answered 422.
	Fingerprint func(r *http.Request, body []byte) string
	// MaxBody is the largest request body, in bytes, read (default
	// DefaultMaxBody); a larger one is answered 413 Content Too Large.
	MaxBody int64
	// KeepHeaders are the response headers recorded and replayed (default
	// DefaultKeptHeaders). The first response carries all of the
	// handler's headers.
	KeepHeaders []string
	// Logger receives the errors answered with 500 (default
	// slog.Default()).
	Logger *slog.Logger
}

// Validate returns an error wrapping outbox.ErrInvalidConfig, naming the
// field, when c cannot make a Middleware. Middleware calls it.
func (c MiddlewareConfig) Validate() error {
	switch {
	case c.Guard == nil:
		return configErr("MiddlewareConfig.Guard is required (idempotency.New)")
	case c.InTx == nil:
		return configErr("MiddlewareConfig.InTx is required (the InTx of the TxContext the Guard uses)")
	case c.Caller == nil:
		return configErr("MiddlewareConfig.Caller is required: the authenticated principal of a request, so that one caller's keys never replay another's responses")
	case c.MaxBody < 0:
		return configErr("MiddlewareConfig.MaxBody is %d, it must not be negative (0 is DefaultMaxBody)", c.MaxBody)
	case strings.ContainsAny(c.Header, " \t\r\n:"):
		return configErr("MiddlewareConfig.Header %q is not a header name", c.Header)
	}
	return nil
}

// withDefaults returns c with its zero fields set to their defaults and
// its header names canonical.
func (c MiddlewareConfig) withDefaults() MiddlewareConfig {
	if c.Header == "" {
		c.Header = DefaultHeader
	}
	c.Header = http.CanonicalHeaderKey(c.Header)
	if c.Scope == nil {
		c.Scope = DefaultScope
	}
	if c.Fingerprint == nil {
		c.Fingerprint = func(r *http.Request, body []byte) string { return Fingerprint(r.Method, r.URL.RequestURI(), body) }
	}
	if c.MaxBody == 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.KeepHeaders == nil {
		c.KeepHeaders = DefaultKeptHeaders
	}
	keep := make([]string, len(c.KeepHeaders))
	for i, h := range c.KeepHeaders {
		keep[i] = http.CanonicalHeaderKey(h)
	}
	c.KeepHeaders = keep
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Middleware returns the net/http middleware that makes the non-safe
// requests (not GET, HEAD, OPTIONS or TRACE) that carry an idempotency key
// run once per caller and key, by Guard.Do. The caller is authenticated
// first (Caller); the request body is then read (at most MaxBody bytes)
// to fingerprint the request, and handed to the handler again. The
// handler runs inside a transaction of InTx, with the transaction in its
// request's context: the business writes it makes in that transaction
// (directly, or in an InTx of its own, which nests in a savepoint), the
// outbox events it writes with outbox.Client.Write and the key's record
// commit together. Its response is buffered and sent after the commit;
// handlers that stream or flush do not fit.
//
// The answers:
//
//   - first request with a key: the handler's response. A Recordable
//     status (2xx, 3xx, 4xx but 408, 425 and 429) is recorded with the
//     KeepHeaders and the body; any other rolls the transaction back and
//     is not recorded, so the key can be retried. A body over the Guard's
//     MaxResponseBody is sent but recorded without it (OmittedHeader).
//   - the key again from the same caller, same fingerprint, after the
//     first committed: the recorded response, with ReplayedHeader "true";
//     the handler does not run.
//   - the key again from the same caller with another fingerprint: 422
//     Unprocessable Content.
//   - the key again from the same caller while the first request runs:
//     the second waits for it (Config.Wait) and replays its response, or
//     is answered 409 Conflict with Retry-After: 1. The handler never
//     runs twice.
//   - the key from another caller: another key; it runs the handler.
//   - no authenticated caller (Caller fails or returns ""): 401
//     Unauthorized.
//   - no key: the handler, untouched; 400 Bad Request when Required. An
//     invalid key (longer than MaxKeyLen bytes, not UTF-8, or repeated):
//     400 Bad Request.
//   - an error of the database: 500 Internal Server Error, nothing
//     committed.
//
// Errors of the config wrap outbox.ErrInvalidConfig.
func Middleware(cfg MiddlewareConfig) (func(http.Handler) http.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return func(next http.Handler) http.Handler {
		return &middleware{cfg: cfg, next: next}
	}, nil
}

// DefaultScope is the scope of a request unless MiddlewareConfig.Scope
// sets another: the method and the route — the pattern of the
// http.ServeMux route that matched (Request.Pattern), when the Middleware
// wraps the route's handler, or else the path.
func DefaultScope(r *http.Request) string {
	route := r.Pattern
	if route == "" {
		route = r.URL.Path
	}
	if strings.HasPrefix(route, r.Method+" ") {
		return route
	}
	return r.Method + " " + route
}

// callerScope returns the scope of a key of caller in scope: the two
// joined so that no other pair gives the same text (the caller's length
// first), or its SHA-256 digest when that is longer than MaxKeyLen bytes
// or not UTF-8.
func callerScope(caller, scope string) string {
	s := strconv.Itoa(len(caller)) + ":" + caller + "|" + scope
	if len(s) > MaxKeyLen || !utf8.ValidString(s) {
		sum := sha256.Sum256([]byte(s))
		s = "sha256:" + hex.EncodeToString(sum[:])
	}
	return s
}

// Fingerprint returns the hex SHA-256 digest of a request's method, target
// (path and query) and body: two requests have the same fingerprint when
// the three are equal byte for byte.
func Fingerprint(method, target string, body []byte) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(method), []byte(target)} {
		_, _ = h.Write([]byte(strconv.Itoa(len(part)) + ":")) // lengths keep the parts apart
		_, _ = h.Write(part)
	}
	_, _ = h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// middleware is the http.Handler Middleware returns.
type middleware struct {
	cfg  MiddlewareConfig
	next http.Handler
}

// safeMethods pass through: they are idempotent by definition.
var safeMethods = map[string]bool{http.MethodGet: true, http.MethodHead: true, http.MethodOptions: true, http.MethodTrace: true}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if safeMethods[r.Method] {
		m.next.ServeHTTP(w, r)
		return
	}
	keys := r.Header.Values(m.cfg.Header)
	switch {
	case len(keys) == 0 || len(keys) == 1 && keys[0] == "":
		if m.cfg.Required {
			http.Error(w, "the "+m.cfg.Header+" header is required", http.StatusBadRequest)
			return
		}
		m.next.ServeHTTP(w, r)
		return
	case len(keys) > 1:
		http.Error(w, "the "+m.cfg.Header+" header is repeated", http.StatusBadRequest)
		return
	}
	key := keys[0]
	if len(key) > MaxKeyLen || !utf8.ValidString(key) {
		http.Error(w, fmt.Sprintf("the %s header must be UTF-8 of at most %d bytes", m.cfg.Header, MaxKeyLen), http.StatusBadRequest)
		return
	}
	caller, err := m.cfg.Caller(r)
	if err != nil || caller == "" {
		m.cfg.Logger.DebugContext(r.Context(), "idempotency: a request with a key has no authenticated caller", "method", r.Method, "path", r.URL.Path, "error", err)
		http.Error(w, http.StatusText(http.StatusUnauthorized), http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, m.cfg.MaxBody))
	if err != nil {
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			http.Error(w, fmt.Sprintf("the request body is larger than %d bytes", tooLarge.Limit), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "the request body could not be read", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	scope := callerScope(caller, m.cfg.Scope(r))
	fingerprint := m.cfg.Fingerprint(r, body)

	var (
		rec *recorder
		out Outcome
	)
	err = m.cfg.InTx(r.Context(), func(ctx context.Context) error {
		var err error
		out, err = m.cfg.Guard.Do(ctx, scope, key, fingerprint, func(ctx context.Context) (Response, error) {
			rec = &recorder{header: http.Header{}}
			m.next.ServeHTTP(rec, r.WithContext(ctx))
			return rec.response(m.cfg.KeepHeaders), nil
		})
		return err
	})
	switch {
	case err == nil && out.Replayed:
		h := w.Header()
		for k, v := range out.Response.Header {
			h[k] = append([]string(nil), v...)
		}
		h.Set(ReplayedHeader, "true")
		write(w, out.Response.Status, out.Response.Body)
	case err == nil || errors.Is(err, ErrNotRecorded) && rec != nil:
		h := w.Header()
		for k, v := range rec.header {
			h[k] = v
		}
		write(w, rec.status, rec.body.Bytes())
	case errors.Is(err, ErrMismatch):
		http.Error(w, "the "+m.cfg.Header+" was used for a different request", http.StatusUnprocessableEntity)
	case errors.Is(err, ErrInFlight):
		w.Header().Set("Retry-After", "1")
		http.Error(w, "a request with this "+m.cfg.Header+" is still in progress", http.StatusConflict)
	case errors.Is(err, ErrInvalidKey):
		http.Error(w, "the "+m.cfg.Header+" cannot be used: "+err.Error(), http.StatusBadRequest)
	default:
		m.cfg.Logger.ErrorContext(r.Context(), "idempotency: the request failed", "method", r.Method, "path", r.URL.Path, "scope", scope, "key", key, "error", err)
		http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
	}
}

// write sends status and body.
func write(w http.ResponseWriter, status int, body []byte) {
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// recorder buffers a handler's response until the transaction ends.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (rec *recorder) Header() http.Header { return rec.header }

func (rec *recorder) WriteHeader(status int) {
	if status >= 100 && status < 200 { // informational: the final status follows
		return
	}
	if rec.status == 0 {
		rec.status = status
	}
}

func (rec *recorder) Write(p []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if _, set := rec.header["Content-Type"]; !set && rec.body.Len() == 0 { // as net/http does
		rec.header.Set("Content-Type", http.DetectContentType(p))
	}
	return rec.body.Write(p)
}

// response returns what the handler answered, with only the headers keep
// names.
func (rec *recorder) response(keep []string) Response {
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	var h http.Header
	for _, k := range keep {
		if v, ok := rec.header[k]; ok {
			if h == nil {
				h = http.Header{}
			}
			h[k] = append([]string(nil), v...)
		}
	}
	return Response{Status: status, Header: h, Body: bytes.Clone(rec.body.Bytes())}
}
