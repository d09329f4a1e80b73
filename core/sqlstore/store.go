package sqlstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

var (
	_ outbox.Store  = (*Store)(nil)
	_ outbox.Purger = (*Store)(nil)

	_ outbox.RetentionPurger = (*Store)(nil)
)

// DefaultListLimit is how many records List returns when Query.Limit is zero.
const DefaultListLimit = 100

// Store is an outbox.Store and outbox.Purger on one SQL table. It owns its
// pool (a DB): only Insert runs in the caller's transaction. It is safe for
// concurrent use.
type Store struct {
	db DB
	// w runs the store's own writes outside business transactions (claims,
	// outcomes, heartbeats, purges): db, or on a dialect with one write
	// lock, db one statement at a time (see serialConn).
	w      Conn
	d      *dialect
	table  string
	q      *queries
	schema []string
	// indexes are the names of the indexes the schema creates, without
	// their schema; Migrate checks that they exist.
	indexes []string
	// ord is where ordered claims walk the keys (see ordering.go).
	ord orderState
	// ctl holds the control tables' statements (see control.go).
	ctl *controlSQL
	// wk carries the wake-ups between instances (see wake.go).
	wk *wakeState
	// part is the partitioned mode (WithPartitions), nil without it.
	part *partitioning
}

// Option configures a Store.
type Option func(*Options)

// Options is what the Options of New set.
type Options struct {
	// Table is the outbox table's name (default DefaultTable).
	Table string
	// Dialect is the table's database (required by New; outboxsql detects
	// it from the driver, outboxpgx sets PostgreSQL).
	Dialect Dialect
	// Listener hears wake-ups on PostgreSQL (WithListener).
	Listener Listener
	// WakeInterval is how often a listener reads the wake-up signal on
	// the other databases (WithWakeInterval).
	WakeInterval time.Duration
	// Partitions is the interval of the partitions of a partitioned
	// PostgreSQL table (WithPartitions); zero for a plain table.
	Partitions time.Duration
}

