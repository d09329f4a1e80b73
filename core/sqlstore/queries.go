package sqlstore

import (
	"math/bits"
	"strings"
	"sync"
)

// columns is the select list every query that returns records uses, in the
// order recordScan reads it, followed by the dialect's sequence column
// (see selectList).
const columns = "event_id, event_type, aggregate_type, aggregate_id, tenant_id, schema_version, payload, payload_bytes, headers, " +
	"status, attempts, occurred_at, available_at, created_at, done_at, last_error, locked_by, locked_at, ordering_key, subscribers"

// selectList returns the select list of d: columns and the sequence.
func (d *dialect) selectList() string { return columns + ", " + d.seq }

// insertCols is a set of the optional columns of an insert (a multi-row
// INSERT or a COPY). A batch names those that one of its rows sets; the
// others take the table's defaults (the unset value). So a typical event
// binds 9 parameters instead of 15, and names 9 columns instead of 17: on
// PostgreSQL, planning a 100-row INSERT that wrote its unset columns out
// as literals took twice as long as one that left them out (lib/pq plans
// every statement), and encoding parameters is most of the client's work
// of an insert.
type insertCols uint8

const (
	colTenant       insertCols = 1 << iota // tenant_id; default ''
	colVersion                             // schema_version; default 1
	colPayload                             // payload (JSON); default NULL
	colPayloadBytes                        // payload_bytes; default NULL
	colHeaders                             // headers; default NULL
	colClaim                               // locked_by and locked_at; default NULL
	colKey                                 // ordering_key; default NULL
	colAll          = colKey<<1 - 1
)

// columns returns the columns of an insert of c (a multi-row INSERT or a
// COPY), in the order of the arguments of appendInsertArgs.
func (c insertCols) columns() []string {
	cols := []string{"event_id", "event_type", "aggregate_type", "aggregate_id"}
	for _, o := range []struct {
		col  insertCols
		name string
	}{{colTenant, "tenant_id"}, {colVersion, "schema_version"}, {colPayload, "payload"}, {colPayloadBytes, "payload_bytes"}, {colHeaders, "headers"}} {
		if c&o.col != 0 {
			cols = append(cols, o.name)
		}
	}
	cols = append(cols, "occurred_at", "available_at", "created_at")
	if c&colClaim != 0 {
		cols = append(cols, "locked_by", "locked_at")
	}
	if c&colKey != 0 {
		cols = append(cols, "ordering_key")
	}
	return cols
}

// count returns len(c.columns()) without building the list: the fixed
// columns, one per optional column, and a second for the claim.
func (c insertCols) count() int {
	n := 7 + bits.OnesCount8(uint8(c))
	if c&colClaim != 0 {
		n++
	}
	return n
}

// insertSQL is the multi-row INSERT of each set of columns and row count,
// with or without the dialect's conflict clause, built when first used.
// With the clause (PostgreSQL), an id that is stored already skips its
// row, and a statement of several rows returns the ids it wrote (of one
// row, its count tells).
type insertSQL struct {
	d     *dialect
	table string
	cache sync.Map // insertKey -> string
}

type insertKey struct {
	cols     insertCols
	n        int
	conflict bool
}

// sql returns the INSERT of n rows that bind cols, ending in the dialect's
// conflict clause if conflict.
func (q *insertSQL) sql(cols insertCols, n int, conflict bool) string {
	k := insertKey{cols, n, conflict}
	if s, ok := q.cache.Load(k); ok {
		return s.(string)
	}
	list, per := cols.columns(), cols.count()
	group := "(" + strings.Repeat("?, ", per-1) + "?)"
	var sb strings.Builder
	sb.WriteString("INSERT INTO " + q.table + " (" + strings.Join(list, ", ") + ") VALUES ")
	for i := range n {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(q.d.rebind(group, 1+i*per))
	}
	if conflict {
		sb.WriteString(q.d.skipConflict("event_id"))
		if n > 1 {
			sb.WriteString(" RETURNING event_id")
		}
	}
	s := sb.String()
	q.cache.Store(k, s)
	return s
}

