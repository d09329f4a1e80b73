package idempotency

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/sqlstore"
)

// Errors of Do and of the Middleware, matched with errors.Is.
var (
	// ErrInvalidKey is wrapped by the error of Do for a scope, key or
	// fingerprint the table cannot hold: a key that is empty, a scope or
	// key longer than MaxKeyLen bytes, a fingerprint that is empty or
	// longer than MaxFingerprintLen bytes, or any of them not UTF-8. The
	// Middleware answers 400 Bad Request to such a key.
	ErrInvalidKey = errors.New("idempotency: invalid scope, key or fingerprint")
	// ErrMismatch is wrapped by the error of Do when the key was used
	// before, in the same scope, by a request with another fingerprint:
	// the client reused a key for a different request. Nothing ran. The
	// Middleware answers 422 Unprocessable Content.
	ErrMismatch = errors.New("idempotency: the key was used for a different request")
	// ErrInFlight is wrapped by the error of Do when a request with the
	// same scope and key is still running: its transaction did not end
	// within Config.Wait, or it runs in the very transaction of this call.
	// Nothing ran; the client may retry later. The Middleware answers
	// 409 Conflict with Retry-After.
	ErrInFlight = errors.New("idempotency: a request with the key is still in progress")
	// ErrNotRecorded is wrapped by the error of Do when fn's response has
	// a status that is not recorded (see Recordable): a server error (500
	// or more), 408 Request Timeout, 425 Too Early or 429 Too Many
	// Requests. Do took the key back, so that a retry with it runs the
	// command again, and returns the response with this error. Return the
	// error from the transaction so that the command's writes roll back
	// with the key.
	ErrNotRecorded = errors.New("idempotency: the response is not recorded: the request may be retried")
)

// MaxKeyLen is the longest scope and the longest key, in bytes, that Do
// accepts.
const MaxKeyLen = sqlstore.MaxIdempotencyKeyLen

// MaxFingerprintLen is the longest fingerprint, in bytes, that Do accepts.
const MaxFingerprintLen = sqlstore.MaxIdempotencyFingerprintLen

// DefaultWait is how long Do waits for a request with the same key to end
// unless Config.Wait sets another time.
const DefaultWait = 5 * time.Second

// PurgeBatch is how many records one statement of Guard.Purge deletes.
const PurgeBatch = 1000

// DefaultMaxResponseBody is the largest response body, in bytes, that Do
// records unless Config.MaxResponseBody sets another size.
const DefaultMaxResponseBody = 1 << 20

// MaxResponseBodyLimit is the largest Config.MaxResponseBody accepted.
// MySQL and MariaDB refuse a statement larger than their
// max_allowed_packet (16 MiB by default on MariaDB, 64 MiB on MySQL 8):
// keep MaxResponseBody under it.
const MaxResponseBodyLimit = 64 << 20

// MaxRecordedHeaderBytes is the most bytes of kept headers (names and
// values) that Do records: a response whose headers are larger is recorded
// without them (see OmittedHeader). The table stores them as JSON text,
// which MySQL's TEXT column bounds to 64 KiB.
const MaxRecordedHeaderBytes = 8 << 10

// OmittedHeader is the header that a recorded response carries, and every
// replay of it, when part of the response was too large to record: its
// value is "body", "headers" or "body, headers". The first response was
// sent whole; the command ran and is not run again, and a client that
// needs what was omitted reads it another way (the Location of a created
// resource, say). A response's own header of this name is not recorded.
const OmittedHeader = "Idempotent-Response-Omitted"

// Recordable reports whether Do records a response with status, so that
// every retry with its key gets it back: 2xx, 3xx and 4xx, but for 408
// Request Timeout, 425 Too Early and 429 Too Many Requests, which ask the
// client to retry. Informational statuses (1xx) and server errors (5xx)
// are not recorded either: Do takes the key back (ErrNotRecorded) and a
// retry runs the command again.
func Recordable(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	return status >= 200 && status < 500
}

// Response is what a command answered: the status, the headers kept and
// the body. Do records it and replays it to every later request with the
// same key.
type Response struct {
	// Status is the HTTP status code (0 counts as 200, http.StatusOK).
	Status int
	// Header holds the headers to replay; nil for none.
	Header http.Header
	// Body is the response body.
	Body []byte
}

// Record is what a Store keeps per (scope, key): the fingerprint of the
// request that ran the command and its response (Status 0 while it runs).
type Record struct {
	// Scope and Key identify the command: a key is unique within its scope.
	Scope, Key string
	// Fingerprint is the digest of the request that ran the command.
	Fingerprint string
	// Response is the command's response; its Status is 0 while the
	// command runs.
	Response Response
	// CreatedAt is when the command started, CompletedAt when its response
	// was recorded (zero while it runs).
	CreatedAt, CompletedAt time.Time
}

