package outboxmem

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

var (
	_ outbox.Store     = (*Store)(nil)
	_ outbox.Purger    = (*Store)(nil)
	_ outbox.TxContext = (*Store)(nil)
)

// DefaultListLimit is how many records List returns when Query.Limit is
// zero, as in the SQL stores.
const DefaultListLimit = 100

// Store is an in-memory outbox table: an outbox.Store, an outbox.Purger
// and, with InTx, the outbox.TxContext of its own transactions. Create one
// with New; the zero value is not usable. It is safe for concurrent use.
type Store struct {
	mu   sync.Mutex
	rows map[string]*row // committed events
	// claimed and due index the pending rows (NEW or RETRY) for claims,
	// like the lease and due indexes of the SQL tables: claimed holds the
	// claimed ones by id, due the unclaimed unordered ones in claim order
	// (dueOrder). A claim reads the head of due and the claimed rows, not
	// the whole table. change keeps them.
	claimed map[string]*row
	due     []*row
	// staged holds the ids inserted by transactions that have not ended
	// yet, like the unique index of a database: another insert of the
	// same id fails at once.
	staged map[string]*memTx
	// seq numbers the inserted rows (Record.Seq), like a database sequence:
	// at insert, not at commit.
	seq int64
	// cursor is the ordering key after which the next ordered claim looks
	// for heads first, so that keys take turns.
	cursor string
	// ctl holds the control tables (see control.go).
	ctl controls
	// wk are the listeners of its wake-ups (see wake.go).
	wk wakes
}

// New returns an empty Store.
func New() *Store {
	return &Store{rows: make(map[string]*row), claimed: make(map[string]*row), staged: make(map[string]*memTx)}
}

// row is one stored event with its delivery state. Times are UTC,
// truncated to microseconds; the zero time stands for NULL.
type row struct {
	f           outbox.EnvelopeFields // Headers is never modified: the row's envelopes share it
	status      outbox.Status
	attempts    int
	createdAt   time.Time
	availableAt time.Time
	doneAt      time.Time
	lastError   string
	lockedBy    string
	lockedAt    time.Time
	seq         int64
	subscribers []string // owned by the row
}

// ts converts t the way the SQL stores keep timestamps: UTC, truncated to
// microseconds. The zero time stays zero.
func ts(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}

func pending(r *row) bool { return r.status == outbox.StatusNew || r.status == outbox.StatusRetry }

// dueOrder is the order in which claims take unclaimed rows: due time,
// then id.
func dueOrder(a, b *row) int { return cmp.Or(a.availableAt.Compare(b.availableAt), byID(a, b)) }

// index adds r, a committed row, to the claim index it belongs in (see
// Store.claimed); unindex takes it out. Every change of a committed row's
// status, claim or due time goes between the two: see change.
func (s *Store) index(r *row) {
	switch {
	case !pending(r):
	case r.lockedBy != "":
		s.claimed[r.f.ID] = r
	case r.key() == "":
		i, _ := slices.BinarySearchFunc(s.due, r, dueOrder)
		s.due = slices.Insert(s.due, i, r)
	}
}

func (s *Store) unindex(r *row) {
	switch {
	case !pending(r):
	case r.lockedBy != "":
		delete(s.claimed, r.f.ID)
	case r.key() == "":
		if i, ok := slices.BinarySearchFunc(s.due, r, dueOrder); ok {
			s.due = slices.Delete(s.due, i, i+1)
		}
	}
}

// change applies fn to r, a committed row, and keeps the claim indexes.
func (s *Store) change(r *row, fn func(r *row)) {
	s.unindex(r)
	fn(r)
	s.index(r)
}

// key returns the row's ordering key, "" for an unordered row.
func (r *row) key() string { return r.f.OrderingKey }

func (r *row) unlock() { r.lockedBy, r.lockedAt = "", time.Time{} }

