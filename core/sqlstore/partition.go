package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// The partitioned storage mode of PostgreSQL (WithPartitions). The table
// is partitioned by range of event_id: the ids the framework generates are
// ULIDs, whose first ten characters are their creation time in
// milliseconds, so a range of ids is a range of time, and the primary key
// (event_id) stays the table's, unique across partitions. Each partition
// holds the ids of one interval; a DEFAULT partition holds the others (ids
// set with outbox.WithID that do not sort as ULIDs of a live interval, and
// the events that outlived their partition). Retention drops whole
// partitions instead of deleting rows: a partition whose interval ended
// before the purge's cutoff is detached, the rows Purge would keep (pending,
// DEAD, or DONE since the cutoff) are copied into the DEFAULT partition
// with their id, seq and state, and the partition is dropped. Its storage
// returns to the system at once, whatever vacuum can or cannot reclaim
// while a transaction pins the horizon. Only the DEFAULT partition is
// purged row by row.

// PartitionsAhead is how many partitions the maintenance keeps ready
// after the current one: it must run at least once in that many
// intervals (the purge runs it; see WithPartitions).
const PartitionsAhead = 4

// MinPartitionInterval is the shortest interval WithPartitions accepts.
const MinPartitionInterval = time.Second

// partitionLockTimeout bounds how long a maintenance statement waits for
// its lock on the table: a detach waits for the claims running on it, and
// every statement queued behind it waits too. A transaction that holds a
// lock on the table longer (a long read of the outbox table itself) makes
// the maintenance give up until its next run.
const partitionLockTimeout = "2s"

// WithPartitions makes the store's PostgreSQL table partitioned by event
// id, one partition per interval of the events' creation (whole seconds,
// at least MinPartitionInterval): Migrate creates the partitioned table, a
// DEFAULT partition and the partitions of the current interval and of the
// PartitionsAhead next ones; each Purge of DONE events (the Client's purge
// loop) creates the partitions to come and drops those whose interval
// ended before its cutoff, keeping their pending, DEAD and recent rows (see
// MaintainPartitions). A DONE event is then kept at least the retention
// and at most the retention plus one interval. Choose the interval so that
// the retention spans from a few to a few dozen partitions (a day for
// the default seven days of retention), and a purge interval shorter than
// PartitionsAhead intervals. Only PostgreSQL (12 or later) has it; another
// dialect fails New with outbox.ErrInvalidConfig. An existing table that
// is not partitioned fails Migrate: the mode is chosen when the table is
// created.
func WithPartitions(interval time.Duration) Option {
	return func(o *Options) { o.Partitions = interval }
}

// partitioning is the partitioned mode of a store.
type partitioning struct {
	every time.Duration
	// schema is the table's schema with its dot, or ""; name the table's
	// name without it (lower case: PostgreSQL folds unquoted names).
	schema, name string
	// dflt is the DEFAULT partition, schema-qualified.
	dflt string
	// purge deletes the DONE rows of the DEFAULT partition, as the
	// store's purge does on the whole table.
	purge string
}

// partitionSuffix is the length of the suffix of a partition's name:
// "_p" and its interval's start, as 20060102150405.
const partitionSuffix = len("_p20060102150405")

// newPartitioning checks the options of the partitioned mode of table.
// The error wraps outbox.ErrInvalidConfig.
func newPartitioning(d *dialect, table string, every time.Duration) (*partitioning, error) {
	if d != postgresDialect {
		return nil, fmt.Errorf("%w: sqlstore: WithPartitions: only PostgreSQL partitions its table, not %s", outbox.ErrInvalidConfig, d.title)
	}
	if every < MinPartitionInterval || every%time.Second != 0 {
		return nil, fmt.Errorf("%w: sqlstore: WithPartitions: the interval must be whole seconds, at least %s; got %s",
			outbox.ErrInvalidConfig, MinPartitionInterval, every)
	}
	p := &partitioning{every: every, name: strings.ToLower(table)}
	if i := strings.IndexByte(table, '.'); i >= 0 {
		p.schema, p.name = strings.ToLower(table[:i+1]), strings.ToLower(table[i+1:])
	}
	if n := len(p.name) + partitionSuffix; n > d.maxIdent {
		return nil, fmt.Errorf("%w: sqlstore: WithPartitions: table name %q is too long: its partitions' names would have %d characters, %s keeps %d (shorten it by %d)",
			outbox.ErrInvalidConfig, table, n, d.name, d.maxIdent, n-d.maxIdent)
	}
	p.dflt = p.schema + p.name + "_default"
	p.purge = buildQueries(d, p.dflt).purge
	return p, nil
}

