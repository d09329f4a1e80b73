package sqlstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// Ordered delivery (outbox.Config.Ordered). An ordered event is stored
// with its ordering key; the table's insertion sequence (seq, the rowid
// on SQLite) orders the events of one key. The order index holds the
// ordered events that are not DONE by key, then sequence, so the first
// entry of a key is its head: the one event of the key an ordered claim
// may take, once it is pending, unclaimed and due.
//
// An ordered claim does not walk the due index — ordered rows are not in
// it — but the order index from key to key, one index descent per key
// (walkHeads), starting after the key where the previous claim stopped, so
// that keys take turns; then it claims the claimable heads it found by
// primary key (lockHeads), skipping rows another claim holds. A walk in
// due order with a "nothing earlier is pending" test per row would step
// over every event queued behind a head in flight: with few keys, or one
// key with a long backlog, each claim would read the whole backlog, or —
// bounded — starve the keys behind it.

// maxHeadRounds bounds the probes of one claim of heads; the cursor
// carries the walk on at the next claim.
const maxHeadRounds = 8

// orderState is the walk's position, shared by the claims of one Store.
type orderState struct {
	mu     sync.Mutex
	cursor string // the key after which the next walk starts
	flip   bool   // whether the next claim takes heads before unordered rows
	// swept is the claim time of the last sweep of parked keys
	// (sweepParked); zero before the first.
	swept time.Time
}

// orderQueries are the statements of ordered delivery, built once.
type orderQueries struct {
	heads, headsSkipDead string // the walk of heads (see walkHeads)
	// The walk of heads that also reads each head's event type, for a
	// claim with type filters.
	typedHeads, typedHeadsSkipDead string
	pending                        *keysSQL // PendingKeys
	lock                           *idsSQL  // lockHeads (PostgreSQL and SQLite)
	skip                           *idsSQL  // Skip
	repark                         *keysSQL // repark
	sweep                          string   // sweepParked
	keysOf                         *idsSQL  // the ordering keys of events, for repark
	blocked                        string   // Stats: blocked keys
	// behind and behindSkipDead select the recovered events that are no
	// heads (see headsOnly), with DeadBlocksKey and DeadSkipsKey.
	behind, behindSkipDead *idsSQL
	// The statements that read runs, by number of keys and dead policy
	// (see runSQL).
	d      *dialect
	t      string
	runsMu sync.Mutex
	runs   map[runShape]string
}

func buildOrderQueries(d *dialect, t, selectList string) *orderQueries {
	o := &orderQueries{
		d: d, t: t, behind: behindSQL(d, t, true), behindSkipDead: behindSQL(d, t, false),
		heads:              d.heads(d, t, false, false),
		headsSkipDead:      d.heads(d, t, true, false),
		typedHeads:         d.heads(d, t, false, true),
		typedHeadsSkipDead: d.heads(d, t, true, true),
		skip:               newIDsSQL(d, "UPDATE "+t+" SET status = 1, "+endSet+" WHERE status = 3 AND "),
		// The blocking rows are read from the order index (its own
		// condition written out for SQLite): the ordered rows that are not
		// DONE, not every DEAD one.
		blocked: "SELECT COUNT(*), MIN(o.done_at) FROM " + t + " o WHERE o." + d.openKeyCol + " IS NOT NULL AND " + d.openKeyCond +
			blockingWhere(d, t, "o"),
	}
	o.pending = newKeysSQL(d, "SELECT DISTINCT "+d.openKeyCol+" FROM "+t+" WHERE "+d.openKeyCond, d.openKeyCol, "")
	prefix, col, tail := d.repark(d, t)
	o.repark = newKeysSQL(d, prefix, col, tail)
	o.sweep = d.sweep(d, t)
	o.keysOf = newIDsSQL(d, "SELECT DISTINCT ordering_key FROM "+t+" WHERE ordering_key IS NOT NULL AND ")
	// The heads' own state is checked again as they are locked: another
	// claim may have taken one since the walk saw it.
	const claimable = "status IN (0, 2) AND locked_by IS NULL AND available_at <= ? AND created_at <= ? AND "
	if d.lockHeads != nil {
		head, tail := d.lockHeads(t, "locked_by = ?, locked_at = ?", claimable, selectList)
		o.lock = newIDsSQLTail(d, head, tail)
	}
	return o
}