// newRow builds the row Insert adds for e: NEW, created at now, due at
// max(now, e.AvailableAt()), claimed by owner unless owner is empty or e is
// delayed.
func newRow(e outbox.Envelope, now time.Time, owner string) *row {
	r := &row{
		f: outbox.EnvelopeFields{
			ID: e.ID(), Type: e.Type(), AggregateType: e.AggregateType(), AggregateID: e.AggregateID(),
			TenantID: e.TenantID(), SchemaVersion: e.SchemaVersion(), OccurredAt: ts(e.OccurredAt()), Payload: e.PayloadString(), Kind: e.PayloadKind(),
		},
		status: outbox.StatusNew, createdAt: now, availableAt: now,
	}
	if e.NumHeaders() > 0 {
		r.f.Headers = e.Headers() // a copy
	}
	if e.Ordered() {
		r.f.OrderingKey = e.OrderingKey()
	}
	if at := ts(e.AvailableAt()); at.After(now) {
		r.availableAt = at
	}
	if owner != "" && !e.Delayed() {
		r.lockedBy, r.lockedAt = owner, now
	}
	return r
}

// record returns a copy of r as a Record. Its Envelope is rebuilt with
// RestoreEnvelope, as a SQL store rebuilds it from the row: its
// AvailableAt is the row's due time. The envelope shares the row's
// headers, which neither ever modifies.
func (r *row) record() outbox.Record {
	f := r.f
	f.AvailableAt = r.availableAt
	env, err := outbox.RestoreEnvelope(f)
	return outbox.Record{
		ID: r.f.ID, Envelope: env, Err: err, Status: r.status, Attempts: r.attempts,
		CreatedAt: r.createdAt, AvailableAt: r.availableAt, DoneAt: r.doneAt,
		LastError: r.lastError, LockedBy: r.lockedBy, LockedAt: r.lockedAt, Seq: r.seq,
		Subscribers: slices.Clone(r.subscribers),
	}
}

func byID(a, b *row) int { return cmp.Compare(a.f.ID, b.f.ID) }

