package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// MySQL is the dialect of MySQL 8.0 or later and MariaDB 10.6 or later
// (InnoDB), through github.com/go-sql-driver/mysql. Its DSN needs the
// default loc=UTC: a store whose pool reads DATETIME in another location
// fails its first claim with an error that says so (ParseURL and ParseDSN
// refuse such a DSN at once). parseTime does not matter: the store reads
// DATETIME columns as times or as text alike.
//
// Timestamps are DATETIME(6) holding UTC, bound as UTC text so that
// neither the session time_zone nor the driver's loc changes what is
// written. The claim runs in a short READ COMMITTED transaction: SELECT …
// FOR UPDATE SKIP LOCKED over an index of pending rows in due order, then
// an UPDATE of the selected rows by primary key.
var MySQL Dialect = mysqlDialect

var mysqlDialect = &dialect{
	name:        "mysql",
	title:       "MySQL",
	aliases:     []string{"mariadb", "tidb"},
	driverNames: []string{"mysql", "nrmysql"},
	driverTypes: []string{"github.com/go-sql-driver/mysql.MySQLDriver"},
	schemes:     []string{"mysql"},
	schemeSep:   "://",
	fromURL:     mysqlURL,
	fromDSN:     mysqlDSN,
	// The keywords of MariaDB (information_schema.KEYWORDS) it refuses as
	// an unquoted table name, and the reserved words MySQL 8 adds (see
	// ValidateTableName).
	reserved: "accessible add all alter analyze and array as asc asensitive before between bigint " +
		"binary blob both by call cascade case change char character check collate column " +
		"condition constraint continue convert create cross cube cume_dist current_date " +
		"current_role current_time current_timestamp current_user cursor database databases " +
		"day_hour day_microsecond day_minute day_second dec decimal declare default delayed " +
		"delete delete_domain_id dense_rank desc describe deterministic distinct distinctrow div " +
		"do_domain_ids double drop dual each else elseif empty enclosed escaped except exists " +
		"exit explain false fetch first_value float float4 float8 for force foreign from fulltext " +
		"function generated get grant group grouping groups having high_priority hour_microsecond " +
		"hour_minute hour_second if ignore ignore_domain_ids in index infile inner inout " +
		"insensitive insert int int1 int2 int3 int4 int8 integer intersect interval into " +
		"io_after_gtids io_before_gtids is iterate join json_table key keys kill lag last_value " +
		"lateral lead leading leave left like limit linear lines load localtime localtimestamp " +
		"lock long longblob longtext loop low_priority manual master_bind " +
		"master_demote_to_replica master_demote_to_slave master_ssl_verify_server_cert match " +
		"maxvalue mediumblob mediumint mediumtext member middleint minute_microsecond " +
		"minute_second mod modifies natural no_write_to_binlog not nth_value ntile null numeric " +
		"of offset on optimize optimizer_costs optionally or order out outer outfile over " +
		"page_checksum parallel parse_vcol_expr partition percent_rank portion precision primary " +
		"procedure purge qualify range rank read read_write reads real recursive ref_system_id " +
		"references regexp release rename repeat replace require resignal restrict return " +
		"returning revoke right rlike row row_number rows schema schemas second_microsecond " +
		"select sensitive separator set show signal smallint spatial specific sql sql_big_result " +
		"sql_calc_found_rows sql_small_result sqlexception sqlstate sqlwarning ssl starting " +
		"stats_auto_recalc stats_persistent stats_sample_pages stored straight_join system table " +
		"tablesample terminated then tinyblob tinyint tinytext to trailing trigger true undo " +
		"union unique unlock unsigned update usage use using utc_date utc_time utc_timestamp " +
		"value values varbinary varchar varcharacter varying virtual when where while window with " +
		"write xor year_month zerofill",
	schemaFile:   "schema/mysql.sql",
	placeholder:  questionMark,
	timeArg:      func(t time.Time) any { return t.UTC().Format(mysqlTimeFormat) },
	scanTime:     scanMySQLTime,
	claim:        mysqlClaim,
	continueRuns: mysqlContinueRuns,
	// utf8mb4_bin pads with spaces: a tenant is compared with its length.
	padSpace: true,
	// A tenant's purge walks the tenant index (tenant, status, id) from
	// the oldest id instead: the purge index holds every tenant's rows.
	purge:           &purgeSelection{where: "purge_at < ? AND status = ?", order: " ORDER BY purge_at", cutoffFirst: true, direct: true},
	missingTable:    func(err error) bool { return mysqlErrorNumber(err) == 1146 }, // ER_NO_SUCH_TABLE
	uniqueViolation: func(err error) bool { return mysqlErrorNumber(err) == 1062 }, // ER_DUP_ENTRY
	maxIdent:        64,
	indexQuery: func(schema, name string) (string, []any) {
		return "SELECT DISTINCT index_name FROM information_schema.statistics WHERE table_schema = COALESCE(NULLIF(?, ''), DATABASE()) AND table_name = ?",
			[]any{schema, name}
	},
	columnQuery: func(schema, name string) (string, []any) {
		return "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = COALESCE(NULLIF(?, ''), DATABASE())" +
			" AND table_name = ? AND column_name = ?", []any{schema, name}
	},
	upgrade:    mysqlUpgrade,
	maxBatch:   500,
	maxListIDs: 4096, // placeholders per statement: at most 65535
	// MySQL cannot LIMIT a subquery of IN, but limits a DELETE itself.
	limitedDelete: true,
	// A locking read sees the newest committed row, also under
	// REPEATABLE READ, whose snapshot may predate it.
	sharedLock: " LOCK IN SHARE MODE",
	// The pending rows are the ranges of their statuses in the purge index,
	// which holds the columns Stats reads of them.
	pendingRows: func(table, cols string) string {
		return "SELECT " + cols + " FROM " + table + " WHERE status IN (0, 2)"
	},
	// The claimed rows are those of the lease index.
	claimedWhere: "lease_at IS NOT NULL",
	// The pending rows per type are the entries of the type index that
	// are not NULL, which holds their creation times (index only).
	pendingTypes: func(table string) string {
		return "SELECT pending_type AS event_type, created_at FROM " + table + " WHERE pending_type IS NOT NULL"
	},
	// The ids from the purge index alone (MariaDB checks dead_owes only
	// after reading the row otherwise), then those rows.
	owedWhere: func(table string) string {
		return "event_id IN (SELECT event_id FROM " + table + " WHERE status = 3 AND dead_owes = 1)"
	},
	// The span of the insertion sequence (two reads of its unique index):
	// the rows inserted since the oldest that is left, less none of those
	// deleted since, nor the numbers of rolled back inserts.
	rowsEstimate: func(table string) (string, []any) {
		return "SELECT COALESCE((SELECT MAX(seq) FROM " + table + ") - (SELECT MIN(seq) FROM " + table + ") + 1, 0)", nil
	},
	seq:        "seq",
	openKey:    func(alias, key string) string { return alias + ".open_key = " + key },
	openKeyCol: "open_key",
	heads:      groupHeads,
	repark:     mysqlRepark,
	sweep:      mysqlSweep,
	headArgs: func(cursor string, limit int, now, recent any) []any {
		return []any{now, recent, cursor, limit}
	},
	sweepReadCommitted: true,
	upsert:             mysqlUpsert,
	lastInsertID:       "SELECT LAST_INSERT_ID()",
}