// partialOpenKeyCol and partialOpenKeyCond are dialect.openKeyCol and
// openKeyCond where the order index is partial (PostgreSQL, SQLite).
const (
	partialOpenKeyCol  = "ordering_key"
	partialOpenKeyCond = "ordering_key IS NOT NULL AND status IN (0, 2, 3) AND "
)

// partialPendingRows is dialect.pendingRows where the due, lease and order
// indexes are partial (PostgreSQL, SQLite): the unclaimed unordered rows
// (the due index), the claimed rows (the lease index) and the unclaimed
// ordered rows (the order index), each condition written as its index's.
func partialPendingRows(t, cols string) string {
	sel := "SELECT " + cols + " FROM "
	return sel + t + " WHERE status IN (0, 2) AND locked_by IS NULL AND ordering_key IS NULL" +
		" UNION ALL " + sel + t + " WHERE status IN (0, 2) AND locked_at IS NOT NULL" +
		" UNION ALL " + sel + t + " WHERE ordering_key IS NOT NULL AND status IN (0, 2, 3) AND status <> 3 AND locked_at IS NULL"
}

// partialClaimedWhere is dialect.claimedWhere where the lease index is
// partial (PostgreSQL, SQLite): its condition.
const partialClaimedWhere = "status IN (0, 2) AND locked_at IS NOT NULL"

// partialOwedWhere is dialect.owedWhere where the owed index is partial
// (PostgreSQL, SQLite): its condition.
func partialOwedWhere(string) string { return "status = 3 AND subscribers IS NOT NULL" }

// partialOpenKey is dialect.openKey where the order index is partial
// (PostgreSQL, SQLite).
func partialOpenKey(alias, key string) string {
	return alias + ".ordering_key = " + key + " AND " + alias + ".status IN (0, 2, 3)"
}

// blockingWhere is the condition "the row called o is a DEAD event that
// holds back its ordering key": no event of its key before it is not DONE.
func blockingWhere(d *dialect, table, o string) string {
	return o + ".status = 3 AND " + o + ".ordering_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM " + table + " e WHERE " +
		d.openKey("e", o+".ordering_key") + " AND e." + d.seq + " < " + o + "." + d.seq + ")"
}

// blockingWhere is blockingWhere of the store's dialect and table.
func (s *Store) blockingWhere(o string) string { return blockingWhere(s.d, s.table, o) }

// The walk of heads (dialect.heads) lists the keys after a cursor in key
// order, at most a cap, each with the id of its head and whether that
// head is claimable now (1 or 0), and a number that gives the walk's
// order. Its arguments are the cursor, the cap, now and the created-at
// cutoff of SkipRecent, in the order each statement says. With
// deadSkips, DEAD events are not heads (outbox.DeadSkipsKey). With typed,
// each row ends with the head's event type: a claim with type filters
// claims only the heads whose type they let through, and the keys of the
// others wait.

// headArgs orders the walk's arguments as the dialect's statement takes
// them (dialect.headArgs).
func (s *Store) headArgs(cursor string, limit int, now, recent time.Time) []any {
	return s.d.headArgs(cursor, limit, s.t(now), s.t(recent))
}

// walkCond is the condition of the walk index (PostgreSQL, SQLite): the
// pending ordered events that are not parked. The walk of DeadBlocksKey
// reads it, so that keys whose events all wait behind a DEAD head are not
// read at all; with deadSkips it reads the order index without its DEAD
// events.
func walkCond(deadSkips bool) string {
	if deadSkips {
		return "status IN (0, 2, 3) AND status <> 3"
	}
	return "status IN (0, 2) AND parked = 0"
}

// headState is the walk's state of the head it found (the row a, of key
// key, at sequence seq): 1 when it is claimable now (pending, unclaimed,
// due and old enough for SkipRecent: its two placeholders), 0 when not,
// and 2 when it would be but an open event of its key comes before it — a
// DEAD event, or one parked behind it — so that it is no head and its key
// is to be parked (Store.repark). The probe for an earlier event runs for
// claimable heads alone; with deadSkips, whose walk reads the heads, never.
func headState(d *dialect, t, a, key, seq string, deadSkips bool) string {
	claimable := a + "status IN (0, 2) AND " + a + "locked_by IS NULL AND " + a + "available_at <= ? AND " + a + "created_at <= ?"
	if deadSkips {
		return "CASE WHEN " + claimable + " THEN 1 ELSE 0 END"
	}
	return "CASE WHEN " + claimable + " THEN CASE WHEN EXISTS (SELECT 1 FROM " + t + " e WHERE " + d.openKey("e", key) +
		" AND e." + d.seq + " < " + seq + ") THEN 2 ELSE 1 END ELSE 0 END"
}