// Store keeps the records of Do in the database of the commands, written
// through their transactions. SQLStore is the Store of PostgreSQL,
// MySQL/MariaDB and SQLite. A Store must be safe for concurrent use.
type Store interface {
	// Reserve inserts the record of (scope, key) with fingerprint, created
	// at now and not completed, in tx, and reports whether it was new.
	// When a record of the pair exists (committed, or written earlier in
	// tx), it returns that record and fresh is false. While another
	// transaction holds an uncommitted record of the pair, it waits for
	// that transaction to end, bounded by ctx.
	Reserve(ctx context.Context, tx outbox.Tx, scope, key, fingerprint string, now time.Time) (rec Record, fresh bool, err error)
	// Complete stores rec.Response, completed at now, in the record of
	// (rec.Scope, rec.Key) that tx reserved.
	Complete(ctx context.Context, tx outbox.Tx, rec Record, now time.Time) error
	// Release deletes the record of (scope, key) that tx reserved.
	Release(ctx context.Context, tx outbox.Tx, scope, key string) error
	// Purge deletes at most limit records created before before, oldest
	// first, outside any transaction, and returns how many.
	Purge(ctx context.Context, before time.Time, limit int) (int64, error)
}

// Config configures a Guard. New validates it.
type Config struct {
	// Store keeps the records (required): NewSQLStore on the database of
	// the commands.
	Store Store
	// TxContext finds the command's transaction in the context given to
	// Do (required): the TxContext the service's transactions run under —
	// outboxsql.TxManager, or an adapter's — as for the outbox Client's
	// writes.
	TxContext outbox.TxContext
	// Wait bounds how long Do waits for a request with the same key that
	// is still running (default DefaultWait): when it has not ended by
	// then, Do fails with ErrInFlight. It must not be negative.
	Wait time.Duration
	// Clock stamps the records, for Purge (default outbox.SystemClock).
	Clock outbox.Clock
	// MaxResponseBody is the largest response body, in bytes, recorded
	// (default DefaultMaxResponseBody, at most MaxResponseBodyLimit; it
	// must not be negative). A larger body is sent to the first request
	// but not recorded: the record keeps the status and the headers, with
	// OmittedHeader "body", and the command is not run again. On MySQL and
	// MariaDB keep it under the server's max_allowed_packet.
	MaxResponseBody int
}

// Validate returns an error wrapping outbox.ErrInvalidConfig, naming the
// field, when c cannot make a Guard. New calls it.
func (c Config) Validate() error {
	switch {
	case c.Store == nil:
		return configErr("Config.Store is required (NewSQLStore)")
	case c.TxContext == nil:
		return configErr("Config.TxContext is required (the service's transactions)")
	case c.Wait < 0:
		return configErr("Config.Wait is %v, it must not be negative (0 is DefaultWait)", c.Wait)
	case c.MaxResponseBody < 0 || c.MaxResponseBody > MaxResponseBodyLimit:
		return configErr("Config.MaxResponseBody is %d, it must be 0 (DefaultMaxResponseBody) to %d bytes", c.MaxResponseBody, MaxResponseBodyLimit)
	}
	return nil
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Wait == 0 {
		c.Wait = DefaultWait
	}
	if c.Clock == nil {
		c.Clock = outbox.SystemClock
	}
	if c.MaxResponseBody == 0 {
		c.MaxResponseBody = DefaultMaxResponseBody
	}
	return c
}

// configErr returns an error of a config of the package, wrapping
// outbox.ErrInvalidConfig.
func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: idempotency: %s", outbox.ErrInvalidConfig, fmt.Sprintf(format, args...))
}

// Guard runs each command once per idempotency key: see Do. It is safe for
// concurrent use.
type Guard struct {
	store   Store
	tc      outbox.TxContext
	wait    time.Duration
	clock   outbox.Clock
	maxBody int
}

// New validates cfg (Config.Validate) and returns a Guard. It does not
// touch the database. Errors wrap outbox.ErrInvalidConfig.
func New(cfg Config) (*Guard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Guard{store: cfg.Store, tc: cfg.TxContext, wait: cfg.Wait, clock: cfg.Clock, maxBody: cfg.MaxResponseBody}, nil
}

