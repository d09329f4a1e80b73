package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	outbox "github.com/go-outbox/outbox/core"
)

// A claim's type filters (outbox.ClaimRequest.Types and SkipTypes). A
// claim without them runs the statements of queries.go, unchanged. With
// Types, the fresh claim reads the type index — the due rows by event
// type, then due order — once per type, each read stopping after the
// claim's limit, and takes the first rows of their merge in due order:
// the events of other types that come first in due order (another
// service's backlog, types no instance routes) are never read. It reads
// at most limit rows per type (fewer when a type has fewer due), so a
// filter of k types reads at most k × limit index entries.
//
// The type index holds the same rows as the due index (unclaimed pending
// unordered rows), but its condition names locked_at where the due
// index's names locked_by (they are set and cleared together): the
// filtered claim's condition does not imply the due index's, so no plan —
// a generic one either, which knows neither the types nor how selective
// they are — can read the due index in order and step over the other
// types' rows instead.
//
// SkipTypes alone (every type but these) reads the due index in due
// order and steps over the skipped types' due rows that come first; with
// Types, the skipped types are taken out of Types. The recovery of expired
// claims reads the lease index as without filters, leaving the filtered
// out rows where they are. MySQL's claim runs its own statements (see
// mysqlTypedClaim and mysqlTypeCond).

// MaxClaimTypes is outbox.MaxClaimTypes: a claim with more types in Types
// or in SkipTypes (after duplicates are dropped) fails with an error
// wrapping outbox.ErrInvalidConfig, claiming nothing. A filter is one
// statement (SQLite: a UNION ALL of one read per type, which SQLite caps
// at 500 terms), read once per type.
const MaxClaimTypes = outbox.MaxClaimTypes

// typeFilter is a claim's filter on event types: only types (when
// typed), never skip. Both are sorted, without duplicates.
type typeFilter struct {
	typed bool
	types []string // typed: the types claimed (not empty)
	skip  []string // not typed: the types left out
}

// on reports whether the filter leaves anything out.
func (f typeFilter) on() bool { return f.typed || len(f.skip) > 0 }

// allows reports whether the filter lets events of type typ be claimed.
func (f typeFilter) allows(typ string) bool {
	if f.typed {
		_, in := slices.BinarySearch(f.types, typ)
		return in
	}
	_, out := slices.BinarySearch(f.skip, typ)
	return !out
}

// claimFilter returns req's filter on event types, and whether the claim
// can take anything at all (an empty Types, or Types all skipped, takes
// nothing).
func claimFilter(req outbox.ClaimRequest) (typeFilter, bool, error) {
	types, skip := dedupe(req.Types), dedupe(req.SkipTypes)
	if len(types) > MaxClaimTypes || len(skip) > MaxClaimTypes {
		return typeFilter{}, false, fmt.Errorf("%w: sqlstore: a claim filters on %d event types and skips %d, at most %d each (MaxClaimTypes)",
			outbox.ErrInvalidConfig, len(types), len(skip), MaxClaimTypes)
	}
	if req.Types == nil {
		return typeFilter{skip: skip}, true, nil
	}
	types = slices.DeleteFunc(types, func(t string) bool { return slices.Contains(skip, t) })
	return typeFilter{typed: true, types: types}, len(types) > 0, nil
}