// lateralHeads walks the walk index (or, with deadSkips, the order index)
// with a recursive query whose each step reads the first entry after the
// previous key: the next key's head, in one index descent (PostgreSQL
// evaluates it lazily, LATERAL fetches the row).
func lateralHeads(d *dialect, t string, deadSkips, typed bool) string {
	cond := walkCond(deadSkips)
	state := func(a string) string { return headState(d, t, a+".", a+".ordering_key", a+".seq", deadSkips) }
	cols, typ := func(string) string { return "" }, ""
	if typed {
		cols, typ = func(a string) string { return ", " + a + "event_type" }, ", typ"
	}
	return d.rebind("WITH RECURSIVE k(n, key, id, ok"+typ+") AS ("+
		"(SELECT 1, h.ordering_key, h.event_id, "+state("h")+cols("h.")+" FROM "+t+
		" h WHERE h.ordering_key > ? AND h."+strings.ReplaceAll(cond, " AND ", " AND h.")+" ORDER BY h.ordering_key, h.seq LIMIT 1)"+
		" UNION ALL SELECT k.n + 1, x.ordering_key, x.event_id, "+state("x")+cols("x.")+" FROM k CROSS JOIN LATERAL"+
		" (SELECT ordering_key, event_id, status, locked_by, available_at, created_at, seq"+cols("")+" FROM "+t+
		" WHERE ordering_key > k.key AND "+cond+" ORDER BY ordering_key, seq LIMIT 1) x"+
		" WHERE k.n < ?) SELECT n, key, id, ok"+typ+" FROM k", 1)
}

// typedCol returns the walk's last column, the head's event type (of the
// row called h), when typed, else "".
func typedCol(typed bool) string {
	if typed {
		return ", h.event_type"
	}
	return ""
}

// scalarHeads walks the walk index (or, with deadSkips, the order index)
// with a recursive query of scalar subqueries (SQLite has no LATERAL): the
// next key, then its head.
func scalarHeads(d *dialect, t string, deadSkips, typed bool) string {
	open := walkCond(deadSkips)
	return "WITH RECURSIVE k(n, key) AS (" +
		"SELECT 1, (SELECT MIN(ordering_key) FROM " + t + " WHERE ordering_key > ? AND " + open + ")" +
		" UNION ALL SELECT k.n + 1, (SELECT MIN(ordering_key) FROM " + t + " WHERE ordering_key > k.key AND " + open + ")" +
		" FROM k WHERE k.key IS NOT NULL AND k.n < ?)" +
		" SELECT k.n, k.key, h.event_id, " + headState(d, t, "h.", "k.key", "h."+d.seq, deadSkips) + typedCol(typed) +
		" FROM k JOIN " + t + " h ON h.event_id = (SELECT event_id FROM " + t + " WHERE ordering_key = k.key AND " + open +
		" ORDER BY " + d.seq + " LIMIT 1)"
}

// groupHeads walks the walk index (walk_key; or, with deadSkips, the
// order index, open_key) with a loose index scan (MySQL and MariaDB read
// one entry per group for GROUP BY with MIN(seq)): its first entry per key
// is the head. With deadSkips the head is the first event that is not
// DEAD, looked up per key.
func groupHeads(d *dialect, t string, deadSkips, typed bool) string {
	col, head := "walk_key", "g.head"
	if deadSkips {
		col, head = "open_key", "(SELECT MIN(s.seq) FROM "+t+" s WHERE s.open_key = g.k AND s.status <> 3)"
	}
	return "SELECT 0, g.k, h.event_id, " + headState(d, t, "h.", "g.k", "h.seq", deadSkips) + typedCol(typed) +
		" FROM (SELECT " + col + " AS k, MIN(seq) AS head FROM " + t + " WHERE " + col + " > ? GROUP BY " + col + " ORDER BY " + col + " LIMIT ?) g" +
		" LEFT JOIN " + t + " h ON h.seq = " + head
}

// head is one row of the walk.
type head struct {
	n       int64
	key, id string
	ok      bool
	blocked bool // the key's events wait behind a DEAD one: park them
}