// Apply returns the Options opts set over the defaults, for bindings that
// need to know them before calling New.
func Apply(opts ...Option) Options {
	o := Options{Table: DefaultTable}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithDialect sets the table's database.
func WithDialect(d Dialect) Option {
	return func(o *Options) { o.Dialect = d }
}

// WithTable sets the outbox table's name (default DefaultTable), optionally
// schema-qualified ("app.outbox_event"). See ValidateTableName.
func WithTable(name string) Option {
	return func(o *Options) { o.Table = name }
}

// New returns a Store on the table the options name (WithTable; the
// dialect is required: WithDialect), running its statements on db. Every
// SQL statement is built here, once. It does not touch the database.
// Errors wrap outbox.ErrInvalidConfig.
func New(db DB, opts ...Option) (*Store, error) {
	o := Apply(opts...)
	if db == nil || o.Dialect == nil {
		return nil, fmt.Errorf("%w: sqlstore: New needs a DB and a Dialect (WithDialect)", outbox.ErrInvalidConfig)
	}
	if err := ValidateTableName(o.Table); err != nil {
		return nil, err
	}
	spec := o.Dialect.spec()
	schema, err := renderSchema(spec, o.Table)
	if err != nil {
		return nil, err
	}
	indexes, err := checkIdentifiers(spec, o.Table, schema)
	if err != nil {
		return nil, err
	}
	ctl, err := buildControl(spec, o.Table)
	if err != nil {
		return nil, err
	}
	wk, err := newWakeState(spec, o.Table, o)
	if err != nil {
		return nil, err
	}
	var part *partitioning
	if o.Partitions != 0 {
		if part, err = newPartitioning(spec, o.Table, o.Partitions); err != nil {
			return nil, err
		}
		schema = part.partitionedSchema(o.Table, schema)
	}
	var w Conn = db
	if spec.oneWriter {
		w = newSerialConn(db)
	}
	return &Store{db: db, w: w, d: spec, table: o.Table, q: buildQueries(spec, o.Table), schema: append(schema, ctl.schema...), indexes: indexes, ctl: ctl, wk: wk, part: part}, nil
}

// Table returns the name of the store's table.
func (s *Store) Table() string { return s.table }

// Dialect returns the store's dialect.
func (s *Store) Dialect() Dialect { return s.d }

func (s *Store) t(t time.Time) any { return s.d.timeArg(t.UTC()) }

// Insert adds events as NEW in tx, in multi-row INSERTs of at most the
// dialect's batch size. With an owner, events that are not Delayed are
// inserted claimed by it. tx must be a Tx (see the package outboxsql and
// outboxpgx TxContexts).
func (s *Store) Insert(ctx context.Context, tx outbox.Tx, now time.Time, owner string, events []outbox.Envelope) error {
	t, ok := tx.(Tx)
	if !ok {
		return fmt.Errorf("%w: sqlstore: the transaction (%T) carries no SQL connection: use the TxContext of outboxsql, of an ORM adapter or of outboxpgx",
			outbox.ErrInvalidConfig, tx)
	}
	ex := t.Conn()
	now = now.UTC()
	if len(events) == 0 {
		return nil
	}
	ids := make([]string, len(events))
	seen := make(map[string]struct{}, len(events))
	for i, e := range events {
		if _, dup := seen[e.ID()]; dup {
			return fmt.Errorf("%w: sqlstore: event id %s appears twice in the batch", outbox.ErrDuplicateEvent, e.ID())
		}
		seen[e.ID()] = struct{}{}
		ids[i] = e.ID()
	}
	var copier Copier // set when the batch is copied
	if c, ok := ex.(Copier); ok && len(events) >= CopyThreshold {
		copier = c
	}
	if copier != nil || (s.d.onConflict != nil && len(events) >= savepointBatch) {
		return s.insertSaved(ctx, ex, copier, events, ids, now, owner)
	}
	written := 0 // events of the chunks before this one, all inserted
	for chunk := range slices.Chunk(events, s.d.maxBatch) {
		cols := batchCols(chunk, owner)
		query := s.q.insert.sql(cols, len(chunk), s.d.onConflict != nil)
		chunkIDs := ids[written : written+len(chunk)]
		mine, err := s.insertChunk(ctx, ex, query, chunkIDs, s.insertArgs(cols, chunk, now, owner))
		if err != nil {
			return s.insertErr(len(chunk), err)
		}
		if len(mine) < len(chunk) { // an id is stored already
			return s.duplicate(ctx, ex, append(ids[:written:written], mine...), chunkIDs)
		}
		written += len(chunk)
	}
	return nil
}

// insertChunk runs query, the INSERT of the events whose ids are ids, and
// returns the ids it wrote: all of them, or fewer when an id is stored
// already. A statement of several rows with the conflict clause
// (PostgreSQL) tells which by the ids it returns; any other writes all its
// rows or none (see insertNew).
func (s *Store) insertChunk(ctx context.Context, ex Conn, query string, ids []string, args []any) ([]string, error) {
	if s.d.onConflict != nil && len(ids) > 1 {
		return s.insertReturning(ctx, ex, query, args)
	}
	if ok, err := s.insertNew(ctx, ex, query, args...); !ok {
		return nil, err
	}
	return ids, nil
}

// insertNew runs query, an INSERT through c, and reports whether it wrote
// its rows: false when a key is stored already, which leaves the
// transaction usable on every database. Without a conflict clause (MySQL,
// SQLite) the statement then fails and only it is rolled back; with one
// (PostgreSQL) a row of one is skipped, and the count is 0.
func (s *Store) insertNew(ctx context.Context, c Conn, query string, args ...any) (bool, error) {
	n, err := c.Exec(ctx, query, args...)
	if err != nil {
		if s.d.onConflict == nil && s.d.uniqueViolation(err) {
			return false, nil
		}
		return false, err
	}
	return n > 0, nil
}

// savepointBatch is the smallest batch that a dialect with a conflict
// clause (PostgreSQL) inserts in a savepoint, with plain statements,
// rather than with the conflict clause. The clause costs the server a
// look-up of every id before its row is written (about a fifth more per
// row in a 100-row INSERT), the savepoint two round trips per batch;
// they cost the same at about 20 rows.
const savepointBatch = 32

// insertArgs returns the bind arguments of the rows of events, with cols.
func (s *Store) insertArgs(cols insertCols, events []outbox.Envelope, now time.Time, owner string) []any {
	args := make([]any, 0, len(events)*cols.count())
	for _, e := range events {
		args = s.appendInsertArgs(args, cols, e, now, owner)
	}
	return args
}

// insertReturning runs an INSERT … RETURNING of ids and returns them.
func (s *Store) insertReturning(ctx context.Context, ex Conn, query string, args []any) ([]string, error) {
	rows, err := ex.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			_ = rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, errors.Join(rows.Err(), rows.Close())
}

// insertSaved inserts a large batch in a savepoint, with plain statements:
// a COPY through copier if set, else multi-row INSERTs. A failed statement
// aborts a PostgreSQL transaction, and COPY has no conflict clause; when
// an id is stored already, the savepoint is rolled back and the caller's
// transaction goes on without these events. (Looking the ids up first
// would cost a round trip too and still lose the race against a
// concurrent writer of the same id.)
func (s *Store) insertSaved(ctx context.Context, ex Conn, copier Copier, events []outbox.Envelope, ids []string, now time.Time, owner string) error {
	if _, err := ex.Exec(ctx, "SAVEPOINT "+insertSavepoint); err != nil {
		return s.insertErr(len(events), err)
	}
	err := s.insertPlain(ctx, ex, copier, events, now, owner)
	if err == nil {
		if _, err := ex.Exec(ctx, "RELEASE SAVEPOINT "+insertSavepoint); err != nil {
			return s.insertErr(len(events), err)
		}
		return nil
	}
	if rerr := s.rollbackTo(ctx, ex); rerr != nil {
		return fmt.Errorf("sqlstore: insert %d events into %s failed, and so did the rollback to the savepoint before it (roll the transaction back): %w",
			len(events), s.table, errors.Join(s.explain(err), rerr))
	}
	if s.d.uniqueViolation != nil && s.d.uniqueViolation(err) {
		return s.duplicate(ctx, ex, nil, ids) // the savepoint took the rows back
	}
	return s.insertErr(len(events), err)
}

// insertPlain inserts events without a conflict clause: through copier if
// set, else in multi-row INSERTs of at most the dialect's batch size.
func (s *Store) insertPlain(ctx context.Context, ex Conn, copier Copier, events []outbox.Envelope, now time.Time, owner string) error {
	if copier != nil {
		cols := batchCols(events, owner)
		columns := cols.columns()
		rows := make([][]any, 0, len(events))
		for _, e := range events {
			rows = append(rows, s.appendInsertArgs(make([]any, 0, len(columns)), cols, e, now, owner))
		}
		_, err := copier.CopyFrom(ctx, s.table, columns, rows)
		return err
	}
	for chunk := range slices.Chunk(events, s.d.maxBatch) {
		cols := batchCols(chunk, owner)
		if _, err := ex.Exec(ctx, s.q.insert.sql(cols, len(chunk), false), s.insertArgs(cols, chunk, now, owner)...); err != nil {
			return err
		}
	}
	return nil
}

// insertSavepoint is the savepoint a large batch is inserted in.
const insertSavepoint = "outbox_insert"

// rollbackTo rolls back to insertSavepoint and releases it.
func (s *Store) rollbackTo(ctx context.Context, ex Conn) error {
	if _, err := ex.Exec(ctx, "ROLLBACK TO SAVEPOINT "+insertSavepoint); err != nil {
		return err
	}
	_, err := ex.Exec(ctx, "RELEASE SAVEPOINT "+insertSavepoint)
	return err
}

// insertErr wraps a failed insert; a duplicate key (another transaction
// wrote the id at the same time) wraps outbox.ErrDuplicateEvent.
func (s *Store) insertErr(n int, err error) error {
	if s.d.uniqueViolation != nil && s.d.uniqueViolation(err) {
		return fmt.Errorf("%w: sqlstore: insert %d events into %s: %w", outbox.ErrDuplicateEvent, n, s.table, err)
	}
	return fmt.Errorf("sqlstore: insert %d events into %s: %w", n, s.table, s.explain(err))
}

// duplicate takes back the rows this Insert wrote (mine), so that the
// caller's transaction holds none of its events and goes on, and returns
// the error naming which of the failed chunk's ids were stored already.
func (s *Store) duplicate(ctx context.Context, ex Conn, mine, chunk []string) error {
	if len(mine) > 0 {
		if _, err := s.execIDsOn(ctx, ex, s.q.undoInsert, nil, mine); err != nil {
			return fmt.Errorf("sqlstore: insert into %s: an event id is stored already, and the rows written before could not be taken back (roll the transaction back): %w",
				s.table, s.explain(err))
		}
	}
	dups, err := s.existing(ctx, ex, chunk)
	if err != nil {
		return fmt.Errorf("%w: sqlstore: insert into %s: %w", outbox.ErrDuplicateEvent, s.table, err)
	}
	return duplicateErr(dups)
}

// existing returns which of ids are stored (as ex sees them).
func (s *Store) existing(ctx context.Context, ex Conn, ids []string) ([]string, error) {
	var found []string
	for chunk := range slices.Chunk(ids, s.q.existing.chunk()) {
		query, args := s.q.existing.bind(nil, chunk)
		rows, err := ex.Query(ctx, query, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				_ = rows.Close()
				return nil, err
			}
			found = append(found, id)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, err
		}
	}
	return found, nil
}