// mysqlTimeFormat is how timestamps are bound: DATETIME(6) text in UTC.
const mysqlTimeFormat = "2006-01-02 15:04:05.000000"

// mysqlRecoverWhere and mysqlFreshWhere are recoverWhere and freshWhere
// over the generated columns lease_at (locked_at of claimed pending rows)
// and due_at (available_at of unclaimed pending rows), see schema/mysql.sql.
const (
	mysqlRecoverWhere = "lease_at <= ? ORDER BY lease_at"
	mysqlFreshWhere   = "due_at <= ? AND created_at <= ? ORDER BY due_at, event_id"
)

// mysqlUpgrade brings a table made by an earlier schema up to date: the
// ordering columns (mysqlOrderingUpgrade), the claim columns
// (mysqlClaimUpgrade), the purge index (mysqlPurgeUpgrade), the parking
// columns, then every KEY of the CREATE TABLE statement the table lacks
// (such as the tenant and walk indexes).
func mysqlUpgrade(ctx context.Context, s *Store) error {
	if err := mysqlOrderingUpgrade(ctx, s); err != nil {
		return err
	}
	if err := mysqlClaimUpgrade(ctx, s); err != nil {
		return err
	}
	if err := mysqlPurgeUpgrade(ctx, s); err != nil {
		return err
	}
	// parked, then walk_key and park_key (which read it), and
	// pending_type, before their indexes.
	if err := s.addColumns(ctx, "parked", "walk_key", "park_key", "pending_type"); err != nil {
		return err
	}
	missing, err := s.missingIndexes(ctx)
	if err != nil {
		return err
	}
	var alter []string
	for _, idx := range missing {
		if def := schemaLine(s.schema[0], "KEY "+idx+" "); def != "" {
			alter = append(alter, "ADD "+def)
		}
	}
	if len(alter) == 0 {
		return nil
	}
	_, err = s.db.Exec(ctx, "ALTER TABLE "+s.table+" "+strings.Join(alter, ", "))
	return err
}