// walkHeads runs the walk from cursor on c, at most limit keys, and
// returns the heads in the walk's order.
func (s *Store) walkHeads(ctx context.Context, c Conn, req outbox.ClaimRequest, f typeFilter, cursor string, limit int) ([]head, error) {
	query := s.q.ord.heads
	switch {
	case f.on() && req.DeadSkips:
		query = s.q.ord.typedHeadsSkipDead
	case f.on():
		query = s.q.ord.typedHeads
	case req.DeadSkips:
		query = s.q.ord.headsSkipDead
	}
	now := req.Now.UTC()
	rows, err := c.Query(ctx, query, s.headArgs(cursor, limit, now, now.Add(-req.SkipRecent))...)
	if err != nil {
		return nil, err
	}
	var hs []head
	for rows.Next() {
		var h head
		var key, id, typ nullBytes
		var state int64 // see headState
		dest := []any{&h.n, &key, &id, &state}
		if f.on() {
			dest = append(dest, &typ)
		}
		if err := rows.Scan(dest...); err != nil {
			_ = rows.Close()
			return nil, err
		}
		if !key.valid { // the walk ran past the last key
			continue
		}
		// A head whose type the filter leaves out is not claimed: its key
		// waits (nothing behind it is a head).
		h.key, h.id, h.ok, h.blocked = key.s, id.s, state == 1 && id.valid && (!f.on() || f.allows(typ.s)), state == 2
		hs = append(hs, h)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	slices.SortFunc(hs, func(a, b head) int { return cmp.Or(cmp.Compare(a.n, b.n), strings.Compare(a.key, b.key)) })
	return hs, nil
}

// claimHeads claims up to need heads for req on c: it walks the keys from
// the store's cursor on, a bounded number of steps, wrapping around to the
// first key once the walk passes the last, and claims the claimable heads
// it finds with lock. The walks of one Store run one at a time and move the
// cursor as they go — to the last key taken, or to the last key read when
// none was claimable — so that concurrent claims (a poller keeps a second
// one in flight during a backlog) walk different keys, and the next claim
// starts with the keys after this one's.
//
// The walk of DeadBlocksKey reads the walk index, which leaves parked
// events out; a key it finds blocked (an event written behind a DEAD one
// since, or a table written before parking) is parked on w, and costs the
// walks after it nothing.
func (s *Store) claimHeads(ctx context.Context, c, w Conn, req outbox.ClaimRequest, f typeFilter, need int,
	lock func(ids []string) ([]outbox.Record, error)) ([]outbox.Record, error) {
	var out []outbox.Record
	ends := 0 // times the walk passed the last key
	for round := 0; need > 0 && round < maxHeadRounds && ends < 2; round++ {
		// A walk of a little more keys than needed: with the cursor, the
		// keys right after it are mostly free (their heads went out a while
		// ago).
		step := min(need+need/4+8, 1000)
		ids, blocked, end, err := s.walkStep(ctx, c, req, f, need, step)
		if err != nil {
			return out, err
		}
		if err := s.repark(ctx, w, blocked); err != nil {
			return out, err
		}
		if end {
			ends++
		}
		if len(ids) > 0 {
			recs, err := lock(ids)
			out = append(out, recs...)
			need -= len(recs)
			if err != nil {
				return out, err
			}
		}
	}
	if req.Run > 1 && need > 0 && len(out) > 0 {
		more, err := s.claimRuns(ctx, c, w, req, f, out, need, lock)
		return append(out, more...), err
	}
	return out, nil
}

// walkStep walks up to step keys from the cursor and returns the ids of up
// to need claimable heads, the keys it found blocked, and whether the walk
// passed the last key. It moves the cursor past the keys it handled.
func (s *Store) walkStep(ctx context.Context, c Conn, req outbox.ClaimRequest, f typeFilter, need, step int) (ids, blocked []string, end bool, err error) {
	s.ord.mu.Lock()
	defer s.ord.mu.Unlock()
	hs, err := s.walkHeads(ctx, c, req, f, s.ord.cursor, step)
	if err != nil {
		return nil, nil, false, err
	}
	next := s.ord.cursor
	for _, h := range hs {
		if len(ids) == need {
			break // the keys after it wait for the next claim
		}
		next = h.key
		if h.ok {
			ids = append(ids, h.id)
		}
		if h.blocked {
			blocked = append(blocked, h.key)
		}
	}
	end = len(hs) < step && len(ids) < need
	if end {
		next = "" // past the last key: the next walk starts from the first
	}
	s.ord.cursor = next
	return ids, blocked, end, nil
}

// lockHeads claims the heads ids for req, unless another claim holds
// them or they are no longer claimable (PostgreSQL and SQLite: one
// UPDATE … RETURNING).
func (s *Store) lockHeads(ctx context.Context, req outbox.ClaimRequest, ids []string) ([]outbox.Record, error) {
	now := req.Now.UTC()
	fixed := []any{req.Owner, s.t(now), s.t(now), s.t(now.Add(-req.SkipRecent))}
	var out []outbox.Record
	for chunk := range slices.Chunk(ids, s.q.ord.lock.chunk()) {
		query, args := s.q.ord.lock.bind(fixed, chunk)
		var err error
		if out, err = s.queryRecords(ctx, s.w, out, query, args...); err != nil {
			return out, err
		}
	}
	return out, nil
}

// sharedOrderedClaim is the ordered claim of PostgreSQL and SQLite: the
// recovery of expired claims, then heads of keys and unordered due rows,
// which take turns at filling the rest of the limit.
func sharedOrderedClaim(ctx context.Context, s *Store, req outbox.ClaimRequest, f typeFilter) ([]outbox.Record, error) {
	a := s.claimArgs(req)
	recs, err := s.recoverExpired(ctx, req, f, a, make([]outbox.Record, 0, req.Limit))
	if err != nil || len(recs) == req.Limit {
		return recs, err
	}
	heads := func(n int) ([]outbox.Record, error) {
		return s.claimHeads(ctx, s.db, s.w, req, f, n, func(ids []string) ([]outbox.Record, error) { return s.lockHeads(ctx, req, ids) })
	}
	fresh := func(n int) ([]outbox.Record, error) {
		return s.freshRows(ctx, s.w, f, a, n, make([]outbox.Record, 0, n))
	}
	return s.fillOrdered(recs, req.Limit, heads, fresh)
}

// fillOrdered fills the rest of limit after recs with heads of keys and
// unordered due rows, alternating from claim to claim which goes first.
func (s *Store) fillOrdered(recs []outbox.Record, limit int, heads, fresh func(n int) ([]outbox.Record, error)) ([]outbox.Record, error) {
	s.ord.mu.Lock()
	s.ord.flip = !s.ord.flip
	first, second := heads, fresh
	if s.ord.flip {
		first, second = fresh, heads
	}
	s.ord.mu.Unlock()
	for _, take := range []func(int) ([]outbox.Record, error){first, second} {
		n := limit - len(recs)
		if n <= 0 {
			break
		}
		got, err := take(n)
		recs = append(recs, got...)
		if err != nil {
			return recs, err
		}
	}
	return recs, nil
}

// Parking (DeadBlocksKey). A pending ordered event that waits behind a
// DEAD event of its key is parked (parked = 1): the walk index leaves it
// out, so that a key held back by a DEAD head costs the ordered claim
// nothing. The walk parks the keys it finds blocked (their events written
// before or after the DEAD one); whatever ends a DEAD event (Replay,
// Skip, Delete, Purge) reparks its key, which unparks the events no DEAD
// event holds back any more. Parking is a hint the claim checks: a key
// parked too little costs a walk its visit, never the order; only a key
// left parked once nothing holds it back would wait, hence the repark
// after each of those statements. DeadSkips claims read the order index,
// parked or not.
//
// Those reparks are not the only guard: a key can still be left parked
// with nothing holding it back — a walk's repark that read the table
// before a concurrent Replay or Skip committed, and wrote parked = 1 after
// that statement's unpark; an older version's Replay, Skip, Delete or
// Purge, which do not unpark; an operator's SQL that ends a DEAD event.
// So the ordered claims of a Store also sweep every parked event, read on
// the park index (sweepParked), at most once per lease: a missed unpark
// holds a key back for one lease at most.

// partialRepark is dialect.repark where the order and walk indexes are
// partial (PostgreSQL, SQLite): one UPDATE sets parked of the keys'
// pending events to whether a DEAD event of their key comes before them,
// and writes only the rows it changes.
func partialRepark(d *dialect, t string) (prefix, col, tail string) {
	behind := "CASE WHEN EXISTS (SELECT 1 FROM " + t + " d WHERE " + partialOpenKey("d", "u.ordering_key") + " AND d.status = 3 AND d." +
		d.seq + " < u." + d.seq + ") THEN 1 ELSE 0 END"
	return "UPDATE " + t + " AS u SET parked = " + behind + " WHERE u.ordering_key IS NOT NULL AND u.status IN (0, 2, 3) AND u.status <> 3" +
		" AND u.parked <> " + behind + " AND ", "u.ordering_key", ""
}

// mysqlRepark is dialect.repark on MySQL and MariaDB: the first DEAD
// event of each key is read in a derived table (an UPDATE may not read its
// own table otherwise), then the keys' pending events are parked when
// they come after it and unparked otherwise.
func mysqlRepark(_ *dialect, t string) (prefix, col, tail string) {
	return "UPDATE " + t + " u JOIN (SELECT o.open_key AS k, MIN(CASE WHEN o.status = 3 THEN o.seq END) AS dead FROM " + t + " o WHERE ",
		"o.open_key", " GROUP BY o.open_key) g ON u.open_key = g.k SET u.parked = CASE WHEN u.seq > g.dead THEN 1 ELSE 0 END" +
			" WHERE u.status IN (0, 2)"
}

// sweepParked unparks the parked events no DEAD event of their key comes
// before (dialect.sweep: the repark's condition, over every parked event),
// when the last sweep of this Store is a lease before now or more (or a
// lease after it: the clock went back), or there was none. One claim of a
// Store starts each sweep (the others go on without it); a failed sweep is
// due again at the next claim.
func (s *Store) sweepParked(ctx context.Context, now time.Time, lease time.Duration) error {
	s.ord.mu.Lock()
	last := s.ord.swept
	due := last.IsZero() || !now.Before(last.Add(lease)) || now.Before(last.Add(-lease))
	if due {
		s.ord.swept = now
	}
	s.ord.mu.Unlock()
	if !due {
		return nil
	}
	sweep := func(c Conn) error {
		_, err := c.Exec(ctx, s.q.ord.sweep)
		return err
	}
	var err error
	if s.d.sweepReadCommitted {
		err = s.db.ReadCommitted(ctx, sweep)
	} else {
		err = sweep(s.w)
	}
	if err != nil {
		s.ord.mu.Lock()
		if s.ord.swept.Equal(now) {
			s.ord.swept = last
		}
		s.ord.mu.Unlock()
		return fmt.Errorf("unpark the keys no DEAD event holds back: %w", err)
	}
	return nil
}

// partialSweep is dialect.sweep where the park index is partial
// (PostgreSQL, SQLite): the repark of the rows of the park index (its
// condition), which can only unpark them.
func partialSweep(d *dialect, t string) string {
	prefix, _, tail := partialRepark(d, t)
	return prefix + "u.ordering_key IS NOT NULL AND u.status IN (0, 2) AND u.parked = 1" + tail
}

// mysqlSweep is dialect.sweep on MySQL and MariaDB: the repark of the
// keys in the park index (park_key), of their parked events alone, which
// it can only unpark.
func mysqlSweep(d *dialect, t string) string {
	prefix, _, tail := mysqlRepark(d, t)
	return prefix + "o.open_key IN (SELECT p.park_key FROM " + t + " p WHERE p.park_key IS NOT NULL)" + tail + " AND u.park_key IS NOT NULL"
}

// repark sets parked of the pending events of keys to whether a DEAD
// event of their key comes before them, on c.
func (s *Store) repark(ctx context.Context, c Conn, keys []string) error {
	for chunk := range slices.Chunk(keys, s.q.ord.repark.chunk()) {
		query, args := s.q.ord.repark.bind(chunk)
		if _, err := c.Exec(ctx, query, args...); err != nil {
			return fmt.Errorf("sqlstore: park blocked keys in %s: %w", s.table, s.explain(err))
		}
	}
	return nil
}

// endingDead runs op, a statement that ends DEAD events ids (moves them
// out of DEAD or deletes them), then reparks their keys: the events they
// held back are claimable again.
func (s *Store) endingDead(ctx context.Context, ids []string, op func() (int64, error)) (int64, error) {
	var keys []string
	for chunk := range slices.Chunk(ids, s.q.ord.keysOf.chunk()) {
		query, args := s.q.ord.keysOf.bind(nil, chunk)
		var err error
		if keys, err = s.appendStrings(ctx, keys, query, args); err != nil {
			return 0, err
		}
	}
	n, err := op()
	if err != nil || n == 0 || len(keys) == 0 {
		return n, err
	}
	return n, s.repark(ctx, s.w, keys)
}

// PendingKeys returns which of keys have an ordered event that is not
// DONE (pending, claimed or DEAD), as the transaction tx sees the table.
func (s *Store) PendingKeys(ctx context.Context, tx outbox.Tx, keys []string) ([]string, error) {
	t, ok := tx.(Tx)
	if !ok {
		return nil, fmt.Errorf("%w: sqlstore: the transaction (%T) carries no SQL connection", outbox.ErrInvalidConfig, tx)
	}
	var found []string
	for chunk := range slices.Chunk(keys, s.q.ord.pending.chunk()) {
		query, args := s.q.ord.pending.bind(chunk)
		rows, err := t.Conn().Query(ctx, query, args...)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: pending keys in %s: %w", s.table, s.explain(err))
		}
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				_ = rows.Close()
				return nil, fmt.Errorf("sqlstore: pending keys in %s: %w", s.table, err)
			}
			found = append(found, k)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, fmt.Errorf("sqlstore: pending keys in %s: %w", s.table, err)
		}
	}
	return found, nil
}

