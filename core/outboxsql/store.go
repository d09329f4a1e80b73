package outboxsql

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

var (
	_ outbox.Store  = (*Store)(nil)
	_ outbox.Purger = (*Store)(nil)
)

// DefaultListLimit is how many records List returns when Query.Limit is zero.
const DefaultListLimit = 100

// Store is an outbox.Store and outbox.Purger on one SQL table. It holds no
// connection: every method runs on the Executor it is given. It is safe for
// concurrent use.
type Store struct {
	d      *dialect
	table  string
	q      *queries
	schema []string
}

// Option configures a Store.
type Option func(*config)

type config struct {
	table string
}

// WithTable sets the outbox table's name (default DefaultTable), optionally
// schema-qualified ("app.outbox_event"). See ValidateTableName.
func WithTable(name string) Option {
	return func(c *config) { c.table = name }
}

// New returns a Store for dialect d. Every SQL statement is built here, once.
// Errors wrap outbox.ErrInvalidConfig.
func New(d Dialect, opts ...Option) (*Store, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: outboxsql: nil dialect", outbox.ErrInvalidConfig)
	}
	c := config{table: DefaultTable}
	for _, o := range opts {
		o(&c)
	}
	if err := ValidateTableName(c.table); err != nil {
		return nil, err
	}
	spec := d.spec()
	schema, err := renderSchema(spec, c.table)
	if err != nil {
		return nil, err
	}
	return &Store{d: spec, table: c.table, q: buildQueries(spec, c.table), schema: schema}, nil
}

// Open returns a Store for db, with the dialect detected from db's driver
// (see DetectDialect). It does not touch the database.
func Open(db *sql.DB, opts ...Option) (*Store, error) {
	d, err := DetectDialect(db)
	if err != nil {
		return nil, err
	}
	return New(d, opts...)
}

// Table returns the name of the store's table.
func (s *Store) Table() string { return s.table }

// Dialect returns the store's dialect.
func (s *Store) Dialect() Dialect { return s.d }

func (s *Store) t(t time.Time) any { return s.d.timeArg(t.UTC()) }