// mysqlPurgeUpgrade rebuilds a purge index made with other columns (the
// earlier one had purge_at alone) as the CREATE TABLE statement declares
// it, adding the columns it needs first (subscribers, which the generic
// upgrade would add later, and dead_owes).
func mysqlPurgeUpgrade(ctx context.Context, s *Store) error {
	schema, name := s.tableParts()
	def := schemaLine(s.schema[0], "KEY outbox_purge_idx ")
	want := strings.ReplaceAll(strings.TrimSuffix(def[strings.IndexByte(def, '(')+1:], ")"), " ", "")
	have, err := s.queryText(ctx, "SELECT GROUP_CONCAT(column_name ORDER BY seq_in_index) FROM information_schema.statistics"+
		" WHERE table_schema = COALESCE(NULLIF(?, ''), DATABASE()) AND table_name = ? AND index_name = 'outbox_purge_idx'", schema, name)
	if err != nil || have == "" || strings.EqualFold(have, want) {
		return err
	}
	var alter []string
	for _, col := range []string{"subscribers", "dead_owes"} {
		has, err := s.hasColumn(ctx, col)
		if err != nil {
			return err
		}
		if !has {
			alter = append(alter, "ADD COLUMN "+schemaLine(s.schema[0], col+" "))
		}
	}
	alter = append(alter, "DROP KEY outbox_purge_idx", "ADD "+def)
	_, err = s.db.Exec(ctx, "ALTER TABLE "+s.table+" "+strings.Join(alter, ", "))
	return err
}

// mysqlClaimUpgrade replaces the claim_at column of tables made by the
// earlier schema (one claim index over every pending row, claimed or not)
// with due_at and lease_at and their indexes, in one ALTER TABLE.
func mysqlClaimUpgrade(ctx context.Context, s *Store) error {
	old, err := s.hasColumn(ctx, "claim_at")
	if err != nil || !old {
		return err
	}
	// The new columns and keys, as the CREATE TABLE of schema/mysql.sql
	// declares them.
	alter := []string{"DROP KEY outbox_claim_idx", "DROP COLUMN claim_at"}
	for _, line := range strings.Split(s.schema[0], "\n") {
		def := strings.TrimSuffix(strings.TrimSpace(line), ",")
		switch {
		case strings.HasPrefix(def, "due_at "), strings.HasPrefix(def, "lease_at "):
			alter = append(alter, "ADD COLUMN "+def)
		case strings.HasPrefix(def, "KEY outbox_due_idx "), strings.HasPrefix(def, "KEY outbox_lease_idx "):
			alter = append(alter, "ADD "+def)
		}
	}
	_, err = s.db.Exec(ctx, "ALTER TABLE "+s.table+" "+strings.Join(alter, ", "))
	return err
}

// mysqlDSNError says that the driver's DSN sets an option the store cannot
// work with (loc).
type mysqlDSNError struct{ msg string }

func (e *mysqlDSNError) Error() string { return "sqlstore: mysql: " + e.msg }

// Unwrap makes the error match outbox.ErrInvalidConfig.
func (e *mysqlDSNError) Unwrap() error { return outbox.ErrInvalidConfig }

// scanMySQLTime accepts what go-sql-driver/mysql returns for DATETIME:
// a time with parseTime=true and loc=UTC, or the column's text, which
// holds UTC, without parseTime. A time in another location means loc is
// set: the stored UTC would have been read as local time.
func scanMySQLTime(src any) (time.Time, error) {
	switch v := src.(type) {
	case time.Time:
		if v.Location() != time.UTC {
			return time.Time{}, &mysqlDSNError{fmt.Sprintf("DATETIME read in location %q: the outbox stores UTC; "+
				"remove loc from the DSN (or set loc=UTC)", v.Location())}
		}
		return v, nil
	case []byte:
		return parseMySQLTime(string(v))
	case string:
		return parseMySQLTime(v)
	}
	return time.Time{}, fmt.Errorf("sqlstore: timestamp column holds %T %v, want a time", src, src)
}

