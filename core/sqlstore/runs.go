package sqlstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	outbox "github.com/go-outbox/outbox/core"
)

// Runs (outbox.ClaimRequest.Run). Once a claim has locked the heads of
// some keys and has room left, it takes each key's run: the events that
// follow the head on its key, in sequence order, as long as each is
// pending, unclaimed, due and let through by the type filters. They are
// read on the order index, a bounded range per key (one statement for
// many keys, a part per key), then locked by id as heads are, their state
// checked again. A run must have no gap: the events locked after one that
// could not be are given back at once.
//
// No other claim can take an event behind a head this claim holds: it is
// no head, and the hot path claims at insert only the events of keys with
// nothing pending. The recovery of expired claims takes an ordered event
// only as a head (headsOnly), so that a run whose claims expired together
// comes back in order, its later events waiting for the earlier ones.

// maxRunKeys bounds the keys of one statement that reads runs.
const maxRunKeys = 64

// runShape is what a statement that reads runs depends on: its number of
// keys, and whether DEAD events let the events after them go (DeadSkips).
type runShape struct {
	keys      int
	deadSkips bool
}

// runSQL returns the statement that reads the next events of n keys: for
// each key (its part number, its key, the sequence it starts after, the
// key and that sequence again, and how many to read bound in that order,
// after now and the created-at cutoff), the events after that sequence on
// the order index, with whether each is claimable now (1 or 0) and its
// event type — none if an event of the key before that sequence is open:
// pending, or with DeadBlocksKey (deadSkips false) not DONE. A head
// passes that check by definition; the tail of a run that goes on
// (ContinueRuns) may not, when an earlier event was replayed meanwhile,
// and its key then waits for that event.
func (o *orderQueries) runSQL(n int, deadSkips bool) string {
	o.runsMu.Lock()
	defer o.runsMu.Unlock()
	shape := runShape{keys: n, deadSkips: deadSkips}
	if q, ok := o.runs[shape]; ok {
		return q
	}
	d, t := o.d, o.t
	earlier := ""
	if deadSkips {
		earlier = " AND e.status <> 3"
	}
	parts := make([]string, n)
	for i := range n {
		parts[i] = "SELECT * FROM (SELECT " + strconv.Itoa(i) + " AS part, event_id, CASE WHEN status IN (0, 2) AND locked_by IS NULL" +
			" AND available_at <= ? AND created_at <= ? THEN 1 ELSE 0 END AS ok, event_type, " + d.seq + " AS s FROM " + t +
			" WHERE " + d.openKeyCond + d.openKeyCol + " = ? AND " + d.seq + " > ?" +
			" AND NOT EXISTS (SELECT 1 FROM " + t + " e WHERE " + d.openKey("e", "?") + earlier + " AND e." + d.seq + " < ?)" +
			" ORDER BY " + d.seq + " LIMIT ?) r" + strconv.Itoa(i)
	}
	q := d.rebind(strings.Join(parts, " UNION ALL "), 1)
	if o.runs == nil {
		o.runs = map[runShape]string{}
	}
	o.runs[shape] = q
	return q
}

// runHead is an event of a key this claim holds (a head it locked, or
// the last event of a run its owner holds, see ContinueRuns): its key,
// its sequence, and how many events after it its run may take.
type runHead struct {
	key  string
	seq  int64
	want int
}

// claimRuns takes, for the heads this claim locked (heads), the events of
// their runs, up to room events in all and req.Run per run, reading on c
// and locking with lock; what it cannot keep without a gap it releases on
// w. It returns the events it added.
func (s *Store) claimRuns(ctx context.Context, c, w Conn, req outbox.ClaimRequest, f typeFilter, heads []outbox.Record, room int,
	lock func(ids []string) ([]outbox.Record, error)) ([]outbox.Record, error) {
	var hs []runHead
	for _, r := range heads {
		if room == 0 {
			break
		}
		if r.Err != nil || !r.Envelope.Ordered() {
			continue
		}
		n := min(req.Run-1, room)
		hs = append(hs, runHead{key: r.Envelope.OrderingKey(), seq: r.Seq, want: n})
		room -= n
	}
	return s.claimRunHeads(ctx, c, w, req, f, hs, lock)
}

// ContinueRuns implements outbox.RunContinuer: for each tail, the events
// that follow it on its key, read and locked as a claim's runs are (see
// claimRuns), up to req.Run per key and req.Limit in all.
func (s *Store) ContinueRuns(ctx context.Context, req outbox.ClaimRequest, tails []outbox.RunTail) ([]outbox.Record, error) {
	if req.Owner == "" {
		return nil, fmt.Errorf("%w: sqlstore: claim without an owner", outbox.ErrInvalidConfig)
	}
	f, ok, err := claimFilter(req)
	if err != nil || !ok || req.Run < 1 {
		return nil, err
	}
	var hs []runHead
	room := req.Limit
	for _, t := range tails {
		if room <= 0 {
			break
		}
		n := min(req.Run, room)
		hs = append(hs, runHead{key: t.Key, seq: t.Seq, want: n})
		room -= n
	}
	if len(hs) == 0 {
		return nil, nil
	}
	cont := s.d.continueRuns
	if cont == nil {
		cont = sharedContinueRuns
	}
	recs, err := cont(ctx, s, req, f, hs)
	if err != nil {
		return recs, fmt.Errorf("sqlstore: continue runs in %s: %w", s.table, s.explain(err))
	}
	return recs, nil
}

