package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// MySQL is the dialect of MySQL 8.0 or later and MariaDB 10.6 or later
// (InnoDB), through github.com/go-sql-driver/mysql. Its DSN needs
// parseTime=true and the default loc=UTC; a store whose pool lacks them
// fails its first claim with an error that says so.
//
// Timestamps are DATETIME(6) holding UTC, bound as UTC text so that
// neither the session time_zone nor the driver's loc changes what is
// written. The claim runs in a short READ COMMITTED transaction: SELECT …
// FOR UPDATE SKIP LOCKED over an index of pending rows in due order, then
// an UPDATE of the selected rows by primary key.
var MySQL Dialect = mysqlDialect

var mysqlDialect = &dialect{
	name:        "mysql",
	schemaFile:  "schema/mysql.sql",
	placeholder: questionMark,
	timeArg:     func(t time.Time) any { return t.UTC().Format(mysqlTimeFormat) },
	scanTime:    scanMySQLTime,
	claim:       mysqlClaim,
	purgeSQL: func(table string) string {
		return "DELETE FROM " + table + " WHERE purge_at < ? AND status = ? ORDER BY purge_at LIMIT ?"
	},
	missingTable:    func(err error) bool { return mysqlErrorNumber(err) == 1146 }, // ER_NO_SUCH_TABLE
	uniqueViolation: func(err error) bool { return mysqlErrorNumber(err) == 1062 }, // ER_DUP_ENTRY
	maxIdent:        64,
	indexQuery: func(schema, name string) (string, []any) {
		return "SELECT DISTINCT index_name FROM information_schema.statistics WHERE table_schema = COALESCE(NULLIF(?, ''), DATABASE()) AND table_name = ?",
			[]any{schema, name}
	},
	maxBatch: 500,
}

// mysqlTimeFormat is how timestamps are bound: DATETIME(6) text in UTC.
const mysqlTimeFormat = "2006-01-02 15:04:05.000000"

// mysqlClaimWhere is claimWhere over the generated column claim_at, which
// is available_at for pending rows and NULL otherwise (see schema/mysql.sql).
const mysqlClaimWhere = "claim_at <= ? AND created_at <= ? AND (locked_by IS NULL OR locked_at <= ?"

// mysqlDSNError says that the driver's DSN lacks an option the store needs.
type mysqlDSNError struct{ msg string }

func (e *mysqlDSNError) Error() string { return "sqlstore: mysql: " + e.msg }

// Unwrap makes the error match outbox.ErrInvalidConfig.
func (e *mysqlDSNError) Unwrap() error { return outbox.ErrInvalidConfig }

// scanMySQLTime accepts what go-sql-driver/mysql returns for DATETIME with
// parseTime=true and loc=UTC. Text means parseTime is missing; another
// location means loc is set: the stored UTC would be read as local time.
func scanMySQLTime(src any) (time.Time, error) {
	switch v := src.(type) {
	case time.Time:
		if v.Location() != time.UTC {
			return time.Time{}, &mysqlDSNError{fmt.Sprintf("DATETIME read in location %q: the outbox stores UTC; "+
				"remove loc from the DSN (or set loc=UTC)", v.Location())}
		}
		return v, nil
	case []byte, string:
		return time.Time{}, &mysqlDSNError{"DATETIME read as text: add parseTime=true to the DSN " +
			"(for example user:pass@tcp(host:3306)/db?parseTime=true)"}
	}
	return time.Time{}, fmt.Errorf("sqlstore: timestamp column holds %T %v, want a time", src, src)
}

// mysqlErrorNumber returns the error number of a go-sql-driver/mysql error
// (MySQLError.Number), or 0.
func mysqlErrorNumber(err error) uint64 {
	if f, ok := driverErrorField(err, "Number"); ok && f.CanUint() {
		return f.Uint()
	}
	return 0
}

// mysqlClaim locks up to req.Limit claimable rows with SELECT … FOR UPDATE
// SKIP LOCKED (rows another claim holds are skipped, not waited for), sets
// their owner and claim time, and commits, in a READ COMMITTED transaction
// of its own, so that rows the scan rejects are not kept locked.
func mysqlClaim(ctx context.Context, s *Store, req outbox.ClaimRequest) ([]outbox.Record, error) {
	_, set, args := s.claimArgs(req)
	where := mysqlClaimWhere
	if req.OwnReclaimAfter > 0 {
		where += claimOwn
	}
	query := "SELECT " + columns + " FROM " + s.table + " WHERE " + where + ") ORDER BY claim_at, event_id LIMIT ? FOR UPDATE SKIP LOCKED"
	var recs []outbox.Record
	err := s.db.ReadCommitted(ctx, func(tx Conn) error {
		var err error
		recs, err = s.queryRecords(ctx, tx, query, args...)
		if err != nil {
			if mysqlErrorNumber(err) == 1064 && strings.Contains(err.Error(), "SKIP LOCKED") { // ER_PARSE_ERROR
				err = fmt.Errorf("%w (the claim needs FOR UPDATE SKIP LOCKED: MySQL 8.0+ or MariaDB 10.6+)", err)
			}
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		ids := make([]any, 0, len(set)+len(recs))
		ids = append(ids, set...)
		for _, r := range recs {
			var dsnErr *mysqlDSNError
			if errors.As(r.Err, &dsnErr) {
				return dsnErr // the pool is misconfigured, not the row: claim nothing
			}
			ids = append(ids, r.ID)
		}
		update := "UPDATE " + s.table + " SET " + claimSet + " WHERE event_id IN (?" + strings.Repeat(", ?", len(recs)-1) + ")"
		_, err = tx.Exec(ctx, update, ids...)
		return err
	})
	if err != nil {
		return nil, err
	}
	// The rows were read before the update: apply claimSet to them.
	lockedAt := req.Now.UTC().Truncate(time.Microsecond) // as bound: microseconds
	for i := range recs {
		r := &recs[i]
		if r.LockedBy != req.Owner {
			if r.LockedBy != "" {
				r.LastError = outbox.ErrClaimExpired.Error()
			}
			r.LockedAt = lockedAt
		}
		r.LockedBy = req.Owner
	}
	return recs, nil
}