// Skip moves DEAD events to DONE at now without delivering them, records
// note (truncated to outbox.MaxErrorLen characters) as their last error,
// and returns how many rows changed.
func (s *Store) Skip(ctx context.Context, ids []string, now time.Time, note string) (int64, error) {
	n, err := s.endingDead(ctx, ids, func() (int64, error) {
		return s.execIDs(ctx, s.q.ord.skip, []any{s.t(now), outbox.TruncateError(note)}, ids)
	})
	if err != nil {
		return n, fmt.Errorf("sqlstore: skip in %s: %w", s.table, s.explain(err))
	}
	return n, nil
}

// keysSQL is a statement about a list of ordering keys, like idsSQL for
// event ids: one array parameter on PostgreSQL, an IN list elsewhere.
type keysSQL struct {
	d     *dialect
	list  *batchSQL
	array string
}

// newKeysSQL returns the statement prefix, then the condition "col is one
// of the keys", then tail (no placeholders).
func newKeysSQL(d *dialect, prefix, col, tail string) *keysSQL {
	if d.idsArray != "" {
		return &keysSQL{d: d, array: d.rebind(prefix+col+" = ANY(CAST(? AS TEXT[]))"+tail, 1)}
	}
	return &keysSQL{d: d, list: newBatchSQL(d, prefix+col+" IN (", "?", 1, ", ", ")"+tail)}
}