// partitionedSchema turns the table's DDL into that of the partitioned
// table: its CREATE TABLE partitioned by event_id, followed by the
// creation of the DEFAULT partition. The indexes, created on the
// partitioned table, are created on every partition.
func (p *partitioning) partitionedSchema(table string, schema []string) []string {
	out := []string{schema[0] + " PARTITION BY RANGE (event_id)",
		"CREATE TABLE IF NOT EXISTS " + p.dflt + " PARTITION OF " + table + " DEFAULT"}
	return append(out, schema[1:]...)
}

// partition is one range partition of the table: its name (without the
// schema) and the range of event ids it holds, [from, to).
type partition struct {
	name, from, to string
}

// ulidBound is what a partition's bound is: a prefix of a ULID.
var ulidBound = regexp.MustCompile(`^[0-9A-Z]{1,26}$`)

// boundRE reads the range of a partition from pg_get_expr(relpartbound).
var boundRE = regexp.MustCompile(`FROM \('([0-9A-Z]+)'\) TO \('([0-9A-Z]+)'\)`)

// partitions returns the range partitions of the table (not the DEFAULT
// one), by range.
func (s *Store) partitions(ctx context.Context) ([]partition, error) {
	var parts []partition
	err := s.eachRow(ctx, "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"+
		" WHERE i.inhparent = to_regclass($1)", []any{s.table}, func(rows Rows) error {
		var name string
		var bound nullBytes // NULL for a partition being detached meanwhile
		if err := rows.Scan(&name, &bound); err != nil {
			return err
		}
		if m := boundRE.FindStringSubmatch(bound.s); m != nil {
			parts = append(parts, partition{name: name, from: m[1], to: m[2]})
		}
		return nil
	})
	slices.SortFunc(parts, func(a, b partition) int { return strings.Compare(a.from, b.from) })
	return parts, err
}

// MaintainPartitions maintains the partitions of a store made
// WithPartitions: it creates the partition of the interval of now and
// those of the PartitionsAhead next intervals that are missing, and drops
// every partition whose interval ended at or before before (zero: none)
// once the rows that a Purge at before would keep — pending, DEAD, or
// DONE at or after before — are copied into the DEFAULT partition, with
// their id, seq and state. It returns how many DONE rows it dropped. The
// Purge of DONE events runs it (at the time of the call, with the
// purge's cutoff); call it yourself when no Client purges this table. Of
// several stores maintaining one table at once, one does the work and
// the others return. A store without partitions returns 0.
func (s *Store) MaintainPartitions(ctx context.Context, now, before time.Time) (int64, error) {
	if s.part == nil {
		return 0, nil
	}
	n, err := s.maintainPartitions(ctx, now.UTC(), before.UTC())
	if err != nil {
		return n, fmt.Errorf("sqlstore: maintain the partitions of %s: %w", s.table, s.explain(err))
	}
	return n, nil
}

func (s *Store) maintainPartitions(ctx context.Context, now, before time.Time) (int64, error) {
	p := s.part
	parts, err := s.partitions(ctx)
	if err != nil {
		return 0, err
	}
	var dropped int64
	cut := ""
	if !before.IsZero() {
		cut = ulidPrefix(before)
	}
	var kept []partition
	for _, part := range parts {
		if cut == "" || part.to > cut {
			kept = append(kept, part)
			continue
		}
		n, err := s.dropPartition(ctx, part, before)
		dropped += n
		if err != nil {
			return dropped, err
		}
	}
	start := now.Truncate(p.every)
	for i := range PartitionsAhead + 1 {
		from := start.Add(time.Duration(i) * p.every)
		part := partition{name: p.name + "_p" + from.Format("20060102150405"), from: ulidPrefix(from), to: ulidPrefix(from.Add(p.every))}
		if cut != "" && part.to <= cut {
			continue // it would be dropped at once
		}
		if slices.ContainsFunc(kept, func(k partition) bool { return k.from < part.to && part.from < k.to }) {
			continue // made already (or one of another interval covers some of it)
		}
		if err := s.createPartition(ctx, part); err != nil {
			return dropped, err
		}
	}
	return dropped, nil
}