// The claim is two statements, each reading an index of its own. The
// recovery takes rows whose claim expired (their owner stopped renewing it:
// it crashed, hangs or lost the database) through the lease index of
// claimed rows by claim time, and records the take-over in last_error; the
// fresh claim takes due, unclaimed rows through the due index of unclaimed
// unordered rows in due order. A claimed row leaves the due index, so no
// claim steps over rows that are being delivered. Ordered rows are not in
// it: only an ordered claim takes them, as the heads of their keys (see
// ordering.go).
const (
	// recoverSet: the in-flight text (kept, see outbox.ErrInFlight), the
	// take-over error, owner, now.
	recoverSet = "last_error = CASE WHEN last_error = ? THEN last_error ELSE ? END, locked_by = ?, locked_at = ?"
	// recoverWhere: lease cutoff.
	recoverWhere = "status IN (0, 2) AND locked_by IS NOT NULL AND locked_at <= ?"
	// freshSet: owner, now.
	freshSet = "locked_by = ?, locked_at = ?"
	// freshWhere: now (due), created cutoff (skip recent).
	freshWhere = "status IN (0, 2) AND locked_by IS NULL AND ordering_key IS NULL AND available_at <= ? AND created_at <= ?"
)

// tenantWhere selects one tenant's events (List, Count, Purge). Its
// second term is what the tenant index of PostgreSQL and SQLite is partial
// on (only events with a tenant are in it): written out, it lets the
// planner use the index whatever the bound tenant, in generic plans too.
// On a database whose collation pads (padSpace), it is equalWhere's
// instead: the equality finds the tenant's entries in the index, and the
// length (in bytes, as Go counts) leaves out those that differ only by
// trailing spaces. A tenant's purge deletes in tenantOrder: the order of
// the tenant index, oldest id first, which every database reads from the
// index (MariaDB's DELETE sorts "ORDER BY event_id" even after equalities
// on the index's first columns).
const (
	tenantWhere = " AND tenant_id = ? AND tenant_id <> ''"
	tenantOrder = " ORDER BY tenant_id, status, event_id"
)

// tenantWhere returns the condition that selects the events of one
// tenant, exactly; equalArgs binds it.
func (d *dialect) tenantWhere() string {
	if d.padSpace {
		return d.equalWhere("tenant_id")
	}
	return tenantWhere
}

// equalWhere returns the condition that a text column equals a bound
// value exactly, trailing spaces included: on a database whose collation
// pads (padSpace) it compares the lengths too (in bytes, as Go counts);
// equalArgs binds it.
func (d *dialect) equalWhere(col string) string {
	if d.padSpace {
		return " AND " + col + " = ? AND LENGTH(" + col + ") = ?"
	}
	return " AND " + col + " = ?"
}

// equalArgs returns the arguments of equalWhere (and tenantWhere) for v.
func (d *dialect) equalArgs(v string) []any {
	if d.padSpace {
		return []any{v, len(v)}
	}
	return []any{v}
}

// queries is every statement of one Store, built once by buildQueries.
type queries struct {
	columns string // the select list (see selectList)
	get     string
	insert  *insertSQL
	// existing selects which of some ids are stored; undoInsert deletes
	// the rows an Insert wrote before it found a duplicate id.
	existing     *idsSQL
	undoInsert   *idsSQL
	recoverClaim string // UPDATE … RETURNING of expired claims
	freshClaim   string // UPDATE … RETURNING of due unclaimed rows
	renew        *idsSQL
	markDone     *idsSQL
	markRetry    string
	countAttempt string
	markDead     string
	release      *idsSQL
	replay       *idsSQL
	deleteDead   *idsSQL
	statsPending string // Stats: per pending status (and type), the rows, the due ones, the oldest
	statsDead    string // Stats: DEAD rows
	statsOwed    string // Stats: DEAD rows that owe subscribers, per list
	statsDone    string // Stats: the exact count of DONE rows, on a small table
	statsClaimed string // Stats: the claimed pending rows
	statsTypes   string // Stats: the pending rows per event type, when read apart
	purge        string // Purge of every tenant
	purgeTenant  string // Purge of one tenant
	// CountPurgeable of every tenant, and of one.
	purgeCount, purgeCountTenant string
	// The SELECT of the DEAD events Purge deletes (all, or one tenant's).
	purgeDead, purgeDeadTenant string
	ord                        *orderQueries  // ordered delivery, see ordering.go
	filter                     *filterQueries // claims with type filters, see filter.go
}