// Insert stages events as NEW in tx, a transaction of this Store's InTx,
// created at now and due at max(now, AvailableAt); they become visible when
// the outermost transaction commits. With an owner, events that are not
// Delayed are inserted claimed by it. A Tx of another kind (or of another
// Store) is an error wrapping outbox.ErrInvalidConfig, an ended one an
// error wrapping outbox.ErrNoTransaction. An id that is already stored, or
// staged by a transaction that has not ended, fails the whole insert:
// nothing is staged.
func (s *Store) Insert(ctx context.Context, tx outbox.Tx, now time.Time, owner string, events []outbox.Envelope) error {
	t, ok := tx.(*memTx)
	if !ok || t.store != s {
		return fmt.Errorf("%w: outboxmem: the transaction (%T) is not one of this Store: write inside its InTx, with the Store as the TxContext",
			outbox.ErrInvalidConfig, tx)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("outboxmem: insert: %w", err)
	}
	now = ts(now)
	rows := make([]*row, 0, len(events))
	ids := make(map[string]struct{}, len(events))
	for i, e := range events {
		if e.IsZero() {
			return fmt.Errorf("%w: outboxmem: event %d is the zero Envelope", outbox.ErrInvalidEnvelope, i)
		}
		if _, dup := ids[e.ID()]; dup {
			return fmt.Errorf("%w: outboxmem: event id %s appears twice in the batch", outbox.ErrDuplicateEvent, e.ID())
		}
		ids[e.ID()] = struct{}{}
		rows = append(rows, newRow(e, now, owner))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.ended {
		return fmt.Errorf("%w: outboxmem: the transaction has already ended", outbox.ErrNoTransaction)
	}
	for _, r := range rows {
		if _, dup := s.rows[r.f.ID]; dup {
			return fmt.Errorf("%w: outboxmem: event id %s is already stored", outbox.ErrDuplicateEvent, r.f.ID)
		}
		if _, dup := s.staged[r.f.ID]; dup {
			return fmt.Errorf("%w: outboxmem: event id %s is already written by a transaction in progress", outbox.ErrDuplicateEvent, r.f.ID)
		}
	}
	top := t.levels[len(t.levels)-1]
	top.rows = append(top.rows, rows...)
	for _, r := range rows {
		s.seq++
		r.seq = s.seq
		s.staged[r.f.ID] = t
	}
	return nil
}

// Claim atomically claims up to req.Limit events for req.Owner: first
// pending events whose claim is older than the lease (by any owner, taken
// over: ErrClaimExpired, unless ErrInFlight is recorded), oldest claim first, then due unclaimed pending
// events old enough for SkipRecent, oldest due first. Ordered events are
// claimed only by a req.Ordered claim, and only as the head of their key
// (its first event that is not DONE, nor DEAD unless req.DeadSkips), keys
// taking turns. With req.Types or req.SkipTypes, only the events whose
// types they let through are claimed, recovered ones too; a key whose head
// they leave out waits. The result is ordered by due time, then id.
func (s *Store) Claim(ctx context.Context, req outbox.ClaimRequest) ([]outbox.Record, error) {
	if req.Limit <= 0 {
		return nil, nil
	}
	allowed, ok, err := claimable(ctx, req, "claim")
	if !ok {
		return nil, err
	}
	now := ts(req.Now)
	leaseCutoff, recentCutoff := ts(now.Add(-req.Lease)), ts(now.Add(-req.SkipRecent))
	s.mu.Lock()
	defer s.mu.Unlock()
	var expired []*row
	if !req.NoRecovery {
		for _, r := range s.claimed {
			if !r.lockedAt.After(leaseCutoff) && allowed(r.f.Type) {
				expired = append(expired, r)
			}
		}
	}
	expired = firstN(expired, req.Limit, func(a, b *row) int { return cmp.Or(a.lockedAt.Compare(b.lockedAt), byID(a, b)) })
	expired = s.headsOnly(expired, req.DeadSkips)
	var heads []*row
	if req.Ordered {
		heads = s.claimableHeads(s.heads(req.DeadSkips), allowed, now, recentCutoff, req.Limit-len(expired))
	}
	for _, r := range expired {
		s.change(r, func(r *row) {
			if r.lastError != outbox.ErrInFlight.Error() { // in flight: kept
				r.lastError = outbox.ErrClaimExpired.Error()
			}
			r.lockedBy, r.lockedAt = req.Owner, now
		})
	}
	if req.Run > 1 {
		heads = append(heads, s.runs(heads, runClaimable(now, recentCutoff, allowed), req.Run, req.Limit-len(expired)-len(heads), req.DeadSkips)...)
	}
	for _, r := range heads {
		s.change(r, func(r *row) { r.lockedBy, r.lockedAt = req.Owner, now })
	}
	// The due rows come off the head of s.due, in one pass.
	claimed := append(expired, heads...)
	end := 0
	for ; end < len(s.due) && len(claimed) < req.Limit; end++ {
		r := s.due[end]
		if r.availableAt.After(now) {
			break
		}
		if r.createdAt.After(recentCutoff) || !allowed(r.f.Type) {
			continue
		}
		r.lockedBy, r.lockedAt = req.Owner, now
		s.claimed[r.f.ID] = r
		claimed = append(claimed, r)
	}
	kept := len(slices.DeleteFunc(s.due[:end], func(r *row) bool { return r.lockedBy != "" }))
	kept += copy(s.due[kept:], s.due[end:])
	clear(s.due[kept:])
	s.due = s.due[:kept]
	slices.SortFunc(claimed, dueOrder)
	recs := make([]outbox.Record, len(claimed))
	for i, r := range claimed {
		recs[i] = r.record()
	}
	return recs, nil
}

// claimable checks a claim of req (op names it in errors) and returns
// its type filter (typeFilter); ok is false when nothing is to be
// claimed: an error, or no type let through.
func claimable(ctx context.Context, req outbox.ClaimRequest, op string) (allowed func(typ string) bool, ok bool, err error) {
	if req.Owner == "" {
		return nil, false, fmt.Errorf("%w: outboxmem: claim without an owner", outbox.ErrInvalidConfig)
	}
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("outboxmem: %s: %w", op, err)
	}
	allowed = typeFilter(req)
	if req.Types != nil && !slices.ContainsFunc(req.Types, allowed) {
		return nil, false, nil // no type to claim
	}
	return allowed, true, nil
}