// parseMySQLTime reads DATETIME text (fractional seconds optional) as UTC.
func parseMySQLTime(s string) (time.Time, error) {
	t, err := time.Parse(time.DateTime, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("sqlstore: timestamp column holds %q, want DATETIME text", s)
	}
	return t, nil
}

// mysqlURL turns mysql://user:pass@host:port/db?param=value into a
// go-sql-driver/mysql DSN: the URL's parameters are the driver's, and
// parseTime=true is added unless set, so that the pool reads DATETIME as
// time.Time for the application's own queries too.
func mysqlURL(d *dialect, raw string) (Source, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Source{}, urlErr("bad MySQL URL: %v", parseURLErr(err))
	}
	if u.Opaque != "" || u.Host == "" {
		return Source{}, urlErr("bad MySQL URL: write mysql://user:password@host:port/database")
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return Source{}, urlErr("MySQL URL %q names no database: write mysql://user:password@host:port/database", u.Redacted())
	}
	var b strings.Builder
	if u.User != nil {
		b.WriteString(u.User.Username())
		if p, ok := u.User.Password(); ok {
			b.WriteString(":" + p)
		}
		b.WriteString("@")
	}
	b.WriteString("tcp(" + u.Host + ")/" + db)
	q := u.RawQuery
	if !u.Query().Has("parseTime") {
		q = strings.TrimPrefix(q+"&parseTime=true", "&")
	}
	b.WriteString("?" + q)
	if err := mysqlCheckParams(q); err != nil {
		return Source{}, err
	}
	return Source{Dialect: d, Driver: d.driverNames[0], DSN: b.String(), Display: RedactDSN(raw)}, nil
}

// mysqlDSN checks a go-sql-driver/mysql DSN,
// [user[:password]@][net[(addr)]]/dbname[?param=value&…].
func mysqlDSN(d *dialect, dsn string) (Source, error) {
	slash := strings.LastIndex(dsn, "/")
	if slash < 0 {
		return Source{}, urlErr("MySQL DSN names no database: write user:password@tcp(host:3306)/database")
	}
	_, q, _ := strings.Cut(dsn[slash:], "?")
	if err := mysqlCheckParams(q); err != nil {
		return Source{}, err
	}
	return Source{Dialect: d, Driver: d.driverNames[0], DSN: dsn, Display: RedactDSN(dsn)}, nil
}

// mysqlCheckParams refuses the driver parameters (query) the store cannot
// work with: a loc other than UTC, in which the driver would read the
// stored UTC as local time.
func mysqlCheckParams(query string) error {
	for _, kv := range strings.Split(query, "&") {
		k, loc, _ := strings.Cut(kv, "=")
		if k != "loc" {
			continue
		}
		if v, err := url.QueryUnescape(loc); err == nil {
			loc = v
		}
		if loc == "" || loc == "UTC" { // "" is UTC too
			continue
		}
		return urlErr("MySQL DSN sets loc=%s: the outbox stores DATETIME in UTC, which the driver would read as %s time; "+
			"remove loc (or set loc=UTC)", loc, loc)
	}
	return nil
}

// mysqlErrorNumber returns the error number of a go-sql-driver/mysql error
// (MySQLError.Number), or 0.
func mysqlErrorNumber(err error) uint64 {
	if f, ok := driverErrorField(err, "Number"); ok && f.CanUint() {
		return f.Uint()
	}
	return 0
}

// mysqlClaim runs the recovery and the fresh claim (see recoverWhere) in
// one READ COMMITTED transaction of its own, so that rows a scan rejects
// are not kept locked: each SELECT … FOR UPDATE SKIP LOCKED (rows another
// claim holds are skipped, not waited for) is followed by an UPDATE of the
// rows it selected, by primary key.
func mysqlClaim(ctx context.Context, s *Store, req outbox.ClaimRequest, f typeFilter) ([]outbox.Record, error) {
	return mysqlAgainOnDeadlock(func() ([]outbox.Record, error) { return mysqlClaimOnce(ctx, s, req, f) })
}

// mysqlAgainOnDeadlock runs a claim again while InnoDB ends it with a
// deadlock, up to mysqlClaimAttempts runs: two concurrent claims may
// deadlock (their updates touch the same secondary index pages), and the
// claim changed nothing then.
func mysqlAgainOnDeadlock(claim func() ([]outbox.Record, error)) ([]outbox.Record, error) {
	for attempt := 1; ; attempt++ {
		recs, err := claim()
		if err == nil || attempt == mysqlClaimAttempts || mysqlErrorNumber(err) != 1213 { // ER_LOCK_DEADLOCK
			return recs, err
		}
	}
}

