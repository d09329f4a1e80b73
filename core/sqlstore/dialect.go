package sqlstore

import (
	"context"
	"strconv"
	"strings"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// Dialect is the SQL flavour of one database family: PostgreSQL, MySQL or
// SQLite. It cannot be implemented outside this package.
type Dialect interface {
	// Name returns the dialect's short name, such as "sqlite".
	Name() string
	spec() *dialect
}

// dialect is what a database family provides: how it is recognised (the
// registry's fields), its SQL variations, and every per-dialect behaviour
// of the shared code. A new dialect is one file declaring one *dialect
// value, an entry in registry (registry.go), and its DDL in
// schema/<name>.sql (and schema/inbox_<name>.sql,
// schema/idempotency_<name>.sql); everything else is shared. Outside this
// package only the test backends (outboxsqltest) list the dialects.
type dialect struct {
	name string
	// title names the database family in messages, such as "PostgreSQL".
	title string

	// What the registry (registry.go) recognises the dialect by: other
	// names of the family; the names under which its database/sql drivers
	// register, the first being the one a URL is opened with; the types
	// of those drivers, as "<package path>.<type name>"; the schemes of its
	// URLs, written with schemeSep in messages.
	aliases     []string
	driverNames []string
	driverTypes []string
	schemes     []string
	schemeSep   string
	// fromURL maps a URL of one of the schemes (or, for the embedded
	// database, a plain path) to a Source; fromDSN maps a DSN of the
	// default driver. Both check what the store needs of the DSN.
	fromURL func(d *dialect, raw string) (Source, error)
	fromDSN func(d *dialect, dsn string) (Source, error)
	// embedded: the database is a file the process opens, and a value
	// without a URL scheme is the path of one (see ParseURL).
	embedded bool

	// reserved lists, space-separated in lower case, the words the
	// database refuses as an unquoted table (or schema) name: no name the
	// store writes into SQL may be one of them (see ValidateTableName).
	reserved string
	// schemaFile is the DDL template under schema/, see renderSchema.
	schemaFile string
	// placeholder returns the bind marker of the i-th parameter (1-based).
	placeholder func(i int) string
	// timeArg turns a UTC timestamp into a bind argument.
	timeArg func(t time.Time) any
	// scanTime turns a scanned column value (never nil) into a time.
	scanTime func(src any) (time.Time, error)
	// claimLock is appended to the claim's inner SELECT, for example
	// " FOR UPDATE SKIP LOCKED".
	claimLock string
	// claim, when set, replaces the shared single-statement claim
	// (UPDATE … WHERE event_id IN (SELECT … LIMIT n) RETURNING …), for
	// databases that need several statements. f is the claim's filter on
	// event types (see filter.go).
	claim func(ctx context.Context, s *Store, req outbox.ClaimRequest, f typeFilter) ([]outbox.Record, error)
	// continueRuns, when set, replaces the shared ContinueRuns (MySQL: in
	// a transaction of its own, the rows locked as its claim locks heads).
	continueRuns func(ctx context.Context, s *Store, req outbox.ClaimRequest, f typeFilter, hs []runHead) ([]outbox.Record, error)
	// purge, when set, replaces the shared selection of the rows a purge
	// deletes (see purgeSelection).
	purge *purgeSelection
	// idsFrom, when set, replaces "event_id IN (<sub>)", the condition by
	// which the shared claim and purge find the rows their subquery sub
	// selects.
	idsFrom func(sub string) string
	// missingTable reports whether err says that the table does not exist.
	missingTable func(err error) bool
	// onConflict, when set, returns the clause that ends an INSERT so that
	// a row whose unique key (the columns key) exists is skipped instead of
	// failing the statement. PostgreSQL needs it: a failed statement
	// aborts the caller's whole transaction. MySQL and SQLite roll back
	// only the failed statement, so a plain INSERT that fails keeps it
	// usable.
	onConflict func(key string) string
	// limitedDelete: the database cannot LIMIT a subquery of IN, but
	// limits a DELETE itself (DELETE … ORDER BY … LIMIT), which the purges
	// of the side tables then use.
	limitedDelete bool
	// rowID names a column every table has that identifies its row
	// (SQLite's rowid), or is "": a purge without limitedDelete finds its
	// rows by it, else by the table's key.
	rowID string
	// sharedLock, when set, ends a SELECT that must see the newest
	// committed row even inside a transaction whose snapshot predates it
	// (MySQL's REPEATABLE READ): a locking read.
	sharedLock string
	// uniqueViolation reports whether err is a duplicate-key error.
	uniqueViolation func(err error) bool
	// idsArray, when set, is the condition "event_id is one of the ids of
	// one array parameter", bound as an array literal (see idsSQL).
	idsArray string
	// pendingRows returns the query that lists the columns cols of the
	// pending rows of table from the indexes that hold them, never reading
	// the DONE rows (Stats).
	pendingRows func(table, cols string) string
	// claimedWhere is the condition, served by an index, of the claimed
	// pending rows (Stats.Claimed).
	claimedWhere string
	// pendingTypes, when set, returns the query that lists the event type
	// (as event_type) and creation time of the pending rows of table from
	// an index of its own: Stats reads the backlog per type there, apart.
	// Without it, Stats reads the types with the pending rows
	// (pendingRows), in one statement.
	pendingTypes func(table string) string
	// owedWhere returns the condition, served by an index, of the DEAD
	// rows of table that owe subscribers.
	owedWhere func(table string) string
	// rowsEstimate returns the query (and its arguments) of a cheap
	// estimate of the number of rows of table, 0 when there is none:
	// Stats derives the number of DONE rows from it on a large table.
	rowsEstimate func(table string) (string, []any)
	// padSpace: the table's collation compares strings as if padded with
	// spaces (MySQL's and MariaDB's PAD SPACE collations, utf8mb4_bin
	// among them: "acme " = "acme"), so a comparison that must be exact
	// also compares lengths (see tenantWhere).
	padSpace bool
	// maxIdent is the longest identifier the database keeps as written;
	// longer ones are cut (PostgreSQL) or refused. Zero: no limit below
	// the 64 characters every table name is held to.
	maxIdent int
	// indexQuery returns the query (and its arguments) that lists the names
	// of the indexes of table name in schema ("" for the current one).
	indexQuery func(schema, name string) (string, []any)
	// columnQuery returns the query (and its first arguments) that counts
	// the columns of table name in schema named by its last argument.
	columnQuery func(schema, name string) (string, []any)
	// upgrade, when set, brings a table made by an earlier schema up to
	// date; Migrate runs it after the DDL. Dialects whose DDL does that
	// itself (DROP INDEX IF EXISTS, CREATE INDEX IF NOT EXISTS) need none.
	upgrade func(ctx context.Context, s *Store) error
	// notifies: wake-ups are NOTIFY and LISTEN (see wake.go); without,
	// they are a signal row.
	notifies bool
	// oneWriter: the database has one write lock, so the store's own
	// writes take turns in the process (see serialConn).
	oneWriter bool
	// maxBatch caps rows per multi-row INSERT.
	maxBatch int
	// maxListIDs caps the ids (or keys) of one IN list, on dialects
	// without arrays: an acknowledgement of a drain's batch (up to 2048
	// ids) is one statement, as is the UPDATE of a claim of 2000 rows.
	maxListIDs int

	// Ordering (see ordering.go). seq names the insertion sequence's
	// column. openKey returns the condition "the row called alias is an
	// ordered event of key that is not DONE", which the order index
	// serves. heads returns the statement that lists the heads of the keys
	// after a cursor (see walkHeads).
	seq     string
	openKey func(alias, key string) string
	heads   func(d *dialect, table string, deadSkips, typed bool) string
	// headArgs orders the walk's arguments (now and recent already bound
	// with timeArg) as heads' statement takes them.
	headArgs func(cursor string, limit int, now, recent any) []any
	// openKeyCol names the column that holds the key of every ordered
	// event that is not DONE, and openKeyCond the condition (ending in
	// " AND ", or "") that selects those rows: PendingKeys lists it.
	openKeyCol, openKeyCond string
	// repark returns the statement that parks the pending events of a
	// list of keys that wait behind a DEAD event and unparks the others
	// (see Store.repark): prefix and tail go around the keys condition on
	// col (see keysSQL).
	repark func(d *dialect, table string) (prefix, col, tail string)
	// sweep returns the statement that unparks the parked events no DEAD
	// event of their key comes before, of every key (see
	// Store.sweepParked): repark's, over the keys and rows of the park
	// index.
	sweep func(d *dialect, table string) string
	// sweepReadCommitted runs the sweep in a READ COMMITTED transaction
	// (MySQL: under REPEATABLE READ its reads would take next-key locks on
	// the keys' rows, blocking their writes, for as long as it runs).
	sweepReadCommitted bool
	// lockHeads, when set, returns the statement that claims heads by id:
	// head and tail go around the ids condition (see idsSQL); set is the
	// SET clause, claimable the condition (ending in " AND ") that the
	// heads are still claimable, selectList what RETURNING reads. Nil
	// where the dialect's own claim takes heads (MySQL).
	lockHeads func(table, set, claimable, selectList string) (head, tail string)

	// Control tables (see control.go). upsert returns the clause that
	// ends an INSERT so that a row whose key (the column key) exists is
	// updated instead, its columns cols set to the inserted values.
	// lastInsertID, when set, is the query that returns the key the last
	// INSERT of the connection generated (MySQL has no INSERT …
	// RETURNING); where it is empty, the INSERT returns it.
	upsert       func(key string, cols []string) string
	lastInsertID string

	// The horizon guard (see horizon.go), empty where the database has no
	// vacuum horizon: horizonTable reads the table's tuples, vacuums and
	// size, and the sessions hidden from the store's role, its one
	// parameter the table's name; horizonHolders the oldest holder of the
	// horizon of each kind.
	horizonTable, horizonHolders string
}

func (d *dialect) Name() string   { return d.name }
func (d *dialect) spec() *dialect { return d }
func (d *dialect) String() string { return d.name }

// skipConflict returns the onConflict clause for the unique key key, or "".
func (d *dialect) skipConflict(key string) string {
	if d.onConflict == nil {
		return ""
	}
	return d.onConflict(key)
}

// inSubquery returns the condition "event_id is one of the ids sub selects".
func (d *dialect) inSubquery(sub string) string {
	if d.idsFrom != nil {
		return d.idsFrom(sub)
	}
	return "event_id IN (" + sub + ")"
}

// questionMark is the placeholder of SQLite and MySQL.
func questionMark(int) string { return "?" }

// dollar is the placeholder of PostgreSQL.
func dollar(i int) string { return "$" + strconv.Itoa(i) }

// Rebind rewrites the ? placeholders of query into d's style ($1, $2, …
// on PostgreSQL; unchanged elsewhere), so application SQL can be written
// once for every database. query must not contain a literal question mark.
func Rebind(d Dialect, query string) string {
	if d == nil {
		return query
	}
	return d.spec().rebind(query, 1)
}

// TimeArg returns t as d binds a timestamp column's value: an instant with
// microseconds (PostgreSQL), UTC DATETIME text (MySQL), Unix microseconds
// (SQLite); for application SQL that writes or compares the outbox
// table's timestamps as the store does.
func TimeArg(d Dialect, t time.Time) any { return d.spec().timeArg(t.UTC()) }

// rebind replaces every ? in query with d's placeholders numbered from
// first. The shared SQL never contains a literal question mark.
func (d *dialect) rebind(query string, first int) string {
	if d.placeholder(1) == "?" {
		return query
	}
	var b strings.Builder
	n := first
	for _, r := range query {
		if r == '?' {
			b.WriteString(d.placeholder(n))
			n++
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// timeCol scans a nullable timestamp column with a dialect's decoder. It
// never fails the scan: a bad value is kept in err so that one corrupt row
// does not fail a whole claim.
type timeCol struct {
	d   *dialect
	t   time.Time
	err error
}

func (c *timeCol) Scan(src any) error {
	c.t, c.err = time.Time{}, nil
	if src == nil {
		return nil
	}
	t, err := c.d.scanTime(src)
	if err != nil {
		c.err = err
		return nil
	}
	c.t = t.UTC()
	return nil
}