// errMaintained stops a maintenance step that another store is running.
var errMaintained = errors.New("sqlstore: another store maintains the partitions")

// maintenance runs fn in a transaction holding the table's maintenance
// lock (an advisory lock of the transaction) with partitionLockTimeout.
// When another transaction holds the lock, fn does not run.
func (s *Store) maintenance(ctx context.Context, fn func(tx Conn) error) error {
	err := s.db.ReadCommitted(ctx, func(tx Conn) error {
		var got string
		err := s.eachRowOn(ctx, tx, "SELECT CAST(pg_try_advisory_xact_lock(hashtext($1)) AS TEXT)", []any{"outbox partitions " + s.table},
			func(rows Rows) error { return rows.Scan(&got) })
		if err != nil {
			return err
		}
		if got != "true" {
			return errMaintained
		}
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '"+partitionLockTimeout+"'"); err != nil {
			return err
		}
		return fn(tx)
	})
	if errors.Is(err, errMaintained) {
		return nil
	}
	return err
}

// createPartition creates part and attaches it to the table, moving into
// it the rows of its range that the DEFAULT partition holds. Attaching a
// table made apart takes a weaker lock on the table than CREATE TABLE …
// PARTITION OF: claims and inserts go on meanwhile.
func (s *Store) createPartition(ctx context.Context, part partition) error {
	// The bounds are the only values written into these statements (DDL
	// takes no parameters): ULID prefixes, of [0-9A-Z] only (ulidPrefix,
	// boundRE).
	if !ulidBound.MatchString(part.from) || !ulidBound.MatchString(part.to) {
		return fmt.Errorf("sqlstore: partition %s: bounds %q and %q are not ULID prefixes", part.name, part.from, part.to)
	}
	p := s.part
	rel := p.schema + part.name
	return s.maintenance(ctx, func(tx Conn) error {
		attached, err := s.queryIntOn(ctx, tx, "SELECT COUNT(*) FROM pg_inherits WHERE inhrelid = to_regclass($1)", rel)
		if err != nil || attached > 0 {
			return err
		}
		for _, stmt := range []string{
			"CREATE TABLE IF NOT EXISTS " + rel + " (LIKE " + s.table + " INCLUDING DEFAULTS INCLUDING CONSTRAINTS)",
			"WITH moved AS (DELETE FROM " + p.dflt + " WHERE event_id >= '" + part.from + "' AND event_id < '" + part.to + "' RETURNING *)" +
				" INSERT INTO " + rel + " SELECT * FROM moved",
			"ALTER TABLE " + s.table + " ATTACH PARTITION " + rel + " FOR VALUES FROM ('" + part.from + "') TO ('" + part.to + "')",
		} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
}

// dropPartition drops part, whose interval ended at or before before,
// once the rows a purge at before keeps are copied into the DEFAULT
// partition (detached, its range is the DEFAULT partition's). It finds
// them in the partition's indexes, never reading the DONE rows. It
// returns how many DONE rows it dropped.
func (s *Store) dropPartition(ctx context.Context, part partition, before time.Time) (int64, error) {
	p := s.part
	rel := p.schema + part.name
	kept := "SELECT * FROM " + rel + " WHERE status IN (0, 2) AND locked_at IS NULL AND ordering_key IS NULL" +
		" UNION ALL SELECT * FROM " + rel + " WHERE " + partialClaimedWhere +
		" UNION ALL SELECT * FROM " + rel + " WHERE ordering_key IS NOT NULL AND status IN (0, 2, 3) AND status <> 3 AND locked_at IS NULL" +
		" UNION ALL SELECT * FROM " + rel + " WHERE status IN (1, 3) AND status = 3" +
		" UNION ALL SELECT * FROM " + rel + " WHERE status IN (1, 3) AND status = 1 AND COALESCE(done_at, created_at) >= $1"
	var n int64
	err := s.maintenance(ctx, func(tx Conn) error {
		attached, err := s.queryIntOn(ctx, tx, "SELECT COUNT(*) FROM pg_inherits WHERE inhrelid = to_regclass($1)", rel)
		if err != nil || attached == 0 {
			return err // dropped by another store meanwhile
		}
		if n, err = s.queryIntOn(ctx, tx, s.d.rebind("SELECT COUNT(*) FROM "+rel+" WHERE "+sharedPurge.where, 1), int(outbox.StatusDone), s.t(before)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "ALTER TABLE "+s.table+" DETACH PARTITION "+rel); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+s.table+" "+kept, s.t(before)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "DROP TABLE "+rel)
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// PurgeRetention is the retention's purge (outbox.RetentionPurger), which
// the Client's purge loop runs rather than Purge. On a partitioned table
// (WithPartitions), for the DONE events of every tenant, it drops the
// partitions whose interval ended before req.Before (see
// MaintainPartitions: the events completed since stay) and deletes the
// DONE events of the DEFAULT partition completed before it, at most
// req.Limit; it returns how many it dropped and deleted. Otherwise it is
// Purge.
func (s *Store) PurgeRetention(ctx context.Context, req outbox.PurgeRequest) (int64, error) {
	if s.part == nil || req.Status != outbox.StatusDone || req.TenantID != "" || req.Limit <= 0 {
		return s.Purge(ctx, req)
	}
	dropped, err := s.MaintainPartitions(ctx, time.Now(), req.Before)
	if err != nil {
		return dropped, err
	}
	args := append(s.d.purgeSelection().args(s.d, int(req.Status), s.t(req.Before), ""), req.Limit)
	n, err := s.w.Exec(ctx, s.part.purge, args...)
	if err != nil {
		return dropped, fmt.Errorf("sqlstore: purge %s: %w", s.part.dflt, s.explain(err))
	}
	return dropped + n, nil
}

// checkPartitioned fails when the table exists and is not partitioned.
func (s *Store) checkPartitioned(ctx context.Context) error {
	kind, err := s.queryText(ctx, "SELECT CAST(relkind AS TEXT) FROM pg_class WHERE oid = to_regclass($1)", s.table)
	if err != nil || kind == "p" {
		return err
	}
	return fmt.Errorf("%w: sqlstore: %s exists and is not partitioned: WithPartitions needs a table that Migrate creates "+
		"(move the rows of the existing one into a new partitioned table, or use another table name)", outbox.ErrInvalidConfig, s.table)
}

// partitionedRowsEstimate is the PostgreSQL estimate of the rows of a
// table (see dialect.rowsEstimate) summed over its partitions.
func partitionedRowsEstimate(table string) (string, []any) {
	return "SELECT COALESCE(SUM(CASE WHEN c.relpages > 0 AND c.reltuples > 0 THEN CAST(c.reltuples / c.relpages *" +
		" (pg_relation_size(c.oid) / current_setting('block_size')::int) AS BIGINT) ELSE 0 END), 0)" +
		" FROM pg_partition_tree(to_regclass($1)) t JOIN pg_class c ON c.oid = t.relid WHERE t.isleaf", []any{table}
}

// queryIntOn is queryInt on c.
func (s *Store) queryIntOn(ctx context.Context, c Conn, query string, args ...any) (int64, error) {
	var n int64
	err := s.eachRowOn(ctx, c, query, args, func(rows Rows) error { return rows.Scan(&n) })
	return n, err
}

// crockford is the alphabet of ULIDs.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// ulidPrefix returns the first ten characters of the ULIDs made at t (its
// milliseconds since the epoch): every ULID of an earlier time sorts
// before it, every ULID of t or later at or after it.
func ulidPrefix(t time.Time) string {
	ms := uint64(max(t.UnixMilli(), 0))
	var out [10]byte
	for i := 9; i >= 0; i-- {
		out[i] = crockford[ms&31]
		ms >>= 5
	}
	return string(out[:])
}