// mysqlClaimAttempts bounds the runs of a claim that deadlocks.
const mysqlClaimAttempts = 3

// mysqlClaimOnce is one run of mysqlClaim.
func mysqlClaimOnce(ctx context.Context, s *Store, req outbox.ClaimRequest, f typeFilter) ([]outbox.Record, error) {
	a := s.claimArgs(req)
	var recs []outbox.Record
	err := s.db.ReadCommitted(ctx, func(tx Conn) error {
		if !req.NoRecovery {
			where, args := mysqlRecoverWhere, a.recoverWhere
			if f.on() {
				cond, typeArgs := mysqlTypeCond(f)
				where, args = "lease_at <= ?"+cond+" ORDER BY lease_at", slices.Concat(args, typeArgs)
			}
			recovered, err := mysqlClaimStep(ctx, s, tx, where, args, req.Limit, recoverSet, a.recoverSet)
			if err != nil {
				return err
			}
			if recs, err = s.headsOnly(ctx, tx, req, recovered); err != nil {
				return err
			}
		}
		if len(recs) == req.Limit {
			return nil
		}
		fresh := func(n int) ([]outbox.Record, error) {
			switch {
			case f.typed:
				return mysqlTypedClaim(ctx, s, tx, f, a, n)
			case f.on():
				cond, typeArgs := mysqlTypeCond(f)
				return mysqlClaimStep(ctx, s, tx, "due_at <= ? AND created_at <= ?"+cond+" ORDER BY due_at, event_id",
					slices.Concat(a.freshWhere, typeArgs), n, freshSet, a.freshSet)
			}
			return mysqlClaimStep(ctx, s, tx, mysqlFreshWhere, a.freshWhere, n, freshSet, a.freshSet)
		}
		if !req.Ordered {
			got, err := fresh(req.Limit - len(recs))
			recs = append(recs, got...)
			return err
		}
		heads := func(n int) ([]outbox.Record, error) {
			return s.claimHeads(ctx, tx, tx, req, f, n, mysqlLockIDs(ctx, s, tx, req, a))
		}
		var err error
		recs, err = s.fillOrdered(recs, req.Limit, heads, fresh)
		return err
	})
	if err != nil {
		return nil, err
	}
	mysqlClaimed(req, recs)
	return recs, nil
}

// mysqlLockIDs returns the lock of heads by id of a claim for req in tx
// (see claimHeads): the ids that are still claimable, locked FOR UPDATE
// SKIP LOCKED and claimed.
func mysqlLockIDs(ctx context.Context, s *Store, tx Conn, req outbox.ClaimRequest, a claimParams) func(ids []string) ([]outbox.Record, error) {
	return func(ids []string) ([]outbox.Record, error) {
		now := req.Now.UTC()
		where := "status IN (0, 2) AND locked_by IS NULL AND available_at <= ? AND created_at <= ? AND event_id IN (?" + strings.Repeat(", ?", len(ids)-1) + ")"
		args := []any{s.t(now), s.t(now.Add(-req.SkipRecent))}
		for _, id := range ids {
			args = append(args, id)
		}
		return mysqlClaimStep(ctx, s, tx, where, args, len(ids), freshSet, a.freshSet)
	}
}

// mysqlClaimed applies a claim for req to recs, which were read before
// their update.
func mysqlClaimed(req outbox.ClaimRequest, recs []outbox.Record) {
	lockedAt := req.Now.UTC().Truncate(time.Microsecond) // as bound: microseconds
	for i := range recs {
		r := &recs[i]
		if r.LockedBy != "" && r.LastError != outbox.ErrInFlight.Error() {
			r.LastError = outbox.ErrClaimExpired.Error()
		}
		r.LockedBy, r.LockedAt = req.Owner, lockedAt
	}
}

// mysqlContinueRuns is ContinueRuns on MySQL and MariaDB: the runs read
// and locked in one transaction, as its claim reads and locks them.
func mysqlContinueRuns(ctx context.Context, s *Store, req outbox.ClaimRequest, f typeFilter, hs []runHead) ([]outbox.Record, error) {
	return mysqlAgainOnDeadlock(func() ([]outbox.Record, error) {
		var recs []outbox.Record
		err := s.db.ReadCommitted(ctx, func(tx Conn) error {
			var err error
			recs, err = s.claimRunHeads(ctx, tx, tx, req, f, hs, mysqlLockIDs(ctx, s, tx, req, s.claimArgs(req)))
			return err
		})
		if err != nil {
			return nil, err
		}
		mysqlClaimed(req, recs)
		return recs, nil
	})
}