func (q *keysSQL) chunk() int {
	if q.list == nil {
		return maxArrayIDs
	}
	return q.d.maxListIDs
}

func (q *keysSQL) bind(keys []string) (string, []any) {
	if q.list == nil {
		return q.array, []any{arrayLiteral(keys)}
	}
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	return q.list.sql(len(keys)), args
}

// Upgrades (dialect.upgrade): Migrate runs them after CREATE TABLE IF NOT
// EXISTS and before the indexes, on tables made by earlier versions. They
// add the ordering columns, and drop a due index that still holds ordered
// rows (the schema's CREATE INDEX IF NOT EXISTS then builds it anew).

// pgUpgrade adds ordering_key and seq (numbering the existing rows; the
// table is rewritten) and drops a due index made before them and a purge
// index made without status.
func pgUpgrade(ctx context.Context, s *Store) error {
	schema, name := s.tableParts()
	schema, name = strings.ToLower(schema), strings.ToLower(name) // unquoted identifiers fold to lower case
	has, err := s.hasColumn(ctx, "ordering_key")
	if err != nil {
		return err
	}
	if !has {
		if _, err := s.db.Exec(ctx, "ALTER TABLE "+s.table+` ADD COLUMN ordering_key VARCHAR(255) COLLATE "C", ADD COLUMN seq BIGSERIAL`); err != nil {
			return err
		}
	}
	if err := pgDropStaleIndex(ctx, s, schema, name, "due", "ordering_key"); err != nil {
		return err
	}
	return pgDropStaleIndex(ctx, s, schema, name, "purge", "(status, ")
}

