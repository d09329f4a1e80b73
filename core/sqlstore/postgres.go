package sqlstore

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// PostgreSQL is the dialect of PostgreSQL 9.5 or later, through
// github.com/lib/pq or github.com/jackc/pgx (v5 or v4) stdlib. Timestamps
// are TIMESTAMPTZ; the claim is one UPDATE … RETURNING whose subquery takes
// due rows FOR UPDATE SKIP LOCKED from a partial index of pending rows.
var PostgreSQL Dialect = postgresDialect

var postgresDialect = &dialect{
	name:        "postgres",
	title:       "PostgreSQL",
	aliases:     []string{"postgresql", "pg"},
	driverNames: []string{"pgx", "postgres", "pgx/v5", "nrpostgres"},
	driverTypes: []string{"github.com/jackc/pgx/v5/stdlib.Driver", "github.com/lib/pq.Driver", "github.com/jackc/pgx/v4/stdlib.Driver"},
	schemes:     []string{"postgres", "postgresql"},
	schemeSep:   "://",
	fromURL:     postgresURL,
	fromDSN:     postgresDSN,
	// The keywords of PostgreSQL (pg_get_keywords()) it refuses as an
	// unquoted table name: the reserved ones and those of types and
	// functions (see ValidateTableName).
	reserved: "all analyse analyze and any array as asc asymmetric authorization binary both case cast " +
		"check collate collation column concurrently constraint create cross current_catalog " +
		"current_date current_role current_schema current_time current_timestamp current_user " +
		"default deferrable desc distinct do else end except false fetch for foreign freeze from " +
		"full grant group having ilike in initially inner intersect into is isnull join lateral " +
		"leading left like limit localtime localtimestamp natural not notnull null offset on only " +
		"or order outer overlaps placing primary references returning right select session_user " +
		"similar some symmetric table tablesample then to trailing true union unique user using " +
		"variadic verbose when where window with",
	schemaFile:  "schema/postgres.sql",
	placeholder: dollar,
	// An instant: TIMESTAMPTZ compares instants, whatever the session's
	// TimeZone. Microseconds are what the column keeps.
	timeArg:   func(t time.Time) any { return t.Truncate(time.Microsecond) },
	scanTime:  scanTimeValue,
	claimLock: " FOR UPDATE SKIP LOCKED",
	// The purge reads the oldest rows first, in the purge index's order.
	// Without an order the planner, which expects the rows to purge
	// spread evenly through the table, reads it in physical order until
	// it has a batch where they are a few percent of it: fast while the
	// oldest rows lie at the start of the heap, a scan of most of it once
	// their space was reused.
	purge: &purgeSelection{where: sharedPurge.where, order: " ORDER BY COALESCE(done_at, created_at)"},
	// "= ANY(ARRAY(sub))" rather than "IN (sub)": the subquery becomes an
	// InitPlan and the rows are then fetched by primary key. With IN, a
	// generic plan (pgx caches prepared statements, and PostgreSQL switches
	// them to a generic plan after five runs) does not know the LIMIT and
	// picks a hash semi-join over a sequential scan of the whole table:
	// ~250 ms per claim at a 1M-row backlog instead of ~2 ms.
	idsFrom:         func(sub string) string { return "event_id = ANY(ARRAY(" + sub + "))" },
	missingTable:    func(err error) bool { return sqlState(err) == "42P01" }, // undefined_table
	onConflict:      func(key string) string { return " ON CONFLICT (" + key + ") DO NOTHING" },
	uniqueViolation: func(err error) bool { return sqlState(err) == "23505" }, // unique_violation
	// The array is one parameter of type text[], sent as an array literal
	// (lib/pq and pgx bind a string to it alike): a constant of the plan.
	// A text parameter cast to text[] in the statement would not be one —
	// in a custom plan the cast is inlined and, where the table is scanned,
	// runs for every row (12 ms for 100 ids over 800 rows). The primary key
	// serves it in custom and generic plans. (No partial index can: see
	// schema/postgres.sql on the lease index.)
	idsArray: "event_id = ANY(CAST(? AS TEXT[]))",
	notifies: true,
	maxIdent: 63, // NAMEDATALEN - 1: longer names are cut, and the cut index names of two tables collide
	indexQuery: func(schema, name string) (string, []any) {
		return "SELECT indexname FROM pg_indexes WHERE schemaname = COALESCE(NULLIF($1, ''), current_schema()) AND tablename = $2",
			[]any{strings.ToLower(schema), strings.ToLower(name)} // unquoted identifiers fold to lower case
	},
	columnQuery: func(schema, name string) (string, []any) {
		return "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = COALESCE(NULLIF($1, ''), current_schema())" +
			" AND table_name = $2 AND column_name = $3", []any{strings.ToLower(schema), strings.ToLower(name)}
	},
	maxBatch:    500, // id lists are one array parameter: no maxListIDs
	seq:         "seq",
	openKey:     partialOpenKey,
	openKeyCol:  partialOpenKeyCol,
	openKeyCond: partialOpenKeyCond,
	heads:       lateralHeads,
	repark:      partialRepark,
	sweep:       partialSweep,
	headArgs: func(cursor string, limit int, now, recent any) []any {
		return []any{now, recent, cursor, now, recent, limit}
	},
	lockHeads: func(t, set, claimable, selectList string) (string, string) {
		return "UPDATE " + t + " SET " + set + " WHERE event_id = ANY(ARRAY(SELECT event_id FROM " + t + " WHERE " + claimable,
			" FOR UPDATE SKIP LOCKED)) RETURNING " + selectList
	},
	upgrade:      pgUpgrade,
	pendingRows:  partialPendingRows,
	claimedWhere: partialClaimedWhere,
	owedWhere:    partialOwedWhere,
	// The planner's own estimate: the rows per page of the last VACUUM or
	// ANALYZE times the pages the table has now (0 before the first).
	rowsEstimate: func(table string) (string, []any) {
		return "SELECT CASE WHEN c.relpages > 0 AND c.reltuples > 0 THEN CAST(c.reltuples / c.relpages *" +
			" (pg_relation_size(c.oid) / current_setting('block_size')::int) AS BIGINT) ELSE 0 END" +
			" FROM pg_class c WHERE c.oid = to_regclass($1)", []any{table}
	},
	upsert:         excludedUpsert,
	horizonTable:   pgHorizonTable,
	horizonHolders: pgHorizonHolders,
}

