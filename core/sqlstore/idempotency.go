package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// DefaultIdempotencyTable is the idempotency table's name unless
// NewIdempotency is given another.
const DefaultIdempotencyTable = "outbox_idempotency"

// MaxIdempotencyKeyLen is the longest scope and the longest key, in bytes,
// an idempotency table holds.
const MaxIdempotencyKeyLen = 255

// MaxIdempotencyFingerprintLen is the longest request fingerprint, in bytes, an
// idempotency table holds.
const MaxIdempotencyFingerprintLen = 128

// IdempotencyRecord is one row of an idempotency table: the command a
// (scope, key) pair names, the fingerprint of its request and, once it
// completed, its response.
type IdempotencyRecord struct {
	// Scope and Key identify the command: a key is unique within its scope.
	Scope, Key string
	// Fingerprint is the digest of the request that ran the command.
	Fingerprint string
	// Status is the response's status; 0 while the command runs (the row
	// is then visible only to its own transaction).
	Status int
	// Header holds the response headers that were kept; nil for none.
	Header map[string][]string
	// Body is the response body; nil when empty.
	Body []byte
	// CreatedAt is when the command started, CompletedAt when its response
	// was recorded (zero while it runs), both UTC.
	CreatedAt, CompletedAt time.Time
}

// Idempotency is an idempotency-key table: one row per command that a
// (scope, key) pair names, written in the command's own transaction.
// Reserve inserts the row before the command runs, Complete adds its
// response, Release takes it back; Purge forgets rows created before a
// cutoff. Package idempotency builds its API on it; most users never use it
// directly.
//
// The table lives in the database of a Store and is reached through that
// Store's pool and dialect; the Store's own table plays no part. Its DDL
// is embedded per dialect (schema/idempotency_<dialect>.sql). An
// Idempotency is safe for concurrent use.
type Idempotency struct {
	sideTable
	// reserve inserts a row, skipping an existing one without failing
	// the statement on PostgreSQL; get reads one row; complete stores the
	// response; release deletes one row; purge deletes the oldest rows.
	reserve, get, complete, release, purge string
}

// NewIdempotency returns the idempotency table named table
// (DefaultIdempotencyTable when empty; validated like the outbox table's,
// see ValidateTableName) in the database of s. It does not touch the
// database: Migrate creates the table. Errors wrap
// outbox.ErrInvalidConfig.
func NewIdempotency(s *Store, table string) (*Idempotency, error) {
	t, err := newSideTable(s, table, DefaultIdempotencyTable, "idempotency", "idempotency table")
	if err != nil {
		return nil, err
	}
	table = t.tab.table
	const cols = "scope, idem_key, fingerprint, status, headers, body, created_at, completed_at"
	i := &Idempotency{sideTable: t}
	i.reserve = "INSERT INTO " + table + " (scope, idem_key, fingerprint, status, created_at) VALUES (?, ?, ?, 0, ?)"
	get := "SELECT " + cols + " FROM " + table + " WHERE scope = ? AND idem_key = ?"
	i.reserve += s.d.skipConflict("scope, idem_key")
	get += s.d.sharedLock
	// The purge finds its rows by the table's key, or by the row id.
	key, keyCols := "(scope, idem_key)", "scope, idem_key"
	if s.d.rowID != "" {
		key, keyCols = s.d.rowID, s.d.rowID
	}
	i.purge = "DELETE FROM " + table + " WHERE " + key + " IN (SELECT " + keyCols + " FROM " + table +
		" WHERE created_at < ? ORDER BY created_at LIMIT ?)"
	if s.d.limitedDelete {
		i.purge = "DELETE FROM " + table + " WHERE created_at < ? ORDER BY created_at LIMIT ?"
	}
	i.reserve = s.d.rebind(i.reserve, 1)
	i.get = s.d.rebind(get, 1)
	i.complete = s.d.rebind("UPDATE "+table+" SET status = ?, headers = ?, body = ?, completed_at = ? WHERE scope = ? AND idem_key = ?", 1)
	i.release = s.d.rebind("DELETE FROM "+table+" WHERE scope = ? AND idem_key = ?", 1)
	i.purge = s.d.rebind(i.purge, 1)
	return i, nil
}

// reserveAttempts bounds the rounds of Reserve: a row that is gone between
// the INSERT that found it and the SELECT that reads it (purged, or taken
// back) makes Reserve insert again.
const reserveAttempts = 3