// encodeHeaders returns the headers as a JSON object, or nil (NULL) when
// there are none.
func encodeHeaders(e outbox.Envelope) (any, error) {
	if e.NumHeaders() == 0 {
		return nil, nil
	}
	b, err := json.Marshal(e.Headers())
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// decodeHeaders reads what encodeHeaders wrote: a JSON object of strings.
func decodeHeaders(s string) (map[string]string, error) {
	var h map[string]string
	if err := json.Unmarshal([]byte(s), &h); err != nil {
		return nil, err
	}
	return h, nil
}

// Insert adds events as NEW in multi-row INSERTs of at most the dialect's
// batch size. With an owner, events that are not Delayed are inserted
// claimed by it. Run it on the business transaction: on a plain pool, a
// failure after the first batch leaves the earlier batches inserted.
func (s *Store) Insert(ctx context.Context, ex outbox.Executor, now time.Time, owner string, events []outbox.Envelope) error {
	now = now.UTC()
	nowArg := s.t(now)
	for chunk := range slices.Chunk(events, s.d.maxBatch) {
		args := make([]any, 0, len(chunk)*insertRowArgs)
		for _, e := range chunk {
			var payload, payloadBytes any
			if e.PayloadKind() == outbox.PayloadBytes {
				payloadBytes = append([]byte{}, e.PayloadString()...)
			} else {
				payload = e.PayloadString()
			}
			headers, err := encodeHeaders(e)
			if err != nil {
				return fmt.Errorf("outboxsql: insert: headers of event %s: %w", e.ID(), err)
			}
			available := now
			if e.AvailableAt().After(now) {
				available = e.AvailableAt()
			}
			var lockedBy, lockedAt any
			if owner != "" && !e.Delayed() {
				lockedBy, lockedAt = owner, nowArg
			}
			args = append(args, e.ID(), e.Type(), e.AggregateType(), e.AggregateID(), e.TenantID(),
				payload, payloadBytes, headers, s.t(e.OccurredAt()), s.t(available), nowArg, lockedBy, lockedAt)
		}
		if _, err := ex.ExecContext(ctx, s.q.insert.sql(len(chunk)), args...); err != nil {
			return fmt.Errorf("outboxsql: insert %d events into %s: %w", len(chunk), s.table, s.explain(err))
		}
	}
	return nil
}

// Claim atomically claims up to req.Limit due pending events for req.Owner
// and returns them oldest due first. A row that cannot be decoded is
// returned with Record.Err set rather than failing the claim.
func (s *Store) Claim(ctx context.Context, ex outbox.Executor, req outbox.ClaimRequest) ([]outbox.Record, error) {
	if req.Limit <= 0 {
		return nil, nil
	}
	if req.Owner == "" {
		return nil, fmt.Errorf("%w: outboxsql: claim without an owner", outbox.ErrInvalidConfig)
	}
	var recs []outbox.Record
	var err error
	if s.d.claim != nil {
		recs, err = s.d.claim(ctx, s, ex, req)
	} else {
		recs, err = s.claimReturning(ctx, ex, req)
	}
	if err != nil {
		return nil, fmt.Errorf("outboxsql: claim from %s: %w", s.table, s.explain(err))
	}
	sortDue(recs)
	return recs, nil
}

// claimArgs returns the statement and arguments of the shared claim:
// SET owner, now; WHERE due, created cutoff, lease cutoff[, owner, own
// cutoff]; LIMIT.
func (s *Store) claimArgs(req outbox.ClaimRequest) (string, []any) {
	now := req.Now.UTC()
	args := []any{req.Owner, s.t(now), s.t(now), s.t(now.Add(-req.SkipRecent)), s.t(now.Add(-req.Lease))}
	query := s.q.claim
	if req.OwnReclaimAfter > 0 {
		query = s.q.claimOwn
		args = append(args, req.Owner, s.t(now.Add(-req.OwnReclaimAfter)))
	}
	return query, append(args, req.Limit)
}

func (s *Store) claimReturning(ctx context.Context, ex outbox.Executor, req outbox.ClaimRequest) ([]outbox.Record, error) {
	query, args := s.claimArgs(req)
	return s.queryRecords(ctx, ex, query, args...)
}

// sortDue orders records by due time, then id: the order of the claim.
func sortDue(recs []outbox.Record) {
	slices.SortFunc(recs, func(a, b outbox.Record) int {
		return cmp.Or(a.AvailableAt.Compare(b.AvailableAt), cmp.Compare(a.ID, b.ID))
	})
}

// execIDs runs a batch statement over ids in chunks, with fixed arguments
// first, and returns the rows affected.
func (s *Store) execIDs(ctx context.Context, ex outbox.Executor, b *batchSQL, fixed []any, ids []string) (int64, error) {
	var total int64
	for chunk := range slices.Chunk(ids, s.d.maxBatch) {
		args := make([]any, 0, len(fixed)+len(chunk))
		args = append(args, fixed...)
		for _, id := range chunk {
			args = append(args, id)
		}
		res, err := ex.ExecContext(ctx, b.sql(len(chunk)), args...)
		if err != nil {
			return total, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// MarkDone marks owner's claimed events DONE at now and returns how many
// rows changed; ids not claimed by owner are left alone.
func (s *Store) MarkDone(ctx context.Context, ex outbox.Executor, owner string, ids []string, now time.Time) (int64, error) {
	n, err := s.execIDs(ctx, ex, s.q.markDone, []any{s.t(now), owner}, ids)
	if err != nil {
		return n, fmt.Errorf("outboxsql: mark done in %s: %w", s.table, s.explain(err))
	}
	return n, nil
}

func countArg(count bool) int {
	if count {
		return 1
	}
	return 0
}

// execOne runs a single-row update and reports whether it changed the row.
func execOne(ctx context.Context, ex outbox.Executor, query string, args ...any) (bool, error) {
	res, err := ex.ExecContext(ctx, query, args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// MarkRetry makes owner's claimed event pending again (RETRY) at next,
// records lastErr (truncated to outbox.MaxErrorLen characters) and, with
// countAttempt, increments attempts. It reports whether the row changed.
func (s *Store) MarkRetry(ctx context.Context, ex outbox.Executor, owner, id string, next time.Time, lastErr string, countAttempt bool) (bool, error) {
	ok, err := execOne(ctx, ex, s.q.markRetry, s.t(next), outbox.TruncateError(lastErr), countArg(countAttempt), id, owner)
	if err != nil {
		return false, fmt.Errorf("outboxsql: mark retry %s in %s: %w", id, s.table, s.explain(err))
	}
	return ok, nil
}

// MarkDead moves owner's claimed event to DEAD at now, records lastErr
// (truncated) and, with countAttempt, increments attempts. It reports
// whether the row changed.
func (s *Store) MarkDead(ctx context.Context, ex outbox.Executor, owner, id string, now time.Time, lastErr string, countAttempt bool) (bool, error) {
	ok, err := execOne(ctx, ex, s.q.markDead, s.t(now), outbox.TruncateError(lastErr), countArg(countAttempt), id, owner)
	if err != nil {
		return false, fmt.Errorf("outboxsql: mark dead %s in %s: %w", id, s.table, s.explain(err))
	}
	return ok, nil
}

// Release drops owner's claim on pending events and returns how many rows
// changed.
func (s *Store) Release(ctx context.Context, ex outbox.Executor, owner string, ids []string) (int64, error) {
	n, err := s.execIDs(ctx, ex, s.q.release, []any{owner}, ids)
	if err != nil {
		return n, fmt.Errorf("outboxsql: release in %s: %w", s.table, s.explain(err))
	}
	return n, nil
}

// Replay moves DEAD events back to NEW: zero attempts, due at now,
// unclaimed, no completion time; the last error is kept. It returns how
// many rows changed.
func (s *Store) Replay(ctx context.Context, ex outbox.Executor, ids []string, now time.Time) (int64, error) {
	n, err := s.execIDs(ctx, ex, s.q.replay, []any{s.t(now)}, ids)
	if err != nil {
		return n, fmt.Errorf("outboxsql: replay in %s: %w", s.table, s.explain(err))
	}
	return n, nil
}

// queryArgs binds the filters of q (see queryWhere): the four status slots
// hold the wanted statuses, repeated to fill them, or all four when q asks
// for none. Statuses outside NEW..DEAD match no row.
func queryArgs(q outbox.Query) []any {
	statuses := []int{int(outbox.StatusNew), int(outbox.StatusDone), int(outbox.StatusRetry), int(outbox.StatusDead)}
	if len(q.Statuses) > 0 {
		statuses = statuses[:0]
		for _, st := range q.Statuses {
			if st >= outbox.StatusNew && st <= outbox.StatusDead && !slices.Contains(statuses, int(st)) {
				statuses = append(statuses, int(st))
			}
		}
		if len(statuses) == 0 {
			statuses = append(statuses, -1) // only unknown statuses: match nothing
		}
	}
	args := make([]any, 0, 10)
	for i := range 4 {
		args = append(args, statuses[i%len(statuses)])
	}
	return append(args, q.AggregateType, q.AggregateType, q.EventType, q.EventType, q.AfterID)
}

// List returns events matching q ordered by id, at most q.Limit
// (DefaultListLimit when zero).
func (s *Store) List(ctx context.Context, ex outbox.Executor, q outbox.Query) ([]outbox.Record, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	recs, err := s.queryRecords(ctx, ex, s.q.list, append(queryArgs(q), limit)...)
	if err != nil {
		return nil, fmt.Errorf("outboxsql: list %s: %w", s.table, s.explain(err))
	}
	return recs, nil
}

// Count returns how many events match q; q.Limit is ignored.
func (s *Store) Count(ctx context.Context, ex outbox.Executor, q outbox.Query) (int64, error) {
	var n int64
	if err := ex.QueryRowContext(ctx, s.q.count, queryArgs(q)...).Scan(&n); err != nil {
		return 0, fmt.Errorf("outboxsql: count %s: %w", s.table, s.explain(err))
	}
	return n, nil
}

// Stats counts events by status and finds the creation time of the oldest
// pending one.
func (s *Store) Stats(ctx context.Context, ex outbox.Executor) (outbox.Stats, error) {
	st := outbox.Stats{ByStatus: make(map[outbox.Status]int64, 4)}
	rows, err := ex.QueryContext(ctx, s.q.stats)
	if err != nil {
		return st, fmt.Errorf("outboxsql: stats of %s: %w", s.table, s.explain(err))
	}
	defer rows.Close()
	for rows.Next() {
		var status, n int64
		if err := rows.Scan(&status, &n); err != nil {
			return st, fmt.Errorf("outboxsql: stats of %s: %w", s.table, err)
		}
		st.ByStatus[outbox.Status(status)] = n
	}
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("outboxsql: stats of %s: %w", s.table, err)
	}
	oldest := timeCol{d: s.d}
	if err := ex.QueryRowContext(ctx, s.q.oldest).Scan(&oldest); err != nil {
		return st, fmt.Errorf("outboxsql: stats of %s: %w", s.table, err)
	}
	if oldest.err != nil {
		return st, fmt.Errorf("outboxsql: stats of %s: %w", s.table, oldest.err)
	}
	st.OldestPending = oldest.t
	return st, nil
}

// Purge deletes at most limit DONE or DEAD events completed (or, without a
// completion time, created) before before, and returns how many.
func (s *Store) Purge(ctx context.Context, ex outbox.Executor, before time.Time, limit int) (int64, error) {
	if limit <= 0 {
		return 0, nil
	}
	res, err := ex.ExecContext(ctx, s.q.purge, s.t(before), limit)
	if err != nil {
		return 0, fmt.Errorf("outboxsql: purge %s: %w", s.table, s.explain(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("outboxsql: purge %s: %w", s.table, err)
	}
	return n, nil
}

// queryRecords runs a query that selects columns and scans every row.
func (s *Store) queryRecords(ctx context.Context, ex outbox.Executor, query string, args ...any) ([]outbox.Record, error) {
	rows, err := ex.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var recs []outbox.Record
	for rows.Next() {
		r, err := s.scanRecord(rows)
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return recs, rows.Close()
}

// scanRecord reads one row of columns. Only database errors fail it; a row
// whose content cannot be decoded is returned with Record.Err set.
func (s *Store) scanRecord(rows *sql.Rows) (outbox.Record, error) {
	var (
		r                            outbox.Record
		f                            outbox.EnvelopeFields
		payload, headers             sql.NullString
		lastErr, lockedBy            sql.NullString
		payloadBytes                 nullBytes
		status, attempts             int64
		occurred, available, created = timeCol{d: s.d}, timeCol{d: s.d}, timeCol{d: s.d}
		done, lockedAt               = timeCol{d: s.d}, timeCol{d: s.d}
	)
	if err := rows.Scan(&f.ID, &f.Type, &f.AggregateType, &f.AggregateID, &f.TenantID, &payload, &payloadBytes, &headers,
		&status, &attempts, &occurred, &available, &created, &done, &lastErr, &lockedBy, &lockedAt); err != nil {
		return r, err
	}
	r.ID = f.ID
	r.Status = outbox.Status(status)
	r.Attempts = int(attempts)
	r.AvailableAt, r.CreatedAt, r.DoneAt, r.LockedAt = available.t, created.t, done.t, lockedAt.t
	r.LastError, r.LockedBy = lastErr.String, lockedBy.String
	f.OccurredAt, f.AvailableAt = occurred.t, available.t
	var errs []error
	for _, c := range []*timeCol{&occurred, &available, &created, &done, &lockedAt} {
		if c.err != nil {
			errs = append(errs, c.err)
		}
	}
	switch {
	case payload.Valid:
		f.Kind, f.Payload = outbox.PayloadJSON, payload.String
	case payloadBytes.valid:
		f.Kind, f.Payload = outbox.PayloadBytes, payloadBytes.s
	}
	if headers.Valid {
		h, err := decodeHeaders(headers.String)
		if err != nil {
			errs = append(errs, fmt.Errorf("headers: %w", err))
		}
		f.Headers = h
	}
	if err := errors.Join(errs...); err != nil {
		r.Err = fmt.Errorf("%w: stored event %s cannot be decoded: %w", outbox.ErrInvalidEnvelope, f.ID, err)
		return r, nil
	}
	r.Envelope, r.Err = outbox.RestoreEnvelope(f)
	return r, nil
}

// nullBytes scans a nullable BLOB, telling NULL from an empty value (which
// drivers may return as a nil slice).
type nullBytes struct {
	s     string
	valid bool
}

func (b *nullBytes) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		b.s, b.valid = "", false
	case []byte:
		b.s, b.valid = string(v), true
	case string:
		b.s, b.valid = v, true
	default:
		return fmt.Errorf("outboxsql: payload_bytes column holds %T, want bytes", src)
	}
	return nil
}