func buildQueries(d *dialect, t string) *queries {
	q := &queries{
		insert:     &insertSQL{d: d, table: t},
		existing:   newIDsSQL(d, "SELECT event_id FROM "+t+" WHERE "),
		undoInsert: newIDsSQL(d, "DELETE FROM "+t+" WHERE "),
		markDone: newIDsSQL(d, "UPDATE "+t+" SET status = 1, done_at = ?, last_error = NULL, locked_by = NULL, locked_at = NULL"+
			" WHERE locked_by = ? AND status IN (0, 2) AND "),
		countAttempt: d.rebind("UPDATE "+t+" SET attempts = attempts + 1, last_error = ? WHERE event_id = ? AND locked_by = ? AND status IN (0, 2)", 1),
		markRetry: d.rebind("UPDATE "+t+" SET status = 2, available_at = ?, last_error = ?, attempts = attempts + ?, subscribers = ?,"+
			" locked_by = NULL, locked_at = NULL WHERE event_id = ? AND locked_by = ? AND status IN (0, 2)", 1),
		markDead: d.rebind("UPDATE "+t+" SET status = 3, done_at = ?, last_error = ?, attempts = attempts + ?, subscribers = ?,"+
			" locked_by = NULL, locked_at = NULL WHERE event_id = ? AND locked_by = ? AND status IN (0, 2)", 1),
		renew: newIDsSQL(d, "UPDATE "+t+" SET locked_at = ? WHERE locked_by = ? AND status IN (0, 2) AND "),
		release: newIDsSQL(d, "UPDATE "+t+" SET locked_by = NULL, locked_at = NULL"+
			" WHERE locked_by = ? AND status IN (0, 2) AND "),
		replay: newIDsSQL(d, "UPDATE "+t+" SET status = 0, attempts = 0, available_at = ?, done_at = NULL,"+
			" locked_by = NULL, locked_at = NULL, parked = 0 WHERE status = 3 AND "),
		deleteDead: newIDsSQL(d, "DELETE FROM "+t+" WHERE status = 3 AND "),
		columns:    d.selectList(),
		get:        d.rebind("SELECT "+d.selectList()+" FROM "+t+" WHERE event_id = ?", 1),
		// Stats reads the pending rows from the indexes that hold them
		// (dialect.pendingRows), per status and event type (or, with
		// dialect.pendingTypes, per status and apart per type: statsTypes),
		// counts the DEAD ones in the purge index (a range of status 3) and
		// reads those that owe subscribers (dialect.owedWhere); never the
		// DONE rows of a large table. The claimed rows are those of the
		// lease index.
		statsPending: statsPendingSQL(d, t),
		statsTypes:   statsTypesSQL(d, t),
		statsClaimed: "SELECT COUNT(*) FROM " + t + " WHERE " + d.claimedWhere,
		statsDead:    "SELECT COUNT(*) FROM " + t + " WHERE status IN (1, 3) AND status = 3",
		statsOwed:    "SELECT subscribers, COUNT(*) FROM " + t + " WHERE " + d.owedWhere(t) + " GROUP BY subscribers",
		statsDone:    "SELECT COUNT(*) FROM " + t + " WHERE status IN (1, 3) AND status = 1",
	}
	claim := func(set, where, order string) string {
		return d.rebind("UPDATE "+t+" SET "+set+" WHERE "+d.inSubquery("SELECT event_id FROM "+t+
			" WHERE "+where+" ORDER BY "+order+" LIMIT ?"+d.claimLock)+" RETURNING "+d.selectList(), 1)
	}
	q.ord = buildOrderQueries(d, t, d.selectList())
	q.filter = newFilterQueries(d, t)
	q.recoverClaim = claim(recoverSet, recoverWhere, "locked_at")
	q.freshClaim = claim(freshSet, freshWhere, "available_at, event_id")
	// The purge of DEAD events selects them, then deletes them as Delete
	// does (and reparks their keys): purgeIDs is its SELECT.
	sel := d.purgeSelection()
	purgeIDs := func(tenant string) string { return "SELECT event_id FROM " + t + sel.rows(tenant) }
	purge := func(tenant string) string {
		if sel.direct {
			return d.rebind("DELETE FROM "+t+sel.rows(tenant), 1)
		}
		return d.rebind("DELETE FROM "+t+" WHERE "+d.inSubquery(purgeIDs(tenant)), 1)
	}
	q.purge, q.purgeTenant = purge(""), purge(d.tenantWhere())
	q.purgeDead, q.purgeDeadTenant = d.rebind(purgeIDs(""), 1), d.rebind(purgeIDs(d.tenantWhere()), 1)
	count := func(tenant string) string { return d.rebind("SELECT COUNT(*) FROM "+t+" WHERE "+sel.where+tenant, 1) }
	q.purgeCount, q.purgeCountTenant = count(""), count(d.tenantWhere())
	return q
}