// postgresURL takes a postgres:// URL as it is: pgx's stdlib driver reads
// every libpq URL parameter.
func postgresURL(d *dialect, raw string) (Source, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Source{}, urlErr("bad PostgreSQL URL: %v", parseURLErr(err))
	}
	if u.Opaque != "" {
		return Source{}, urlErr("bad PostgreSQL URL: write postgres://user:password@host:port/database")
	}
	return Source{Dialect: d, Driver: d.driverNames[0], DSN: raw, Display: RedactDSN(raw)}, nil
}

// postgresDSN takes a key=value DSN as it is; pgx's stdlib reads it.
func postgresDSN(d *dialect, dsn string) (Source, error) {
	return Source{Dialect: d, Driver: d.driverNames[0], DSN: dsn, Display: RedactDSN(dsn)}, nil
}

// scanTimeValue accepts the time.Time that drivers return for timestamp
// columns.
func scanTimeValue(src any) (time.Time, error) {
	if t, ok := src.(time.Time); ok {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("sqlstore: timestamp column holds %T %v, want a time", src, src)
}

// pgHorizonTable reads the horizon guard's figures of the table $1 (its
// name as the store's statements write it, resolved by to_regclass on the
// search_path as they are): its tuples and vacuums from the statistics,
// its size with indexes and TOAST, and how many sessions of the database
// hide their transactions from this role (the other roles' sessions,
// without pg_read_all_stats). A partitioned table (WithPartitions) is
// the sum of its partitions (pg_inherits: they are one level deep), its
// last vacuums the latest of theirs. Catalog and statistics reads only;
// every role may run it. No row: no such table.
const pgHorizonTable = `WITH r AS (SELECT to_regclass($1) AS oid UNION ALL SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass($1))
SELECT COALESCE(SUM(s.n_live_tup), 0), COALESCE(SUM(s.n_dead_tup), 0), MAX(s.last_vacuum), MAX(s.last_autovacuum),
 COALESCE(SUM(pg_total_relation_size(r.oid)), 0),
 (SELECT COUNT(*) FROM pg_stat_activity a WHERE a.datname = current_database() AND a.query = '<insufficient privilege>')
FROM r LEFT JOIN pg_stat_user_tables s ON s.relid = r.oid
WHERE r.oid IS NOT NULL
HAVING COUNT(*) > 0`

// pgHorizonHolders lists the oldest holder of each kind of the horizon
// that vacuum keeps the dead tuples of this database's tables above,
// oldest first: kind, pid, name, state, age in milliseconds (-1: unknown),
// age in transactions, xmin. A session holds it with its snapshot
// (backend_xmin) or its transaction id (backend_xid), in this database,
// or as a replication connection (a standby's hot_standby_feedback, for
// every database); a prepared transaction with its transaction id; a
// replication slot with its xmin. A slot's catalog_xmin (logical
// decoding) holds back the system catalogs only, not the outbox table,
// and is left out. This statement's own session is left out.
const pgHorizonHolders = `SELECT kind, pid, name, state, age_ms, xid_age, xmin FROM (
(SELECT DISTINCT ON (1) CASE WHEN a.backend_type = 'walsender' THEN 'replication connection' ELSE 'transaction' END AS kind,
  CAST(a.pid AS BIGINT), COALESCE(a.application_name, '') AS name, COALESCE(a.state, '') AS state,
  COALESCE(CAST(EXTRACT(EPOCH FROM now() - a.xact_start) * 1000 AS BIGINT), -1) AS age_ms,
  GREATEST(age(a.backend_xmin), age(a.backend_xid))::bigint AS xid_age,
  COALESCE(a.backend_xmin, a.backend_xid)::text AS xmin
 FROM pg_stat_activity a
 WHERE (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL) AND a.pid <> pg_backend_pid()
  AND (a.datname = current_database() OR a.backend_type = 'walsender')
 ORDER BY 1, 6 DESC)
UNION ALL
(SELECT 'prepared transaction', 0, p.gid, '', CAST(EXTRACT(EPOCH FROM now() - p.prepared) * 1000 AS BIGINT),
  age(p.transaction)::bigint, p.transaction::text
 FROM pg_prepared_xacts p WHERE p.database = current_database()
 ORDER BY 6 DESC LIMIT 1)
UNION ALL
(SELECT 'replication slot', CAST(COALESCE(r.active_pid, 0) AS BIGINT), r.slot_name::text, CASE WHEN r.active THEN 'active' ELSE 'inactive' END,
  CAST(-1 AS BIGINT), age(r.xmin)::bigint, r.xmin::text
 FROM pg_replication_slots r WHERE r.xmin IS NOT NULL
 ORDER BY 6 DESC LIMIT 1)
) h ORDER BY xid_age DESC, kind`