// typeFilter returns whether req's type filters (Types, SkipTypes) let an
// event of a type be claimed.
func typeFilter(req outbox.ClaimRequest) func(typ string) bool {
	return func(typ string) bool {
		return (req.Types == nil || slices.Contains(req.Types, typ)) && !slices.Contains(req.SkipTypes, typ)
	}
}

// firstN returns the n first rows of rs by cmp, sorted, reordering rs. A
// claim takes a few rows of a backlog that may be large: it keeps the n
// first in a heap instead of sorting the whole backlog each time.
func firstN(rs []*row, n int, cmp func(a, b *row) int) []*row {
	if n <= 0 {
		return rs[:0]
	}
	if len(rs) > n {
		h := rs[:n] // a max-heap of the n first rows so far
		for i := n/2 - 1; i >= 0; i-- {
			siftDown(h, i, cmp)
		}
		for _, r := range rs[n:] {
			if cmp(r, h[0]) < 0 {
				h[0] = r
				siftDown(h, 0, cmp)
			}
		}
		rs = h
	}
	slices.SortFunc(rs, cmp)
	return rs
}

// siftDown moves h[i] down the max-heap h to its place.
func siftDown(h []*row, i int, cmp func(a, b *row) int) {
	for {
		m := 2*i + 1
		if m >= len(h) {
			return
		}
		if r := m + 1; r < len(h) && cmp(h[r], h[m]) > 0 {
			m = r
		}
		if cmp(h[m], h[i]) <= 0 {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// heads returns the first row of each ordering key that is not DONE (nor,
// unless deadSkips, DEAD), by key.
func (s *Store) heads(deadSkips bool) map[string]*row {
	heads := map[string]*row{}
	for _, r := range s.rows {
		if r.key() == "" || r.status == outbox.StatusDone || r.status == outbox.StatusDead && deadSkips {
			continue
		}
		if h, ok := heads[r.key()]; !ok || r.seq < h.seq {
			heads[r.key()] = r
		}
	}
	return heads
}

// runs returns, for heads, the events that follow each on its key in seq
// order while claimable says so, up to run-1 per key and room in all (see
// outbox.ClaimRequest.Run).
func (s *Store) runs(heads []*row, claimable func(*row) bool, run, room int, deadSkips bool) []*row {
	tails := make([]outbox.RunTail, len(heads))
	for i, h := range heads {
		tails[i] = outbox.RunTail{Key: h.key(), Seq: h.seq}
	}
	return s.runsAfter(tails, claimable, run-1, room, deadSkips)
}

// runsAfter returns, for tails, the events that follow each on its key in
// seq order while claimable says so, up to per per key and room in all;
// nothing for a tail with an open event of its key before it (pending, or
// unless deadSkips not DONE: one replayed since its run was claimed).
func (s *Store) runsAfter(tails []outbox.RunTail, claimable func(*row) bool, per, room int, deadSkips bool) []*row {
	if room <= 0 || per <= 0 || len(tails) == 0 {
		return nil
	}
	of := make(map[string][]*row, len(tails))
	for _, t := range tails {
		of[t.Key] = nil
	}
	for _, r := range s.rows {
		if _, ok := of[r.key()]; ok && r.status != outbox.StatusDone {
			of[r.key()] = append(of[r.key()], r)
		}
	}
	var out []*row
	for _, t := range tails {
		rs := of[t.Key]
		slices.SortFunc(rs, func(a, b *row) int { return cmp.Compare(a.seq, b.seq) })
		if slices.ContainsFunc(rs, func(r *row) bool { return r.seq < t.Seq && (!deadSkips || r.status != outbox.StatusDead) }) {
			continue // an earlier event comes first
		}
		taken := 0
		for _, r := range rs {
			if r.seq <= t.Seq {
				continue
			}
			if taken == per || room == 0 || !claimable(r) {
				break
			}
			out = append(out, r)
			taken++
			room--
		}
	}
	return out
}

// runClaimable returns whether a row may join a run claimed at now: pending,
// unclaimed, due, created before recentCutoff and of a type allowed.
func runClaimable(now, recentCutoff time.Time, allowed func(typ string) bool) func(*row) bool {
	return func(r *row) bool {
		return pending(r) && r.lockedBy == "" && !r.availableAt.After(now) && !r.createdAt.After(recentCutoff) && allowed(r.f.Type)
	}
}

// ContinueRuns implements outbox.RunContinuer: for each tail, the events
// that follow it on its key, taken as Claim takes a head's run, up to
// req.Run per key and req.Limit in all.
func (s *Store) ContinueRuns(ctx context.Context, req outbox.ClaimRequest, tails []outbox.RunTail) ([]outbox.Record, error) {
	allowed, ok, err := claimable(ctx, req, "continue runs")
	if !ok {
		return nil, err
	}
	now := ts(req.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	got := s.runsAfter(tails, runClaimable(now, ts(now.Add(-req.SkipRecent)), allowed), req.Run, req.Limit, req.DeadSkips)
	recs := make([]outbox.Record, len(got))
	for i, r := range got {
		s.change(r, func(r *row) { r.lockedBy, r.lockedAt = req.Owner, now })
		recs[i] = r.record()
	}
	return recs, nil
}

// headsOnly keeps, of expired (claims the recovery is about to take over),
// the unordered events and the ordered ones that no earlier event of their
// key comes before — one that is pending, or with DeadBlocksKey (not
// deadSkips) one that is not DONE — and gives the others back unclaimed,
// as taken over: they wait for their turn (see outbox.ClaimRequest.Run).
func (s *Store) headsOnly(expired []*row, deadSkips bool) []*row {
	var first map[string]int64 // per key, the seq of its first blocking event
	kept := expired[:0]
	for _, r := range expired {
		if r.key() == "" {
			kept = append(kept, r)
			continue
		}
		if first == nil {
			first = map[string]int64{}
			for _, o := range s.rows {
				if o.key() == "" || o.status == outbox.StatusDone || o.status == outbox.StatusDead && deadSkips {
					continue
				}
				if f, ok := first[o.key()]; !ok || o.seq < f {
					first[o.key()] = o.seq
				}
			}
		}
		if first[r.key()] == r.seq {
			kept = append(kept, r)
			continue
		}
		s.change(r, func(r *row) {
			if r.lastError != outbox.ErrInFlight.Error() {
				r.lastError = outbox.ErrClaimExpired.Error()
			}
			r.lockedBy, r.lockedAt = "", time.Time{}
		})
	}
	return kept
}

// claimableHeads returns up to limit heads that are pending, unclaimed,
// due and of a type allowed lets through, taking keys in order from the
// one after the store's cursor (and around), and moves the cursor to the
// last key taken.
func (s *Store) claimableHeads(heads map[string]*row, allowed func(string) bool, now, recentCutoff time.Time, limit int) []*row {
	keys := make([]string, 0, len(heads))
	for k := range heads {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	start, _ := slices.BinarySearch(keys, s.cursor+"\x00") // the first key after the cursor
	var out []*row
	for i := range keys {
		if len(out) == limit {
			break
		}
		k := keys[(start+i)%len(keys)]
		h := heads[k]
		if pending(h) && h.lockedBy == "" && !h.availableAt.After(now) && !h.createdAt.After(recentCutoff) && allowed(h.f.Type) {
			out = append(out, h)
			s.cursor = k
		}
	}
	return out
}

// PendingKeys returns which of keys have an ordered event that is not
// DONE, as the transaction tx sees them: committed, or staged by tx.
func (s *Store) PendingKeys(ctx context.Context, tx outbox.Tx, keys []string) ([]string, error) {
	t, ok := tx.(*memTx)
	if !ok || t.store != s {
		return nil, fmt.Errorf("%w: outboxmem: the transaction (%T) is not one of this Store", outbox.ErrInvalidConfig, tx)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("outboxmem: pending keys: %w", err)
	}
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	found := map[string]bool{}
	see := func(r *row) {
		if want[r.key()] && r.status != outbox.StatusDone {
			found[r.key()] = true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.rows {
		see(r)
	}
	for _, l := range t.levels {
		for _, r := range l.rows {
			see(r)
		}
	}
	var out []string
	for _, k := range keys {
		if found[k] {
			out = append(out, k)
		}
	}
	return out, nil
}

// Skip moves DEAD events to DONE at now without delivering them, records
// note as their last error, and returns how many rows changed.
func (s *Store) Skip(ctx context.Context, ids []string, now time.Time, note string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("outboxmem: skip: %w", err)
	}
	now = ts(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, id := range ids {
		if r, ok := s.rows[id]; ok && r.status == outbox.StatusDead {
			s.change(r, func(r *row) { r.status, r.doneAt, r.lastError = outbox.StatusDone, now, outbox.TruncateError(note) })
			n++
		}
	}
	return n, nil
}

// blocking reports whether r is a DEAD event that holds back its ordering
// key: the first event of its key that is not DONE.
func (s *Store) blocking(r *row) bool {
	if r.status != outbox.StatusDead || r.key() == "" {
		return false
	}
	for _, o := range s.rows {
		if o.key() == r.key() && o.seq < r.seq && o.status != outbox.StatusDone {
			return false
		}
	}
	return true
}

// Renew sets the claim time of owner's claimed pending events to now and
// returns how many rows changed.
func (s *Store) Renew(ctx context.Context, owner string, ids []string, now time.Time) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("outboxmem: renew: %w", err)
	}
	now = ts(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fenced(owner, ids, func(r *row) { r.lockedAt = now }), nil
}

// CountAttempt increments the attempts of owner's claimed event, records
// ErrInFlight as its last error, and reports whether the row changed.
func (s *Store) CountAttempt(ctx context.Context, owner, id string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("outboxmem: count an attempt: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fenced(owner, []string{id}, func(r *row) { r.attempts, r.lastError = r.attempts+1, outbox.ErrInFlight.Error() }) > 0, nil
}

// fenced calls fn for each distinct id of a pending row claimed by owner
// and returns how many there were.
func (s *Store) fenced(owner string, ids []string, fn func(r *row)) int64 {
	var n int64
	seen := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		if r, ok := s.rows[id]; ok && pending(r) && r.lockedBy == owner {
			s.change(r, fn)
			n++
		}
	}
	return n
}

// MarkDone marks owner's claimed events DONE at now and returns how many
// rows changed; ids not claimed by owner are left alone.
func (s *Store) MarkDone(ctx context.Context, owner string, ids []string, now time.Time) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("outboxmem: mark done: %w", err)
	}
	now = ts(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fenced(owner, ids, func(r *row) {
		r.status, r.doneAt, r.lastError = outbox.StatusDone, now, ""
		r.unlock()
	}), nil
}

// outcome applies the fenced update of MarkRetry or MarkDead.
func (s *Store) outcome(ctx context.Context, what string, o outbox.Outcome, apply func(r *row, at time.Time)) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("outboxmem: %s %s: %w", what, o.ID, err)
	}
	at := ts(o.At)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.fenced(o.Owner, []string{o.ID}, func(r *row) {
		apply(r, at)
		r.lastError = outbox.TruncateError(o.Error)
		r.subscribers = slices.Clone(o.Subscribers)
		if o.CountAttempt {
			r.attempts++
		}
		r.unlock()
	})
	return n > 0, nil
}

// MarkRetry makes o.Owner's claimed event pending again (RETRY) at o.At,
// records o.Error (truncated to outbox.MaxErrorLen characters) and, with
// o.CountAttempt, increments attempts. It reports whether the row changed.
func (s *Store) MarkRetry(ctx context.Context, o outbox.Outcome) (bool, error) {
	return s.outcome(ctx, "mark retry", o, func(r *row, at time.Time) {
		r.status, r.availableAt = outbox.StatusRetry, at
	})
}

// MarkDead moves o.Owner's claimed event to DEAD at o.At, records o.Error
// (truncated) and, with o.CountAttempt, increments attempts. It reports
// whether the row changed.
func (s *Store) MarkDead(ctx context.Context, o outbox.Outcome) (bool, error) {
	return s.outcome(ctx, "mark dead", o, func(r *row, at time.Time) {
		r.status, r.doneAt = outbox.StatusDead, at
	})
}

// Release drops owner's claim on pending events and returns how many rows
// changed. Their due time is unchanged: they are claimable at once.
func (s *Store) Release(ctx context.Context, owner string, ids []string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("outboxmem: release: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fenced(owner, ids, (*row).unlock), nil
}

// Replay moves DEAD events back to NEW: zero attempts, due at now,
// unclaimed, no completion time; the last error is kept. It returns how
// many rows changed.
func (s *Store) Replay(ctx context.Context, ids []string, now time.Time) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("outboxmem: replay: %w", err)
	}
	now = ts(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, id := range ids {
		if r, ok := s.rows[id]; ok && r.status == outbox.StatusDead {
			s.change(r, func(r *row) {
				r.status, r.attempts, r.availableAt, r.doneAt = outbox.StatusNew, 0, now, time.Time{}
				r.unlock()
			})
			n++
		}
	}
	return n, nil
}

// Delete removes DEAD events and returns how many it removed.
func (s *Store) Delete(ctx context.Context, ids []string) (int64, error) {
	return s.remove(ctx, "delete", ids, func(r *row) bool { return r.status == outbox.StatusDead })
}

// remove deletes the rows of ids that which selects (what names the
// operation in errors) and returns how many.
func (s *Store) remove(ctx context.Context, what string, ids []string, which func(*row) bool) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("outboxmem: %s: %w", what, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, id := range ids {
		if r, ok := s.rows[id]; ok && which(r) {
			s.unindex(r)
			delete(s.rows, id)
			n++
		}
	}
	return n, nil
}

// Get returns a copy of the event id with its state, or an error wrapping
// outbox.ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (outbox.Record, error) {
	if err := ctx.Err(); err != nil {
		return outbox.Record{}, fmt.Errorf("outboxmem: get %s: %w", id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[id]
	if !ok {
		return outbox.Record{}, fmt.Errorf("%w: no event with id %s", outbox.ErrNotFound, id)
	}
	return r.record(), nil
}

// matching returns the committed rows q selects (ignoring q.Limit),
// ordered by id. Statuses outside NEW..DEAD match no row.
func (s *Store) matching(q outbox.Query) []*row {
	var ids map[string]struct{}
	if len(q.IDs) > 0 {
		ids = make(map[string]struct{}, len(q.IDs))
		for _, id := range q.IDs {
			ids[id] = struct{}{}
		}
	}
	var out []*row
	for _, r := range s.rows {
		if len(q.Statuses) > 0 && !slices.Contains(q.Statuses, r.status) ||
			q.AggregateType != "" && r.f.AggregateType != q.AggregateType ||
			q.EventType != "" && r.f.Type != q.EventType ||
			q.TenantID != "" && r.f.TenantID != q.TenantID ||
			r.f.ID <= q.AfterID || q.Blocking && !s.blocking(r) {
			continue
		}
		if ids != nil {
			if _, ok := ids[r.f.ID]; !ok {
				continue
			}
		}
		out = append(out, r)
	}
	slices.SortFunc(out, byID)
	return out
}

// List returns copies of the events matching q ordered by id, at most
// q.Limit (DefaultListLimit when zero).
func (s *Store) List(ctx context.Context, q outbox.Query) ([]outbox.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("outboxmem: list: %w", err)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rows := s.matching(q)
	rows = rows[:min(len(rows), limit)]
	recs := make([]outbox.Record, len(rows))
	for i, r := range rows {
		recs[i] = r.record()
	}
	return recs, nil
}

// Count returns how many events match q; q.Limit is ignored.
func (s *Store) Count(ctx context.Context, q outbox.Query) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("outboxmem: count: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.matching(q))), nil
}

// Stats counts events by status (statuses with no event are absent from
// ByStatus; every figure is exact, DoneEstimated stays false) and the
// pending ones due at now and claimed, finds the creation time of the
// oldest pending one, and the pending backlog per event type.
func (s *Store) Stats(ctx context.Context, now time.Time) (outbox.Stats, error) {
	st := outbox.Stats{ByStatus: make(map[outbox.Status]int64, 4)}
	if err := ctx.Err(); err != nil {
		return st, fmt.Errorf("outboxmem: stats: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	types := map[string]*outbox.TypeBacklog{}
	for _, r := range s.rows {
		st.ByStatus[r.status]++
		if pending(r) {
			if r.lockedBy != "" {
				st.Claimed++
			}
			tb := types[r.f.Type]
			if tb == nil {
				tb = &outbox.TypeBacklog{Type: r.f.Type}
				types[r.f.Type] = tb
			}
			tb.Pending++
			if tb.Oldest.IsZero() || r.createdAt.Before(tb.Oldest) {
				tb.Oldest = r.createdAt
			}
		}
		if pending(r) && !r.availableAt.After(now) {
			st.Due++
		}
		if r.status == outbox.StatusDead {
			st.AddDeadSubscribers(r.subscribers, 1)
		}
		if pending(r) && (st.OldestPending.IsZero() || r.createdAt.Before(st.OldestPending)) {
			st.OldestPending = r.createdAt
		}
		if s.blocking(r) {
			st.BlockedKeys++
			if st.OldestBlocked.IsZero() || r.doneAt.Before(st.OldestBlocked) {
				st.OldestBlocked = r.doneAt
			}
		}
	}
	backlogs := make([]outbox.TypeBacklog, 0, len(types))
	for _, tb := range types {
		backlogs = append(backlogs, *tb)
	}
	st.SetTypes(backlogs)
	return st, nil
}

// Purge deletes at most req.Limit events in req.Status (DONE or DEAD), of
// req.TenantID when set, completed (or, without a completion time,
// created) before req.Before, oldest id first, and returns how many.
func (s *Store) Purge(ctx context.Context, req outbox.PurgeRequest) (int64, error) {
	if req.Limit <= 0 {
		return 0, nil
	}
	status := req.Status
	if status != outbox.StatusDone && status != outbox.StatusDead {
		return 0, fmt.Errorf("%w: outboxmem: purge of %s events: only DONE and DEAD events are purged", outbox.ErrInvalidConfig, status)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("outboxmem: purge: %w", err)
	}
	before := ts(req.Before)
	s.mu.Lock()
	defer s.mu.Unlock()
	var old []*row
	for _, r := range s.rows {
		end := r.doneAt
		if end.IsZero() {
			end = r.createdAt
		}
		if r.status == status && end.Before(before) && (req.TenantID == "" || r.f.TenantID == req.TenantID) {
			old = append(old, r)
		}
	}
	slices.SortFunc(old, byID)
	old = old[:min(len(old), req.Limit)]
	for _, r := range old {
		delete(s.rows, r.f.ID)
	}
	return int64(len(old)), nil
}