func duplicateErr(ids []string) error {
	if len(ids) == 0 { // the other writer's row is gone again
		return fmt.Errorf("%w: sqlstore: an event id was stored by another transaction; none of the events was inserted", outbox.ErrDuplicateEvent)
	}
	slices.Sort(ids)
	shown := ids[:min(len(ids), 5)]
	more := ""
	if len(ids) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(ids)-len(shown))
	}
	return fmt.Errorf("%w: sqlstore: event id %s%s stored already; none of the events was inserted",
		outbox.ErrDuplicateEvent, strings.Join(shown, ", "), more)
}

// batchCols returns the optional columns that one of events sets: those an
// insert of the batch names.
func batchCols(events []outbox.Envelope, owner string) insertCols {
	var c insertCols
	for _, e := range events {
		c |= rowCols(e, owner)
	}
	return c
}

// rowCols returns the optional columns that e sets, inserted with owner.
func rowCols(e outbox.Envelope, owner string) insertCols {
	var c insertCols
	if e.TenantID() != "" {
		c |= colTenant
	}
	if e.SchemaVersion() != 1 {
		c |= colVersion
	}
	if e.PayloadKind() == outbox.PayloadBytes {
		c |= colPayloadBytes
	} else {
		c |= colPayload
	}
	if e.NumHeaders() > 0 {
		c |= colHeaders
	}
	if owner != "" && !e.Delayed() {
		c |= colClaim
	}
	if e.Ordered() {
		c |= colKey
	}
	return c
}

// appendInsertArgs appends the bind arguments of one inserted row to args:
// those of cols, in the order of cols.columns().
func (s *Store) appendInsertArgs(args []any, cols insertCols, e outbox.Envelope, now time.Time, owner string) []any {
	args = append(args, e.ID(), e.Type(), e.AggregateType(), e.AggregateID())
	if cols&colTenant != 0 {
		args = append(args, e.TenantID())
	}
	if cols&colVersion != 0 {
		args = append(args, int64(e.SchemaVersion()))
	}
	bytes := e.PayloadKind() == outbox.PayloadBytes
	if cols&colPayload != 0 {
		var payload any
		if !bytes {
			payload = e.PayloadString()
		}
		args = append(args, payload)
	}
	if cols&colPayloadBytes != 0 {
		var payload any
		if bytes {
			payload = []byte(e.PayloadString())
		}
		args = append(args, payload)
	}
	if cols&colHeaders != 0 {
		args = append(args, encodeHeaders(e))
	}
	available := now
	if e.AvailableAt().After(now) {
		available = e.AvailableAt()
	}
	args = append(args, s.t(e.OccurredAt()), s.t(available), s.t(now))
	if cols&colClaim != 0 {
		var lockedBy, lockedAt any
		if owner != "" && !e.Delayed() {
			lockedBy, lockedAt = owner, s.t(now)
		}
		args = append(args, lockedBy, lockedAt)
	}
	if cols&colKey != 0 {
		var key any
		if e.Ordered() {
			key = e.OrderingKey()
		}
		args = append(args, key)
	}
	return args
}