// pgDropStaleIndex drops the index <name>_<kind> of the table when its
// definition lacks want: the schema's CREATE INDEX IF NOT EXISTS then
// builds it anew. schema and name are in lower case.
func pgDropStaleIndex(ctx context.Context, s *Store, schema, name, kind, want string) error {
	idx := name + "_" + kind + "_idx"
	drop := idx
	if schema != "" {
		drop = schema + "." + idx
	}
	return dropStaleIndex(ctx, s, "SELECT indexdef FROM pg_indexes WHERE schemaname = COALESCE(NULLIF($1, ''), current_schema())"+
		" AND tablename = $2 AND indexname = $3", []any{schema, name, idx}, drop, want)
}

// dropStaleIndex drops the index drop (its name as DROP INDEX takes it)
// when its definition, which the query def reads with args, lacks want;
// the schema's CREATE INDEX IF NOT EXISTS then builds it anew. An index
// that does not exist is left alone.
func dropStaleIndex(ctx context.Context, s *Store, def string, args []any, drop, want string) error {
	text, err := s.queryText(ctx, def, args...)
	if err != nil || text == "" || strings.Contains(text, want) {
		return err
	}
	_, err = s.db.Exec(ctx, "DROP INDEX "+drop)
	return err
}

// sqliteUpgrade adds ordering_key and drops a due index made before it and
// a purge index made without status.
func sqliteUpgrade(ctx context.Context, s *Store) error {
	schema, name := s.tableParts()
	main := schema
	if main == "" {
		main = "main"
	}
	has, err := s.hasColumn(ctx, "ordering_key")
	if err != nil {
		return err
	}
	if !has {
		if _, err := s.db.Exec(ctx, "ALTER TABLE "+s.table+" ADD COLUMN ordering_key VARCHAR(255)"); err != nil {
			return err
		}
	}
	for _, stale := range [][2]string{{"due", "ordering_key"}, {"purge", "(status, "}} {
		idx := name + "_" + stale[0] + "_idx"
		if err := dropStaleIndex(ctx, s, "SELECT sql FROM "+main+".sqlite_master WHERE type = 'index' AND tbl_name = ? AND name = ?",
			[]any{name, idx}, main+"."+idx, stale[1]); err != nil {
			return err
		}
	}
	return nil
}