// Outcome is the result of Do: the response to send, and whether it is
// the recorded response of an earlier request rather than fn's.
type Outcome struct {
	// Response is fn's response, or the recorded one when Replayed.
	Response Response
	// Replayed reports that fn did not run: the key's command completed
	// before, and Response is what it answered.
	Replayed bool
}

// Do runs a command once per key: in the command's transaction — the one
// ctx carries, found by Config.TxContext — it records (scope, key) with
// the request's fingerprint, runs fn(ctx) and records fn's response, so
// that fn's writes (the business rows, the outbox events written with
// outbox.Client.Write) and the record commit or roll back together.
//
// If the key's command completed before with the same fingerprint, fn does
// not run and Do returns the recorded response with Replayed set; with
// another fingerprint it fails with ErrMismatch. Keys are unique within a
// scope (such as the route and the user): the same key in two scopes names
// two commands. Scope, key and fingerprint are compared byte for byte.
//
// Concurrent requests with one key never both run fn: the record is
// inserted before fn runs, and the database's unique key makes the second
// transaction wait for the first. When the first commits, the second
// replays its response (or fails with ErrMismatch); when it rolls back,
// the second runs fn. If the first has not ended within Config.Wait, the
// second fails with ErrInFlight; its statement was cancelled, so its
// transaction must roll back. On SQLite, whose write transactions run one
// at a time, the second transaction waits at its start instead (for the
// DSN's busy timeout) and then replays. PostgreSQL under REPEATABLE READ
// or SERIALIZABLE may fail the second with a serialization error, and
// InnoDB may end one of several waiting transactions with a deadlock
// error: such errors roll the transaction back and the request can be
// retried.
//
// fn's response is recorded when Recordable(status): successes and client
// errors are final and replayed. A server error, 408, 425 or 429 is not:
// Do takes the record back and returns the response with an error
// wrapping ErrNotRecorded, and a retry with the key runs fn again. If fn
// fails, Do takes the record back and returns fn's error; a panic in fn
// takes it back and goes on. In all three cases return the error from the
// transaction's function so that fn's writes roll back too. A body over
// Config.MaxResponseBody, or kept headers over MaxRecordedHeaderBytes, is
// returned to the caller but recorded without (see OmittedHeader).
//
// Without a transaction in ctx Do fails with an error wrapping
// outbox.ErrNoTransaction; with a scope, key or fingerprint it cannot
// hold, ErrInvalidKey. fn does not run then, nor when recording fails.
func (g *Guard) Do(ctx context.Context, scope, key, fingerprint string, fn func(ctx context.Context) (Response, error)) (Outcome, error) {
	if err := checkKey(scope, key, fingerprint); err != nil {
		return Outcome{}, err
	}
	tx, err := g.tc.Current(ctx)
	if err != nil {
		return Outcome{}, fmt.Errorf("idempotency: %s %s: %w", scope, key, err)
	}
	wctx, cancel := context.WithTimeout(ctx, g.wait)
	rec, fresh, err := g.store.Reserve(wctx, tx, scope, key, fingerprint, g.clock.Now().UTC())
	waited := wctx.Err() != nil && ctx.Err() == nil
	cancel()
	if err != nil {
		if waited {
			return Outcome{}, fmt.Errorf("idempotency: %s %s: %w: it did not end within %v (roll the transaction back): %w", scope, key, ErrInFlight, g.wait, err)
		}
		return Outcome{}, fmt.Errorf("idempotency: %w", err)
	}
	if !fresh {
		switch {
		case rec.Fingerprint != fingerprint:
			return Outcome{}, fmt.Errorf("idempotency: %s %s: %w", scope, key, ErrMismatch)
		case rec.Response.Status == 0:
			return Outcome{}, fmt.Errorf("idempotency: %s %s: %w (in this transaction)", scope, key, ErrInFlight)
		}
		return Outcome{Response: rec.Response, Replayed: true}, nil
	}
	done := false
	defer func() {
		if !done { // fn panicked: do not leave the key behind
			_ = g.store.Release(context.WithoutCancel(ctx), tx, scope, key)
		}
	}()
	resp, err := fn(ctx)
	done = true
	if err == nil && (resp.Status < 0 || resp.Status > 999 || resp.Status > 0 && resp.Status < 100) {
		err = fmt.Errorf("idempotency: %s %s: fn answered status %d, not an HTTP status", scope, key, resp.Status)
	}
	if err != nil {
		return Outcome{}, g.release(ctx, tx, scope, key, err)
	}
	if resp.Status == 0 {
		resp.Status = http.StatusOK
	}
	if !Recordable(resp.Status) {
		err := fmt.Errorf("idempotency: %s %s: status %d: %w", scope, key, resp.Status, ErrNotRecorded)
		return Outcome{Response: resp}, g.release(ctx, tx, scope, key, err)
	}
	rec.Response = g.recorded(resp)
	if err := g.store.Complete(ctx, tx, rec, g.clock.Now().UTC()); err != nil {
		return Outcome{}, g.release(ctx, tx, scope, key, fmt.Errorf("idempotency: %w", err))
	}
	return Outcome{Response: resp}, nil
}