// Reserve inserts the row of (scope, key) with fingerprint, created at now
// and not completed, through c — the command's transaction — and reports
// whether it was new. When a row of the pair is there already (committed,
// or written earlier in the same transaction), Reserve returns it and
// fresh is false; the transaction stays usable on every database. While
// another transaction holds an uncommitted row of the pair, Reserve waits
// for it to end (bounded by ctx): its commit makes the row the one
// returned, its rollback lets this one be inserted.
func (i *Idempotency) Reserve(ctx context.Context, c Conn, scope, key, fingerprint string, now time.Time) (rec IdempotencyRecord, fresh bool, err error) {
	args := []any{scope, key, fingerprint, i.tab.t(now)}
	for range reserveAttempts {
		fresh, err := i.tab.insertNew(ctx, c, i.reserve, args...)
		if err != nil || fresh {
			if err != nil {
				err = fmt.Errorf("sqlstore: idempotency table %s: reserve %s %s: %w", i.tab.table, scope, key, i.tab.explain(err))
			}
			return IdempotencyRecord{Scope: scope, Key: key, Fingerprint: fingerprint, CreatedAt: now.UTC()}, fresh, err
		}
		rec, found, err := i.read(ctx, c, scope, key)
		if err != nil {
			return IdempotencyRecord{}, false, fmt.Errorf("sqlstore: idempotency table %s: read %s %s: %w", i.tab.table, scope, key, i.tab.explain(err))
		}
		if found {
			return rec, false, nil
		}
	}
	return IdempotencyRecord{}, false, fmt.Errorf("sqlstore: idempotency table %s: reserve %s %s: the row kept disappearing after %d attempts",
		i.tab.table, scope, key, reserveAttempts)
}

// read returns the row of (scope, key), and false when there is none.
func (i *Idempotency) read(ctx context.Context, c Conn, scope, key string) (IdempotencyRecord, bool, error) {
	rows, err := c.Query(ctx, i.get, scope, key)
	if err != nil {
		return IdempotencyRecord{}, false, err
	}
	var (
		rec                IdempotencyRecord
		found              bool
		status             int64
		headers, body      nullBytes
		created, completed = timeCol{d: i.tab.d}, timeCol{d: i.tab.d}
		errs               []error
	)
	for rows.Next() {
		if err := rows.Scan(&rec.Scope, &rec.Key, &rec.Fingerprint, &status, &headers, &body, &created, &completed); err != nil {
			_ = rows.Close()
			return IdempotencyRecord{}, false, err
		}
		found = true
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil || !found {
		return IdempotencyRecord{}, false, err
	}
	rec.Status = int(status)
	if headers.valid && headers.s != "" {
		if err := json.Unmarshal([]byte(headers.s), &rec.Header); err != nil {
			errs = append(errs, fmt.Errorf("headers: %w", err))
		}
	}
	if body.valid && body.s != "" {
		rec.Body = []byte(body.s)
	}
	rec.CreatedAt, rec.CompletedAt = created.t, completed.t
	errs = append(errs, created.err, completed.err)
	if err := errors.Join(errs...); err != nil {
		return IdempotencyRecord{}, false, fmt.Errorf("the stored row cannot be decoded: %w", err)
	}
	return rec, true, nil
}

// Complete stores the response of rec (Status, Header, Body), completed
// at now, in the row of (rec.Scope, rec.Key) through c, the transaction
// that reserved it. Status must be positive.
func (i *Idempotency) Complete(ctx context.Context, c Conn, rec IdempotencyRecord, now time.Time) error {
	if rec.Status <= 0 {
		return fmt.Errorf("%w: sqlstore: idempotency table %s: complete %s %s with status %d", outbox.ErrInvalidConfig, i.tab.table, rec.Scope, rec.Key, rec.Status)
	}
	var headers any
	if len(rec.Header) > 0 {
		b, err := json.Marshal(rec.Header)
		if err != nil {
			return fmt.Errorf("sqlstore: idempotency table %s: complete %s %s: headers: %w", i.tab.table, rec.Scope, rec.Key, err)
		}
		headers = string(b)
	}
	var body any
	if len(rec.Body) > 0 {
		body = rec.Body
	}
	n, err := c.Exec(ctx, i.complete, int64(rec.Status), headers, body, i.tab.t(now), rec.Scope, rec.Key)
	if err != nil {
		return fmt.Errorf("sqlstore: idempotency table %s: complete %s %s: %w", i.tab.table, rec.Scope, rec.Key, i.tab.explain(err))
	}
	if n == 0 {
		return fmt.Errorf("sqlstore: idempotency table %s: complete %s %s: the transaction holds no reserved row of the key", i.tab.table, rec.Scope, rec.Key)
	}
	return nil
}

// Release deletes the row of (scope, key) through c, the transaction that
// reserved it, so that a later request with the key runs the command.
func (i *Idempotency) Release(ctx context.Context, c Conn, scope, key string) error {
	if _, err := c.Exec(ctx, i.release, scope, key); err != nil {
		return fmt.Errorf("sqlstore: idempotency table %s: release %s %s: %w", i.tab.table, scope, key, i.tab.explain(err))
	}
	return nil
}

// Purge deletes at most limit rows created before before, oldest first, on
// the pool, and returns how many.
func (i *Idempotency) Purge(ctx context.Context, before time.Time, limit int) (int64, error) {
	if limit <= 0 {
		return 0, nil
	}
	n, err := i.tab.w.Exec(ctx, i.purge, i.tab.t(before), limit)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: purge idempotency table %s: %w", i.tab.table, i.tab.explain(err))
	}
	return n, nil
}