// purgeSelection describes the rows a purge deletes: where, which binds
// the status and the cutoff (the cutoff first with cutoffFirst), then a
// tenant's condition (tenantWhere) if any, in order (tenantOrder for a
// tenant's), limited. The shared one reads the purge index's range of
// terminal statuses; direct deletes with one DELETE … ORDER BY … LIMIT
// (MySQL) instead of DELETE … WHERE event_id IN (SELECT …).
type purgeSelection struct {
	where, order        string
	cutoffFirst, direct bool
}

// sharedPurge is the purge selection of the dialects that set none.
var sharedPurge = purgeSelection{where: "status IN (1, 3) AND status = ? AND COALESCE(done_at, created_at) < ?"}

// purgeSelection returns d's purge selection.
func (d *dialect) purgeSelection() purgeSelection {
	if d.purge != nil {
		return *d.purge
	}
	return sharedPurge
}

// rows returns " WHERE …" selecting the rows of a purge of tenant (""
// for every tenant, or tenantWhere), ordered and limited.
func (p purgeSelection) rows(tenant string) string {
	order := p.order
	if tenant != "" {
		order = tenantOrder
	}
	return " WHERE " + p.where + tenant + order + " LIMIT ?"
}

// args returns the arguments of the selection of status and cutoff, then
// of tenant ("" for every tenant) on d.
func (p purgeSelection) args(d *dialect, status int, cutoff any, tenant string) []any {
	args := []any{status, cutoff}
	if p.cutoffFirst {
		args[0], args[1] = args[1], args[0]
	}
	if tenant != "" {
		args = append(args, d.equalArgs(tenant)...)
	}
	return args
}

// batchSQL is a statement with a variable number of repeated groups, such as
// a multi-row INSERT or an IN list: head, then n groups joined by sep, then
// tail. The text for each n is built once and cached; n never exceeds the
// dialect's maxBatch (rows) or maxListIDs (ids), so the cache is bounded.
type batchSQL struct {
	d     *dialect
	head  string // rebound; holds fixed placeholders
	fixed int
	group string // with one ? per argument
	per   int
	sep   string
	tail  string
	cache sync.Map // int -> string
}

func newBatchSQL(d *dialect, head, group string, per int, sep, tail string) *batchSQL {
	return &batchSQL{d: d, head: d.rebind(head, 1), fixed: strings.Count(head, "?"), group: group, per: per, sep: sep, tail: tail}
}

// sql returns the statement for n groups.
func (b *batchSQL) sql(n int) string {
	if s, ok := b.cache.Load(n); ok {
		return s.(string)
	}
	var sb strings.Builder
	sb.WriteString(b.head)
	for i := range n {
		if i > 0 {
			sb.WriteString(b.sep)
		}
		sb.WriteString(b.d.rebind(b.group, b.fixed+1+i*b.per))
	}
	sb.WriteString(b.tail)
	s := sb.String()
	b.cache.Store(n, s)
	return s
}