// dedupe returns the distinct values of in, sorted (a new slice; nil for none).
func dedupe(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

// filterQueries are the claim statements with type filters, built when
// first used: one text for each shape (on a dialect with arrays, one per
// statement; else one per number of types).
type filterQueries struct {
	d     *dialect
	table string
	// Arrays (PostgreSQL): the statements with one array parameter.
	recoverTyped, recoverSkip, freshSkip, freshTyped string
	// IN lists (SQLite): per number of types.
	recoverTypedList, recoverSkipList, freshSkipList *batchSQL
	freshTypedList                                   *batchSQL
	once                                             sync.Once
}

// typedDue is the condition of the type index (see schema/*.sql) and
// the fresh claim's bounds: now (due), created cutoff (skip recent).
const typedDue = "status IN (0, 2) AND locked_at IS NULL AND ordering_key IS NULL AND available_at <= ? AND created_at <= ?"

func newFilterQueries(d *dialect, t string) *filterQueries { return &filterQueries{d: d, table: t} }

// build builds the statements of the store's dialect (not MySQL's, whose
// claim builds its own).
func (q *filterQueries) build() {
	d, t := q.d, q.table
	claim := func(set, where, order string) string {
		return "UPDATE " + t + " SET " + set + " WHERE " + d.inSubquery("SELECT event_id FROM "+t+
			" WHERE "+where+" ORDER BY "+order+" LIMIT ?"+d.claimLock) + " RETURNING " + d.selectList()
	}
	if d.idsArray != "" {
		const in, out = " AND event_type = ANY(CAST(? AS TEXT[]))", " AND event_type <> ALL(CAST(? AS TEXT[]))"
		q.recoverTyped = d.rebind(claim(recoverSet, recoverWhere+in, "locked_at"), 1)
		q.recoverSkip = d.rebind(claim(recoverSet, recoverWhere+out, "locked_at"), 1)
		q.freshSkip = d.rebind(claim(freshSet, freshWhere+out, "available_at, event_id"), 1)
		// One ordered read of the type index per type (LATERAL), each
		// locking its rows as it reads them and stopping after the limit,
		// then the first rows of all of them in due order.
		q.freshTyped = d.rebind("UPDATE "+t+" SET "+freshSet+" WHERE "+d.inSubquery("SELECT x.event_id FROM unnest(CAST(? AS TEXT[])) AS ty(name)"+
			" CROSS JOIN LATERAL (SELECT event_id, available_at FROM "+t+" WHERE event_type = ty.name AND "+typedDue+
			" ORDER BY available_at, event_id LIMIT ?"+d.claimLock+") x ORDER BY x.available_at, x.event_id LIMIT ?")+
			" RETURNING "+d.selectList(), 1)
		return
	}
	list := func(set, where, order string) *batchSQL {
		head, tail, _ := strings.Cut(claim(set, where, order), "\x00")
		return newBatchSQL(d, head, "?", 1, ", ", tail)
	}
	q.recoverTypedList = list(recoverSet, recoverWhere+" AND event_type IN (\x00)", "locked_at")
	q.recoverSkipList = list(recoverSet, recoverWhere+" AND event_type NOT IN (\x00)", "locked_at")
	q.freshSkipList = list(freshSet, freshWhere+" AND event_type NOT IN (\x00)", "available_at, event_id")
	// One ordered read of the type index per type, each stopping after
	// the limit, merged in due order (SQLite runs a UNION ALL whose terms
	// are ordered as a merge).
	q.freshTypedList = newBatchSQL(d, "UPDATE "+t+" SET "+freshSet+" WHERE event_id IN (SELECT event_id FROM (",
		"SELECT * FROM (SELECT event_id, available_at FROM "+t+" WHERE event_type = ? AND "+typedDue+
			" ORDER BY available_at, event_id LIMIT ?)", 4, " UNION ALL ",
		") ORDER BY available_at, event_id LIMIT ?) RETURNING "+d.selectList())
}

// recoverSQL returns the recovery of expired claims with filter f and its
// arguments (a: the arguments without filter).
func (q *filterQueries) recoverSQL(f typeFilter, a claimParams, limit int) (string, []any) {
	q.once.Do(q.build)
	types, typed := f.skip, f.typed
	if typed {
		types = f.types
	}
	args := slices.Concat(a.recoverSet, a.recoverWhere)
	if q.d.idsArray != "" {
		query := q.recoverSkip
		if typed {
			query = q.recoverTyped
		}
		return query, append(args, arrayLiteral(types), limit)
	}
	b := q.recoverSkipList
	if typed {
		b = q.recoverTypedList
	}
	for _, t := range types {
		args = append(args, t)
	}
	return b.sql(len(types)), append(args, limit)
}

// freshSQL returns the fresh claim with filter f and its arguments.
func (q *filterQueries) freshSQL(f typeFilter, a claimParams, limit int) (string, []any) {
	q.once.Do(q.build)
	args := slices.Clone(a.freshSet)
	switch {
	case q.d.idsArray != "" && f.typed:
		return q.freshTyped, append(args, arrayLiteral(f.types), a.freshWhere[0], a.freshWhere[1], limit, limit)
	case q.d.idsArray != "":
		return q.freshSkip, append(append(args, a.freshWhere...), arrayLiteral(f.skip), limit)
	case f.typed:
		for _, t := range f.types {
			args = append(args, t, a.freshWhere[0], a.freshWhere[1], limit)
		}
		return q.freshTypedList.sql(len(f.types)), append(args, limit)
	}
	args = append(args, a.freshWhere...)
	for _, t := range f.skip {
		args = append(args, t)
	}
	return q.freshSkipList.sql(len(f.skip)), append(args, limit)
}

// freshRows runs the fresh claim of n rows for req with filter f (the
// unfiltered statement without one) on c and appends the rows to recs.
func (s *Store) freshRows(ctx context.Context, c Conn, f typeFilter, a claimParams, n int, recs []outbox.Record) ([]outbox.Record, error) {
	if !f.on() {
		return s.queryRecords(ctx, c, recs, s.q.freshClaim, slices.Concat(a.freshSet, a.freshWhere, []any{n})...)
	}
	query, args := s.q.filter.freshSQL(f, a, n)
	return s.queryRecords(ctx, c, recs, query, args...)
}