// mysqlOrderingUpgrade adds ordering_key, seq (numbering the existing
// rows), open_key and their keys to a table made before them, and gives
// due_at the definition that leaves ordered rows out.
func mysqlOrderingUpgrade(ctx context.Context, s *Store) error {
	schema, name := s.tableParts()
	const where = " FROM information_schema.columns WHERE table_schema = COALESCE(NULLIF(?, ''), DATABASE()) AND table_name = ?"
	has, err := s.hasColumn(ctx, "ordering_key")
	if err != nil {
		return err
	}
	var alter []string
	def := func(prefix string) string { return schemaLine(s.schema[0], prefix) }
	if !has {
		alter = append(alter, "ADD COLUMN "+def("ordering_key "), "ADD COLUMN "+def("seq "), "ADD "+def("UNIQUE KEY outbox_seq_idx "),
			"ADD COLUMN "+def("open_key "), "ADD "+def("KEY outbox_order_idx "))
	}
	due, err := s.queryText(ctx, "SELECT generation_expression"+where+" AND column_name = 'due_at'", schema, name)
	if err != nil {
		return err
	}
	if due != "" && !strings.Contains(due, "ordering_key") {
		alter = append(alter, "MODIFY COLUMN "+def("due_at "))
	}
	if len(alter) == 0 {
		return nil
	}
	_, err = s.db.Exec(ctx, "ALTER TABLE "+s.table+" "+strings.Join(alter, ", "))
	return err
}

// schemaLine returns the line of a CREATE TABLE statement that starts
// with prefix, without its trailing comma.
func schemaLine(stmt, prefix string) string {
	for _, line := range strings.Split(stmt, "\n") {
		if def := strings.TrimSuffix(strings.TrimSpace(line), ","); strings.HasPrefix(def, prefix) {
			return def
		}
	}
	return ""
}

// queryText runs a query that returns at most one text value ("" for none
// or NULL).
func (s *Store) queryText(ctx context.Context, query string, args ...any) (string, error) {
	rows, err := s.db.Query(ctx, query, args...)
	if err != nil {
		return "", err
	}
	var v nullBytes
	if rows.Next() {
		if err := rows.Scan(&v); err != nil {
			_ = rows.Close()
			return "", err
		}
	}
	return v.s, errors.Join(rows.Err(), rows.Close())
}