// idsSQL is a statement about a list of event ids: prefix, then the
// condition "event_id is one of ids". By default the condition is an IN
// list with one placeholder per id, at most the dialect's batch size per
// statement; on a dialect with arrays (PostgreSQL) it is one array
// parameter, so that the statement's text is the same whatever the count
// and a driver that caches prepared statements prepares it once.
type idsSQL struct {
	d     *dialect
	list  *batchSQL // IN list; nil with arrays
	array string    // the statement with one array parameter
	fixed int       // placeholders in prefix
}

// maxArrayIDs bounds the ids of one statement with an array parameter.
const maxArrayIDs = 10_000

func newIDsSQL(d *dialect, prefix string) *idsSQL { return newIDsSQLTail(d, prefix, "") }

// newIDsSQLTail is newIDsSQL with tail (no placeholders) after the
// condition.
func newIDsSQLTail(d *dialect, prefix, tail string) *idsSQL {
	q := &idsSQL{d: d, fixed: strings.Count(prefix, "?")}
	if d.idsArray != "" {
		q.array = d.rebind(prefix+d.idsArray+tail, 1)
	} else {
		q.list = newBatchSQL(d, prefix+"event_id IN (", "?", 1, ", ", ")"+tail)
	}
	return q
}

// chunk returns the most ids one statement takes.
func (q *idsSQL) chunk() int {
	if q.list == nil {
		return maxArrayIDs
	}
	return q.d.maxListIDs
}

// bind returns the statement and its arguments for fixed (the prefix's
// arguments) and ids, at most chunk() of them.
func (q *idsSQL) bind(fixed []any, ids []string) (string, []any) {
	args := make([]any, 0, len(fixed)+len(ids))
	args = append(args, fixed...)
	if q.list == nil {
		return q.array, append(args, arrayLiteral(ids))
	}
	for _, id := range ids {
		args = append(args, id)
	}
	return q.list.sql(len(ids)), args
}

// arrayLiteral writes ids as a PostgreSQL array literal of quoted elements.
func arrayLiteral(ids []string) string {
	var b strings.Builder
	b.Grow(len(ids) * 30)
	b.WriteByte('{')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		if !strings.ContainsAny(id, `"\`) {
			b.WriteString(id)
		} else {
			for j := range len(id) { // bytes: '"' and '\\' are never part of a longer UTF-8 sequence
				if c := id[j]; c == '"' || c == '\\' {
					b.WriteByte('\\')
				}
				b.WriteByte(id[j])
			}
		}
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// statsPendingSQL returns the statement of the pending rows of Stats: per
// status (and event type, unless the dialect reads them apart:
// statsTypesSQL), their count, how many are due at its argument, and the
// oldest creation time.
func statsPendingSQL(d *dialect, t string) string {
	cols, group := "status, event_type, available_at, created_at", "status, event_type"
	if d.pendingTypes != nil {
		cols, group = "status, available_at, created_at", "status"
	}
	return d.rebind("SELECT "+group+", COUNT(*), SUM(CASE WHEN available_at <= ? THEN 1 ELSE 0 END), MIN(created_at) FROM ("+
		d.pendingRows(t, cols)+") p GROUP BY "+group, 1)
}

// statsTypesSQL returns the statement of Stats.Types on a dialect that
// reads them apart (dialect.pendingTypes), else "": the pending rows per
// event type, their count and the oldest creation time, most pending
// first, at most its argument. On a database whose collation pads
// (padSpace), types that differ only by trailing spaces are apart:
// grouped by their lengths too.
func statsTypesSQL(d *dialect, t string) string {
	if d.pendingTypes == nil {
		return ""
	}
	group := "event_type"
	if d.padSpace {
		group += ", LENGTH(event_type)"
	}
	return d.rebind("SELECT event_type, COUNT(*), MIN(created_at) FROM ("+d.pendingTypes(t)+") p GROUP BY "+group+
		" ORDER BY COUNT(*) DESC LIMIT ?", 1)
}