// Claim atomically claims up to req.Limit due pending events for req.Owner
// and returns them oldest due first. A row that cannot be decoded is
// returned with Record.Err set rather than failing the claim.
func (s *Store) Claim(ctx context.Context, req outbox.ClaimRequest) ([]outbox.Record, error) {
	if req.Limit <= 0 {
		return nil, nil
	}
	if req.Owner == "" {
		return nil, fmt.Errorf("%w: sqlstore: claim without an owner", outbox.ErrInvalidConfig)
	}
	f, ok, err := claimFilter(req)
	if err != nil || !ok {
		return nil, err
	}
	claim := s.d.claim
	if claim == nil {
		claim = sharedClaim
	}
	if req.Ordered && s.d.claim == nil {
		claim = sharedOrderedClaim
	}
	if req.Ordered && !req.DeadSkips {
		if err := s.sweepParked(ctx, req.Now.UTC(), req.Lease); err != nil {
			return nil, fmt.Errorf("sqlstore: claim from %s: %w", s.table, s.explain(err))
		}
	}
	recs, err := claim(ctx, s, req, f)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: claim from %s: %w", s.table, s.explain(err))
	}
	sortDue(recs)
	return recs, nil
}

// claimArgs holds the arguments of the two claim statements.
type claimParams struct {
	recoverSet, recoverWhere, freshSet, freshWhere []any
}

func (s *Store) claimArgs(req outbox.ClaimRequest) claimParams {
	now := req.Now.UTC()
	return claimParams{
		recoverSet:   []any{outbox.ErrInFlight.Error(), outbox.ErrClaimExpired.Error(), req.Owner, s.t(now)},
		recoverWhere: []any{s.t(now.Add(-req.Lease))},
		freshSet:     []any{req.Owner, s.t(now)},
		freshWhere:   []any{s.t(now), s.t(now.Add(-req.SkipRecent))},
	}
}

// sharedClaim runs the recovery, then the fresh claim for the rest of the
// limit, each one UPDATE … RETURNING.
func sharedClaim(ctx context.Context, s *Store, req outbox.ClaimRequest, f typeFilter) ([]outbox.Record, error) {
	a := s.claimArgs(req)
	recs, err := s.recoverExpired(ctx, req, f, a, make([]outbox.Record, 0, req.Limit))
	if err != nil || len(recs) == req.Limit {
		return recs, err
	}
	return s.freshRows(ctx, s.w, f, a, req.Limit-len(recs), recs)
}

// recoverExpired runs the recovery of expired claims with filter f,
// unless req asks for none.
func (s *Store) recoverExpired(ctx context.Context, req outbox.ClaimRequest, f typeFilter, a claimParams, recs []outbox.Record) ([]outbox.Record, error) {
	if req.NoRecovery {
		return recs, nil
	}
	query, args := s.q.recoverClaim, slices.Concat(a.recoverSet, a.recoverWhere, []any{req.Limit})
	if f.on() {
		query, args = s.q.filter.recoverSQL(f, a, req.Limit)
	}
	got, err := s.queryRecords(ctx, s.w, nil, query, args...)
	if err != nil {
		return append(recs, got...), err
	}
	got, err = s.headsOnly(ctx, s.w, req, got)
	return append(recs, got...), err
}

// sortDue orders records by due time, then id: the order of the claim.
func sortDue(recs []outbox.Record) {
	slices.SortFunc(recs, func(a, b outbox.Record) int {
		return cmp.Or(a.AvailableAt.Compare(b.AvailableAt), cmp.Compare(a.ID, b.ID))
	})
}

// execIDs runs a batch statement over ids in chunks, with fixed arguments
// first, and returns the rows affected.
func (s *Store) execIDs(ctx context.Context, b *idsSQL, fixed []any, ids []string) (int64, error) {
	return s.execIDsOn(ctx, s.w, b, fixed, ids)
}