// sharedContinueRuns is ContinueRuns on PostgreSQL and SQLite: the runs
// are read on the pool and locked as heads are (lockHeads).
func sharedContinueRuns(ctx context.Context, s *Store, req outbox.ClaimRequest, f typeFilter, hs []runHead) ([]outbox.Record, error) {
	return s.claimRunHeads(ctx, s.db, s.w, req, f, hs, func(ids []string) ([]outbox.Record, error) { return s.lockHeads(ctx, req, ids) })
}

// claimRunHeads is claimRuns of the heads hs.
func (s *Store) claimRunHeads(ctx context.Context, c, w Conn, req outbox.ClaimRequest, f typeFilter, hs []runHead,
	lock func(ids []string) ([]outbox.Record, error)) ([]outbox.Record, error) {
	var out []outbox.Record
	for chunk := range slices.Chunk(hs, maxRunKeys) {
		got, err := s.claimRunChunk(ctx, c, w, req, f, chunk, lock)
		out = append(out, got...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// claimRunChunk is claimRuns of at most maxRunKeys heads.
func (s *Store) claimRunChunk(ctx context.Context, c, w Conn, req outbox.ClaimRequest, f typeFilter, hs []runHead,
	lock func(ids []string) ([]outbox.Record, error)) ([]outbox.Record, error) {
	now := req.Now.UTC()
	args := make([]any, 0, 7*len(hs))
	for _, h := range hs {
		args = append(args, s.t(now), s.t(now.Add(-req.SkipRecent)), h.key, h.seq, h.key, h.seq, h.want)
	}
	type next struct {
		part, seq int64
		id        string
		ok        bool
	}
	var found []next
	err := s.eachRowOn(ctx, c, s.q.ord.runSQL(len(hs), req.DeadSkips), args, func(rows Rows) error {
		var n next
		var id, typ nullBytes
		var ok int64
		if err := rows.Scan(&n.part, &id, &ok, &typ, &n.seq); err != nil {
			return err
		}
		n.id, n.ok = id.s, ok == 1 && (!f.on() || f.allows(typ.s))
		found = append(found, n)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(found, func(a, b next) int { return cmp.Or(cmp.Compare(a.part, b.part), cmp.Compare(a.seq, b.seq)) })
	// runs[i] are the ids of head i's run after it, up to its first event
	// that is not claimable.
	runs := make([][]string, len(hs))
	var ids []string
	stopped := make([]bool, len(hs))
	for _, n := range found {
		if stopped[n.part] || !n.ok {
			stopped[n.part] = true
			continue
		}
		runs[n.part] = append(runs[n.part], n.id)
		ids = append(ids, n.id)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	locked, err := lock(ids)
	if err != nil {
		return locked, err
	}
	byID := make(map[string]outbox.Record, len(locked))
	for _, r := range locked {
		byID[r.ID] = r
	}
	// Keep each run up to its first event that was not locked (another
	// statement changed it since it was read) or cannot be decoded; give
	// back what follows.
	var out []outbox.Record
	var gaps []string
	for _, run := range runs {
		gap := false
		for _, id := range run {
			r, ok := byID[id]
			switch {
			case gap && ok:
				gaps = append(gaps, id)
			case !ok:
				gap = true
			case r.Err != nil: // its key cannot be told: it goes back, to be claimed as a head
				gap = true
				gaps = append(gaps, id)
			default:
				out = append(out, r)
			}
		}
	}
	if len(gaps) > 0 {
		if _, err := s.execIDsOn(ctx, w, s.q.release, []any{req.Owner}, gaps); err != nil {
			return out, err
		}
	}
	return out, nil
}

// headsOnly keeps, of recs (claims the recovery of expired claims just
// took on w for req), the ordered events that are the first pending event
// of their key — with DeadBlocksKey, the first that is not DONE — and the
// unordered ones; it releases the others (the later events of a run whose
// claims expired together, or of a key whose earlier event is owned
// elsewhere): they wait for their turn, and a walk claims them as heads.
func (s *Store) headsOnly(ctx context.Context, w Conn, req outbox.ClaimRequest, recs []outbox.Record) ([]outbox.Record, error) {
	var ordered []string
	for _, r := range recs {
		if r.Err == nil && r.Envelope.Ordered() {
			ordered = append(ordered, r.ID)
		}
	}
	if len(ordered) == 0 {
		return recs, nil
	}
	q := s.q.ord.behind
	if req.DeadSkips {
		q = s.q.ord.behindSkipDead
	}
	later := map[string]bool{}
	for chunk := range slices.Chunk(ordered, q.chunk()) {
		query, args := q.bind(nil, chunk)
		err := s.eachRowOn(ctx, w, query, args, func(rows Rows) error {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			later[id] = true
			return nil
		})
		if err != nil {
			return recs, err
		}
	}
	if len(later) == 0 {
		return recs, nil
	}
	kept, back := recs[:0], make([]string, 0, len(later))
	for _, r := range recs {
		if later[r.ID] {
			back = append(back, r.ID)
			continue
		}
		kept = append(kept, r)
	}
	_, err := s.execIDsOn(ctx, w, s.q.release, []any{req.Owner}, back)
	return kept, err
}

// behindSQL returns the statement that selects, of some ids, the ordered
// events that an earlier event of their key comes before: one that is
// pending, or with deadBlocks one that is not DONE.
func behindSQL(d *dialect, t string, deadBlocks bool) *idsSQL {
	earlier := " AND e.status <> 3"
	if deadBlocks {
		earlier = ""
	}
	return newIDsSQL(d, "SELECT r.event_id FROM "+t+" r WHERE r.ordering_key IS NOT NULL AND EXISTS (SELECT 1 FROM "+t+" e WHERE "+
		d.openKey("e", "r.ordering_key")+earlier+" AND e."+d.seq+" < r."+d.seq+") AND r.")
}