// recorded returns what of resp is recorded: without its body when it is
// larger than the Guard's MaxResponseBody, without its headers when they
// are larger than MaxRecordedHeaderBytes, and then with OmittedHeader
// saying so.
func (g *Guard) recorded(resp Response) Response {
	if _, own := resp.Header[OmittedHeader]; own { // the library's header
		resp.Header = resp.Header.Clone()
		delete(resp.Header, OmittedHeader)
	}
	var omitted []string
	if len(resp.Body) > g.maxBody {
		resp.Body, omitted = nil, append(omitted, "body")
	}
	size := 0
	for k, vs := range resp.Header {
		for _, v := range vs {
			size += len(k) + len(v)
		}
	}
	if size > MaxRecordedHeaderBytes {
		resp.Header, omitted = nil, append(omitted, "headers")
	}
	if len(omitted) > 0 {
		h := resp.Header.Clone()
		if h == nil {
			h = http.Header{}
		}
		h.Set(OmittedHeader, strings.Join(omitted, ", "))
		resp.Header = h
	}
	return resp
}

// release takes the record of (scope, key) back after cause, and returns
// cause, joined with the error of the release if it fails.
func (g *Guard) release(ctx context.Context, tx outbox.Tx, scope, key string, cause error) error {
	if err := g.store.Release(context.WithoutCancel(ctx), tx, scope, key); err != nil {
		return errors.Join(cause, fmt.Errorf("idempotency: the key could not be taken back (roll the transaction back): %w", err))
	}
	return cause
}

// checkKey returns an error wrapping ErrInvalidKey unless scope, key and
// fingerprint are what the table holds.
func checkKey(scope, key, fingerprint string) error {
	for _, f := range []struct {
		what  string
		v     string
		empty bool
		max   int
	}{{"scope", scope, true, MaxKeyLen}, {"key", key, false, MaxKeyLen}, {"fingerprint", fingerprint, false, MaxFingerprintLen}} {
		switch {
		case f.v == "" && !f.empty:
			return fmt.Errorf("%w: the %s is empty", ErrInvalidKey, f.what)
		case len(f.v) > f.max:
			return fmt.Errorf("%w: the %s has %d bytes, at most %d are kept", ErrInvalidKey, f.what, len(f.v), f.max)
		case !utf8.ValidString(f.v):
			return fmt.Errorf("%w: the %s %q is not UTF-8", ErrInvalidKey, f.what, f.v)
		}
	}
	return nil
}

// Purge deletes the records created more than olderThan ago, in statements
// of at most PurgeBatch records, and returns how many. A request with a
// purged key runs its command again, so keep records longer than clients
// retry (a day is common). olderThan must be positive.
func (g *Guard) Purge(ctx context.Context, olderThan time.Duration) (int64, error) {
	if olderThan <= 0 {
		return 0, fmt.Errorf("%w: idempotency: Purge(%v): the age must be positive", outbox.ErrInvalidConfig, olderThan)
	}
	before := g.clock.Now().Add(-olderThan)
	var total int64
	for {
		n, err := g.store.Purge(ctx, before, PurgeBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("idempotency: %w", err)
		}
		if n < PurgeBatch {
			return total, nil
		}
	}
}

// Purger returns the records as an outbox.Purger, so that the outbox's
// PurgeScheduler purges them after a retention, in bounded batches, at an
// interval:
//
//	purger, err := outbox.NewPurgeScheduler(outbox.PurgeConfig{Purger: g.Purger(), Retention: 24 * time.Hour})
//
// Its Purge deletes the records created before the cutoff for
// outbox.StatusDone (the Retention) and nothing for other statuses or for
// a tenant (the records carry none).
func (g *Guard) Purger() outbox.Purger { return purger{g} }

type purger struct{ g *Guard }

func (p purger) Purge(ctx context.Context, req outbox.PurgeRequest) (int64, error) {
	if req.Status != outbox.StatusDone || req.TenantID != "" { // no dead records, no tenants
		return 0, nil
	}
	n, err := p.g.store.Purge(ctx, req.Before, req.Limit)
	if err != nil {
		return n, fmt.Errorf("idempotency: %w", err)
	}
	return n, nil
}