// execIDsOn is execIDs on ex.
func (s *Store) execIDsOn(ctx context.Context, ex Conn, b *idsSQL, fixed []any, ids []string) (int64, error) {
	var total int64
	for chunk := range slices.Chunk(ids, b.chunk()) {
		query, args := b.bind(fixed, chunk)
		n, err := ex.Exec(ctx, query, args...)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// MarkDone marks owner's claimed events DONE at now and returns how many
// rows changed; ids not claimed by owner are left alone.
func (s *Store) MarkDone(ctx context.Context, owner string, ids []string, now time.Time) (int64, error) {
	n, err := s.execIDs(ctx, s.q.markDone, []any{s.t(now), owner}, ids)
	if err != nil {
		return n, fmt.Errorf("sqlstore: mark done in %s: %w", s.table, s.explain(err))
	}
	return n, nil
}

// outcome runs the fenced single-row update of MarkRetry or MarkDead.
func (s *Store) outcome(ctx context.Context, what, query string, o outbox.Outcome) (bool, error) {
	count := 0
	if o.CountAttempt {
		count = 1
	}
	n, err := s.w.Exec(ctx, query, s.t(o.At), outbox.TruncateError(o.Error), count, encodeSubscribers(o.Subscribers), o.ID, o.Owner)
	if err != nil {
		return false, fmt.Errorf("sqlstore: %s %s in %s: %w", what, o.ID, s.table, s.explain(err))
	}
	return n > 0, nil
}

// MarkRetry makes o.Owner's claimed event pending again (RETRY) at o.At,
// records o.Error (truncated to outbox.MaxErrorLen characters) and, with
// o.CountAttempt, increments attempts. It reports whether the row changed.
func (s *Store) MarkRetry(ctx context.Context, o outbox.Outcome) (bool, error) {
	return s.outcome(ctx, "mark retry", s.q.markRetry, o)
}

// MarkDead moves o.Owner's claimed event to DEAD at o.At, records o.Error
// (truncated) and, with o.CountAttempt, increments attempts. It reports
// whether the row changed.
func (s *Store) MarkDead(ctx context.Context, o outbox.Outcome) (bool, error) {
	return s.outcome(ctx, "mark dead", s.q.markDead, o)
}

// CountAttempt increments the attempts of owner's claimed event, records
// outbox.ErrInFlight as its last error, and reports whether the row
// changed.
func (s *Store) CountAttempt(ctx context.Context, owner, id string) (bool, error) {
	n, err := s.w.Exec(ctx, s.q.countAttempt, outbox.ErrInFlight.Error(), id, owner)
	if err != nil {
		return false, fmt.Errorf("sqlstore: count an attempt of %s in %s: %w", id, s.table, s.explain(err))
	}
	return n > 0, nil
}

// Renew sets the claim time of owner's claimed pending events to now (a
// heartbeat: their deliveries are still running) and returns how many rows
// changed.
func (s *Store) Renew(ctx context.Context, owner string, ids []string, now time.Time) (int64, error) {
	n, err := s.execIDs(ctx, s.q.renew, []any{s.t(now), owner}, ids)
	if err != nil {
		return n, fmt.Errorf("sqlstore: renew claims in %s: %w", s.table, s.explain(err))
	}
	return n, nil
}

// Release drops owner's claim on pending events and returns how many rows
// changed.
func (s *Store) Release(ctx context.Context, owner string, ids []string) (int64, error) {
	n, err := s.execIDs(ctx, s.q.release, []any{owner}, ids)
	if err != nil {
		return n, fmt.Errorf("sqlstore: release in %s: %w", s.table, s.explain(err))
	}
	return n, nil
}

// Replay moves DEAD events back to NEW: zero attempts, due at now,
// unclaimed, no completion time; the last error is kept. It returns how
// many rows changed.
func (s *Store) Replay(ctx context.Context, ids []string, now time.Time) (int64, error) {
	n, err := s.endingDead(ctx, ids, func() (int64, error) { return s.execIDs(ctx, s.q.replay, []any{s.t(now)}, ids) })
	if err != nil {
		return n, fmt.Errorf("sqlstore: replay in %s: %w", s.table, s.explain(err))
	}
	return n, nil
}

// Delete removes DEAD events and returns how many rows it removed.
func (s *Store) Delete(ctx context.Context, ids []string) (int64, error) {
	n, err := s.endingDead(ctx, ids, func() (int64, error) { return s.execIDs(ctx, s.q.deleteDead, nil, ids) })
	if err != nil {
		return n, fmt.Errorf("sqlstore: delete from %s: %w", s.table, s.explain(err))
	}
	return n, nil
}

// Get returns the event id with its state, or an error wrapping
// outbox.ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (outbox.Record, error) {
	recs, err := s.queryRecords(ctx, s.db, nil, s.q.get, id)
	if err != nil {
		return outbox.Record{}, fmt.Errorf("sqlstore: get %s from %s: %w", id, s.table, s.explain(err))
	}
	if len(recs) == 0 {
		return outbox.Record{}, fmt.Errorf("%w: no event with id %s in %s", outbox.ErrNotFound, id, s.table)
	}
	return recs[0], nil
}

// where returns the WHERE clause of List and Count for q, without q.IDs,
// and its arguments. Only the filters q sets are written out, so that a
// count reads an index alone where it can. The statuses are one equality
// when q asks for one (an index on (…, status, event_id) then serves a page
// in id order), else four slots holding the wanted statuses, repeated to
// fill them, or all four when q asks for none. Statuses outside NEW..DEAD
// match no row.
func (s *Store) where(q outbox.Query) (string, []any) {
	statuses := []any{int(outbox.StatusNew), int(outbox.StatusDone), int(outbox.StatusRetry), int(outbox.StatusDead)}
	if len(q.Statuses) > 0 {
		statuses = statuses[:0]
		for _, st := range q.Statuses {
			if st >= outbox.StatusNew && st <= outbox.StatusDead && !slices.Contains(statuses, any(int(st))) {
				statuses = append(statuses, int(st))
			}
		}
		if len(statuses) == 0 {
			statuses = append(statuses, -1) // only unknown statuses: match nothing
		}
	}
	where := " WHERE status = ?"
	args := make([]any, 0, 9)
	if len(statuses) == 1 {
		args = append(args, statuses[0])
	} else {
		where = " WHERE status IN (?, ?, ?, ?)"
		for i := range 4 {
			args = append(args, statuses[i%len(statuses)])
		}
	}
	for _, f := range []struct{ col, arg string }{
		{"aggregate_type", q.AggregateType},
		{"event_type", q.EventType},
	} {
		if f.arg != "" {
			where += s.d.equalWhere(f.col)
			args = append(args, s.d.equalArgs(f.arg)...)
		}
	}
	if q.AfterID != "" {
		where += " AND event_id > ?"
		args = append(args, q.AfterID)
	}
	if q.TenantID != "" {
		where += s.d.tenantWhere()
		args = append(args, s.d.equalArgs(q.TenantID)...)
	}
	if q.Blocking {
		where += " AND " + s.blockingWhere("o")
	}
	return where, args
}

// filtered runs fn once per chunk of q.IDs (at most the dialect's batch
// size), or once when q selects no ids, with the statement's WHERE clause
// and its arguments.
func (s *Store) filtered(q outbox.Query, fn func(where string, args []any) error) error {
	where, args := s.where(q)
	if len(q.IDs) == 0 {
		return fn(where, args)
	}
	for chunk := range slices.Chunk(q.IDs, s.d.maxBatch) {
		chunkArgs := slices.Clone(args)
		for _, id := range chunk {
			chunkArgs = append(chunkArgs, id)
		}
		if err := fn(where+" AND event_id IN (?"+strings.Repeat(", ?", len(chunk)-1)+")", chunkArgs); err != nil {
			return err
		}
	}
	return nil
}

// List returns events matching q ordered by id, at most q.Limit
// (DefaultListLimit when zero).
func (s *Store) List(ctx context.Context, q outbox.Query) ([]outbox.Record, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	recs := make([]outbox.Record, 0, limit)
	err := s.filtered(q, func(where string, args []any) (err error) {
		recs, err = s.queryRecords(ctx, s.db, recs, s.d.rebind("SELECT "+s.q.columns+" FROM "+s.table+" o"+where+" ORDER BY event_id LIMIT ?", 1), append(args, limit)...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlstore: list %s: %w", s.table, s.explain(err))
	}
	if len(q.IDs) > s.d.maxBatch { // several chunks: merge them
		slices.SortFunc(recs, func(a, b outbox.Record) int { return cmp.Compare(a.ID, b.ID) })
		recs = recs[:min(len(recs), limit)]
	}
	return recs, nil
}

// Count returns how many events match q; q.Limit is ignored.
func (s *Store) Count(ctx context.Context, q outbox.Query) (int64, error) {
	var total int64
	err := s.filtered(q, func(where string, args []any) error {
		n, err := s.queryInt(ctx, s.d.rebind("SELECT COUNT(*) FROM "+s.table+" o"+where, 1), args...)
		total += n
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlstore: count %s: %w", s.table, s.explain(err))
	}
	return total, nil
}

// queryInt runs a query that returns one integer.
func (s *Store) queryInt(ctx context.Context, query string, args ...any) (int64, error) {
	return s.queryIntOn(ctx, s.db, query, args...)
}

// exactDoneBelow is the size of a table (as the dialect's rowsEstimate
// has it) under which Stats counts the DONE rows exactly: reading that
// many index entries takes milliseconds.
const exactDoneBelow = 100_000

// Stats counts the pending events by status, the due ones at now and the
// claimed ones, finds the creation time of the oldest pending one and the
// pending backlog per event type, counts the DEAD events and the blocked
// keys, each from the indexes that hold those rows.
// On a table of exactDoneBelow rows or more, the DONE figure is the
// dialect's estimate of the table's size less the other statuses
// (Stats.DoneEstimated); it never reads the DONE rows.
func (s *Store) Stats(ctx context.Context, now time.Time) (outbox.Stats, error) {
	st := outbox.Stats{ByStatus: make(map[outbox.Status]int64, 4)}
	fail := func(err error) (outbox.Stats, error) {
		return st, fmt.Errorf("sqlstore: stats of %s: %w", s.table, s.explain(err))
	}
	var others int64
	var types map[string]*outbox.TypeBacklog // read with the pending rows (no statsTypes)
	if s.q.statsTypes == "" {
		types = map[string]*outbox.TypeBacklog{}
	}
	err := s.eachRow(ctx, s.q.statsPending, []any{s.t(now)}, func(rows Rows) error {
		var status, n, due int64
		var typ string
		oldest := timeCol{d: s.d}
		dest := []any{&status, &n, &due, &oldest}
		if types != nil {
			dest = []any{&status, &typ, &n, &due, &oldest}
		}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		if oldest.err != nil {
			return oldest.err
		}
		if types != nil {
			tb := types[typ]
			if tb == nil {
				tb = &outbox.TypeBacklog{Type: typ}
				types[typ] = tb
			}
			tb.Pending += n
			if tb.Oldest.IsZero() || oldest.t.Before(tb.Oldest) {
				tb.Oldest = oldest.t
			}
		}
		st.ByStatus[outbox.Status(status)] += n
		st.Due += due
		others += n
		if !oldest.t.IsZero() && (st.OldestPending.IsZero() || oldest.t.Before(st.OldestPending)) {
			st.OldestPending = oldest.t
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	dead, err := s.queryInt(ctx, s.q.statsDead)
	if err != nil {
		return fail(err)
	}
	if dead > 0 {
		st.ByStatus[outbox.StatusDead] = dead
	}
	others += dead
	err = s.eachRow(ctx, s.q.statsOwed, nil, func(rows Rows) error {
		var n int64
		var subs nullBytes
		if err := rows.Scan(&subs, &n); err != nil {
			return err
		}
		st.AddDeadSubscribers(decodeSubscribers(subs), n)
		return nil
	})
	if err != nil {
		return fail(err)
	}
	estimate := s.d.rowsEstimate
	if s.part != nil {
		estimate = partitionedRowsEstimate
	}
	query, args := estimate(s.table)
	size, err := s.queryInt(ctx, query, args...)
	if err != nil {
		return fail(err)
	}
	done := size - others
	if size >= exactDoneBelow {
		st.DoneEstimated = true
	} else if done, err = s.queryInt(ctx, s.q.statsDone); err != nil {
		return fail(err)
	}
	if done > 0 {
		st.ByStatus[outbox.StatusDone] = done
	}
	blocked := timeCol{d: s.d}
	if err := s.scanOne(ctx, s.q.ord.blocked, &st.BlockedKeys, &blocked); err != nil {
		return fail(fmt.Errorf("blocked keys: %w", err))
	}
	if blocked.err != nil {
		return st, fmt.Errorf("sqlstore: stats of %s: %w", s.table, blocked.err)
	}
	st.OldestBlocked = blocked.t
	if st.Claimed, err = s.queryInt(ctx, s.q.statsClaimed); err != nil {
		return fail(fmt.Errorf("claimed events: %w", err))
	}
	if types != nil {
		backlogs := make([]outbox.TypeBacklog, 0, len(types))
		for _, tb := range types {
			backlogs = append(backlogs, *tb)
		}
		st.SetTypes(backlogs)
	} else if err := s.statsTypes(ctx, &st); err != nil {
		return fail(fmt.Errorf("pending events per type: %w", err))
	}
	return st, nil
}

// statsTypes fills st.Types and st.TypesTruncated with the statement that
// reads them apart (statsTypes): the pending backlog per event type, most
// pending first (then by type), at most outbox.MaxStatsTypes of them.
func (s *Store) statsTypes(ctx context.Context, st *outbox.Stats) error {
	var types []outbox.TypeBacklog
	err := s.eachRow(ctx, s.q.statsTypes, []any{outbox.MaxStatsTypes + 1}, func(rows Rows) error {
		var tb outbox.TypeBacklog
		oldest := timeCol{d: s.d}
		if err := rows.Scan(&tb.Type, &tb.Pending, &oldest); err != nil {
			return err
		}
		if oldest.err != nil {
			return oldest.err
		}
		tb.Oldest = oldest.t
		types = append(types, tb)
		return nil
	})
	if err != nil {
		return err
	}
	st.SetTypes(types)
	return nil
}

// Purge deletes at most req.Limit events in req.Status (DONE or DEAD), of
// req.TenantID when set, completed (or, without a completion time,
// created) before req.Before, and returns how many.
func (s *Store) Purge(ctx context.Context, req outbox.PurgeRequest) (int64, error) {
	if req.Limit <= 0 {
		return 0, nil
	}
	if req.Status != outbox.StatusDone && req.Status != outbox.StatusDead {
		return 0, fmt.Errorf("%w: sqlstore: purge of %s events: only DONE and DEAD events are purged", outbox.ErrInvalidConfig, req.Status)
	}
	query, dead := s.q.purge, s.q.purgeDead
	if req.TenantID != "" {
		query, dead = s.q.purgeTenant, s.q.purgeDeadTenant
	}
	args := append(s.d.purgeSelection().args(s.d, int(req.Status), s.t(req.Before), req.TenantID), req.Limit)
	if req.Status == outbox.StatusDead {
		return s.purgeDead(ctx, dead, args)
	}
	n, err := s.w.Exec(ctx, query, args...)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: purge %s: %w", s.table, s.explain(err))
	}
	return n, nil
}

// CountPurgeable returns how many events Purge deletes for req, all
// batches together (req.Limit is ignored): in req.Status, of
// req.TenantID if set, completed (or, without a completion time, created)
// before req.Before — the rows Purge selects, by the same condition. For
// an operator's prompt before a purge.
func (s *Store) CountPurgeable(ctx context.Context, req outbox.PurgeRequest) (int64, error) {
	if req.Status != outbox.StatusDone && req.Status != outbox.StatusDead {
		return 0, fmt.Errorf("%w: sqlstore: purge of %s events: only DONE and DEAD events are purged", outbox.ErrInvalidConfig, req.Status)
	}
	query := s.q.purgeCount
	if req.TenantID != "" {
		query = s.q.purgeCountTenant
	}
	var n int64
	err := s.eachRow(ctx, query, s.d.purgeSelection().args(s.d, int(req.Status), s.t(req.Before), req.TenantID), func(rows Rows) error {
		return rows.Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("sqlstore: count the purgeable events of %s: %w", s.table, s.explain(err))
	}
	return n, nil
}

// purgeDead deletes the DEAD events query selects as Delete does, so that
// the events they held back are unparked.
func (s *Store) purgeDead(ctx context.Context, query string, args []any) (int64, error) {
	ids, err := s.appendStrings(ctx, nil, query, args)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: purge %s: %w", s.table, s.explain(err))
	}
	return s.Delete(ctx, ids)
}

// appendStrings runs query, which returns one text column, and appends
// its values to out.
func (s *Store) appendStrings(ctx context.Context, out []string, query string, args []any) ([]string, error) {
	err := s.eachRow(ctx, query, args, func(rows Rows) error {
		var v string
		if err := rows.Scan(&v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// eachRow runs query and calls fn for each row it returns.
func (s *Store) eachRow(ctx context.Context, query string, args []any, fn func(rows Rows) error) error {
	return s.eachRowOn(ctx, s.db, query, args, fn)
}

// eachRowOn is eachRow on c.
func (s *Store) eachRowOn(ctx context.Context, c Conn, query string, args []any, fn func(rows Rows) error) error {
	rows, err := c.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	for rows.Next() {
		if err := fn(rows); err != nil {
			_ = rows.Close()
			return err
		}
	}
	return errors.Join(rows.Err(), rows.Close())
}

// scanOne runs a query that returns one row and scans it into dest.
func (s *Store) scanOne(ctx context.Context, query string, dest ...any) error {
	rows, err := s.db.Query(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return fmt.Errorf("sqlstore: %q returned no row", query)
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	return rows.Close()
}

// queryRecords runs a query that selects columns and appends a record per
// row to recs (give it the capacity the rows need). On an error it returns
// recs as it was.
func (s *Store) queryRecords(ctx context.Context, ex Conn, recs []outbox.Record, query string, args ...any) ([]outbox.Record, error) {
	rows, err := ex.Query(ctx, query, args...)
	if err != nil {
		return recs, err
	}
	defer rows.Close()
	sc, n := s.newRecordScan(), len(recs)
	for rows.Next() {
		r, err := sc.scan(rows)
		if err != nil {
			return recs[:n], err
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		return recs[:n], err
	}
	if err := rows.Close(); err != nil {
		return recs[:n], err
	}
	return recs, nil
}

// recordScan is where the rows of one query are scanned, one after the
// other: a destination per column of columns, and the list of them that
// Scan takes. Reused for every row, it leaves to each row only the
// allocations of the values its Record keeps.
type recordScan struct {
	f                                          outbox.EnvelopeFields
	payload, headers, lastErr, lockedBy        nullBytes
	payloadBytes, orderingKey, subscribers     nullBytes
	status, attempts, version, seq             int64
	occurred, available, created, done, locked timeCol
	dest                                       []any
}

func (s *Store) newRecordScan() *recordScan {
	c := &recordScan{}
	for _, t := range c.times() {
		t.d = s.d
	}
	c.dest = []any{&c.f.ID, &c.f.Type, &c.f.AggregateType, &c.f.AggregateID, &c.f.TenantID, &c.version, &c.payload, &c.payloadBytes, &c.headers,
		&c.status, &c.attempts, &c.occurred, &c.available, &c.created, &c.done, &c.lastErr, &c.lockedBy, &c.locked, &c.orderingKey, &c.subscribers, &c.seq}
	return c
}

// times returns the time columns' destinations.
func (c *recordScan) times() [5]*timeCol {
	return [5]*timeCol{&c.occurred, &c.available, &c.created, &c.done, &c.locked}
}

// scan reads the current row. Only database errors fail it; a row whose
// content cannot be decoded is returned with Record.Err set. Every
// destination is written by each Scan: nothing of a row is left over for
// the next.
func (c *recordScan) scan(rows Rows) (outbox.Record, error) {
	var r outbox.Record
	if err := rows.Scan(c.dest...); err != nil {
		return r, err
	}
	f := c.f
	f.OrderingKey, f.SchemaVersion = c.orderingKey.s, int(c.version)
	r.ID, r.Seq = f.ID, c.seq
	r.Status = outbox.Status(c.status)
	r.Attempts = int(c.attempts)
	r.AvailableAt, r.CreatedAt, r.DoneAt, r.LockedAt = c.available.t, c.created.t, c.done.t, c.locked.t
	r.LastError, r.LockedBy = c.lastErr.s, c.lockedBy.s
	r.Subscribers = decodeSubscribers(c.subscribers)
	f.OccurredAt, f.AvailableAt = c.occurred.t, c.available.t
	var errs []error
	for _, t := range c.times() {
		if t.err != nil {
			errs = append(errs, t.err)
		}
	}
	switch {
	case c.payload.valid:
		f.Kind, f.Payload = outbox.PayloadJSON, c.payload.s
	case c.payloadBytes.valid:
		f.Kind, f.Payload = outbox.PayloadBytes, c.payloadBytes.s
	}
	if c.headers.valid {
		h, err := decodeHeaders(c.headers.s)
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

// encodeSubscribers stores the subscribers an event owes as one text
// column: their names (which have no commas) joined by commas, NULL for
// none.
func encodeSubscribers(names []string) any {
	if len(names) == 0 {
		return nil
	}
	return strings.Join(names, ",")
}

// decodeSubscribers reads what encodeSubscribers stored.
func decodeSubscribers(b nullBytes) []string {
	if !b.valid || b.s == "" {
		return nil
	}
	return strings.Split(b.s, ",")
}

// nullBytes scans a nullable text or BLOB column, telling NULL from an
// empty value (which drivers may return as a nil slice).
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
		return fmt.Errorf("sqlstore: column holds %T, want text or bytes", src)
	}
	return nil
}