// mysqlClaimStep selects up to limit rows matching where (with its
// arguments) FOR UPDATE SKIP LOCKED and sets them with set (and its
// arguments).
func mysqlClaimStep(ctx context.Context, s *Store, tx Conn, where string, whereArgs []any, limit int, set string, setArgs []any) ([]outbox.Record, error) {
	query := "SELECT " + s.q.columns + " FROM " + s.table + " WHERE " + where + " LIMIT ? FOR UPDATE SKIP LOCKED"
	recs, err := s.queryRecords(ctx, tx, make([]outbox.Record, 0, limit), query, append(whereArgs, limit)...)
	if err != nil {
		if mysqlErrorNumber(err) == 1064 && strings.Contains(err.Error(), "SKIP LOCKED") { // ER_PARSE_ERROR
			err = fmt.Errorf("%w (the claim needs FOR UPDATE SKIP LOCKED: MySQL 8.0+ or MariaDB 10.6+)", err)
		}
		return nil, err
	}
	if len(recs) == 0 {
		return nil, nil
	}
	args := make([]any, 0, len(setArgs)+len(recs))
	args = append(args, setArgs...)
	for _, r := range recs {
		var dsnErr *mysqlDSNError
		if errors.As(r.Err, &dsnErr) {
			return nil, dsnErr // the pool is misconfigured, not the row: claim nothing
		}
		args = append(args, r.ID)
	}
	update := "UPDATE " + s.table + " SET " + set + " WHERE event_id IN (?" + strings.Repeat(", ?", len(recs)-1) + ")"
	_, err = tx.Exec(ctx, update, args...)
	return recs, err
}

// mysqlTypeCond returns the condition (starting with " AND ") that the
// row's event type passes filter f, and its arguments: the types compared
// as bytes (utf8mb4_bin pads: "A" would equal "A ").
func mysqlTypeCond(f typeFilter) (string, []any) {
	types, in := f.skip, " NOT IN ("
	if f.typed {
		types, in = f.types, " IN ("
	}
	args := make([]any, len(types))
	for i, t := range types {
		args[i] = t
	}
	return " AND CAST(event_type AS BINARY)" + in + "?" + strings.Repeat(", ?", len(types)-1) + ")", args
}

// mysqlTypedClaim is the fresh claim of up to n rows of f's types, in tx:
// one locking read of the type index (outbox_type_idx) per type, each
// stopping after n rows, then the first n of them in due order are claimed
// (the others are unlocked when the claim's transaction ends).
func mysqlTypedClaim(ctx context.Context, s *Store, tx Conn, f typeFilter, a claimParams, n int) ([]outbox.Record, error) {
	type due struct {
		id string
		at timeCol
	}
	var found []due
	read := mysqlTypedRead(s.table)
	for _, typ := range f.types {
		err := s.eachRowOn(ctx, tx, read, []any{typ, len(typ), a.freshWhere[0], a.freshWhere[1], n}, func(rows Rows) error {
			d := due{at: timeCol{d: s.d}}
			if err := rows.Scan(&d.id, &d.at); err != nil {
				return err
			}
			if d.at.err != nil {
				return d.at.err
			}
			found = append(found, d)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(found, func(x, y due) int {
		if c := x.at.t.Compare(y.at.t); c != 0 {
			return c
		}
		return strings.Compare(x.id, y.id)
	})
	found = found[:min(len(found), n)]
	if len(found) == 0 {
		return nil, nil
	}
	args := make([]any, len(found))
	for i, d := range found {
		args[i] = d.id
	}
	return mysqlClaimStep(ctx, s, tx, "event_id IN (?"+strings.Repeat(", ?", len(found)-1)+")", args, len(found), freshSet, a.freshSet)
}

// mysqlTypedRead returns the read of the due rows of one event type (its
// bytes and length: utf8mb4_bin pads) of table, in due order from the type
// index alone, locking them. Arguments: the type, its length, now, the
// created cutoff, the limit.
func mysqlTypedRead(table string) string {
	return "SELECT event_id, due_at FROM " + table + " WHERE pending_type = ? AND LENGTH(pending_type) = ? AND due_at <= ? AND created_at <= ?" +
		" ORDER BY due_at, event_id LIMIT ? FOR UPDATE SKIP LOCKED"
}
