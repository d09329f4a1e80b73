package outbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/go-outbox/outbox/core/outboxtx"
)

// memStore is an in-memory Store and Purger with the fencing rules of the
// Store contract, for the unit tests of this package, which cannot import
// package outboxmem (it imports this one). What it adds is what a real
// database cannot do on demand: fail a given method (setFail), count the
// calls (callCount), and hold any row as is (put), including one that
// cannot be decoded. Tests of the public API use outboxmem.
type memStore struct {
	mu    sync.Mutex
	rows  map[string]*Record
	fail  map[string]error // method name → error to return
	calls map[string]int
	after map[string]func() // method name → run once the call returns
	seq   int64
	// The control tables (Controls).
	pauses map[string]Pause
	nodes  map[string]Node
	audit  []AuditEntry
}

func newMemStore() *memStore {
	return &memStore{rows: map[string]*Record{}, fail: map[string]error{}, calls: map[string]int{}}
}

func (s *memStore) enter(method string) error {
	s.mu.Lock()
	s.calls[method]++
	return s.fail[method]
}

func (s *memStore) setFail(method string, err error) {
	s.mu.Lock()
	s.fail[method] = err
	s.mu.Unlock()
}

func (s *memStore) callCount(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

func (s *memStore) get(id string) Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.rows[id]; ok {
		return *r
	}
	return Record{}
}

// put stores a record as is (for setting up poller and dead-letter tests).
func (s *memStore) put(r Record) {
	s.mu.Lock()
	s.rows[r.ID] = &r
	s.mu.Unlock()
}

func pending(r *Record) bool { return r.Status == StatusNew || r.Status == StatusRetry }

// Insert adds the rows at once (visible before the commit) and deletes
// them again if tx rolls back.
func (s *memStore) Insert(_ context.Context, tx Tx, now time.Time, owner string, events []Envelope) error {
	err := s.enter("Insert")
	defer s.mu.Unlock()
	if err != nil {
		return err
	}
	if tx == nil {
		return fmt.Errorf("%w: memStore: nil Tx", ErrInvalidConfig)
	}
	for _, e := range events {
		if _, dup := s.rows[e.ID()]; dup {
			return errors.New("duplicate id " + e.ID())
		}
	}
	ids := make([]string, 0, len(events))
	for _, e := range events {
		ids = append(ids, e.ID())
		s.seq++
		r := &Record{ID: e.ID(), Envelope: e, Status: StatusNew, CreatedAt: now, AvailableAt: now, Seq: s.seq}
		if e.AvailableAt().After(now) {
			r.AvailableAt = e.AvailableAt()
		}
		if owner != "" && !e.Delayed() {
			r.LockedBy, r.LockedAt = owner, now
		}
		s.rows[e.ID()] = r
	}
	tx.AfterRollback(func() {
		s.mu.Lock()
		for _, id := range ids {
			delete(s.rows, id)
		}
		s.mu.Unlock()
	})
	return nil
}

func (s *memStore) sorted() []*Record {
	out := make([]*Record, 0, len(s.rows))
	for _, r := range s.rows {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *Record) int {
		if c := a.AvailableAt.Compare(b.AvailableAt); c != 0 {
			return c
		}
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	return out
}

func (s *memStore) Claim(_ context.Context, req ClaimRequest) ([]Record, error) {
	err := s.enter("Claim")
	defer s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	// As in the real stores: expired claims first (any owner's), then due
	// unclaimed rows.
	var out []Record
	take := func(r *Record) {
		r.LockedBy, r.LockedAt = req.Owner, req.Now
		out = append(out, *r)
	}
	for _, r := range s.sorted() {
		if !typeClaimed(req, r.Envelope.Type()) {
			continue
		}
		if !req.NoRecovery && len(out) < req.Limit && pending(r) && r.LockedBy != "" && req.Now.Sub(r.LockedAt) >= req.Lease {
			if r.LastError != ErrInFlight.Error() {
				r.LastError = ErrClaimExpired.Error()
			}
			take(r)
		}
	}
	for _, r := range s.sorted() {
		if r.Envelope.Ordered() && (!req.Ordered || !s.head(r, req.DeadSkips)) || !typeClaimed(req, r.Envelope.Type()) {
			continue
		}
		if len(out) < req.Limit && pending(r) && r.LockedBy == "" && !r.AvailableAt.After(req.Now) && !r.CreatedAt.After(req.Now.Add(-req.SkipRecent)) {
			take(r)
		}
	}
	return out, nil
}

// typeClaimed reports whether req's type filters let events of type t
// through.
func typeClaimed(req ClaimRequest, t string) bool {
	return (req.Types == nil || slices.Contains(req.Types, t)) && !slices.Contains(req.SkipTypes, t)
}

// SetPause, DeletePause, Pauses, Beat, Leave, Nodes, AppendAudit and
// Audit are the control tables (Controls).
func (s *memStore) SetPause(_ context.Context, p Pause) error {
	err := s.enter("SetPause")
	defer s.mu.Unlock()
	if err != nil {
		return err
	}
	if s.pauses == nil {
		s.pauses = map[string]Pause{}
	}
	s.pauses[p.Scope] = p
	return nil
}

func (s *memStore) DeletePause(_ context.Context, scope string) (bool, error) {
	err := s.enter("DeletePause")
	defer s.mu.Unlock()
	if err != nil {
		return false, err
	}
	_, ok := s.pauses[scope]
	delete(s.pauses, scope)
	return ok, nil
}

func (s *memStore) Pauses(context.Context) ([]Pause, error) {
	err := s.enter("Pauses")
	defer s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var out []Pause
	for _, k := range sortedKeys(s.pauses) {
		out = append(out, s.pauses[k])
	}
	return out, nil
}

func (s *memStore) Beat(_ context.Context, n Node, forgetBefore time.Time) error {
	err := s.enter("Beat")
	defer s.mu.Unlock()
	if err != nil {
		return err
	}
	if s.nodes == nil {
		s.nodes = map[string]Node{}
	}
	if old, ok := s.nodes[n.Owner]; ok {
		n.Started = old.Started
	}
	s.nodes[n.Owner] = n
	for k, o := range s.nodes {
		if o.Seen.Before(forgetBefore) {
			delete(s.nodes, k)
		}
	}
	return nil
}

func (s *memStore) Leave(_ context.Context, owner string) error {
	err := s.enter("Leave")
	defer s.mu.Unlock()
	if err != nil {
		return err
	}
	delete(s.nodes, owner)
	return nil
}

func (s *memStore) Nodes(_ context.Context, since time.Time) ([]Node, error) {
	err := s.enter("Nodes")
	defer s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var out []Node
	for _, k := range sortedKeys(s.nodes) {
		if n := s.nodes[k]; !n.Seen.Before(since) {
			out = append(out, n)
		}
	}
	return out, nil
}

func (s *memStore) AppendAudit(_ context.Context, e AuditEntry) (int64, error) {
	err := s.enter("AppendAudit")
	defer s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	e.ID = int64(len(s.audit) + 1)
	s.audit = append(s.audit, e)
	return e.ID, nil
}

func (s *memStore) Audit(_ context.Context, q AuditQuery) ([]AuditEntry, error) {
	err := s.enter("Audit")
	defer s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var out []AuditEntry
	for i := len(s.audit) - 1; i >= 0 && len(out) < q.Limit; i-- {
		if q.BeforeID == 0 || s.audit[i].ID < q.BeforeID {
			out = append(out, s.audit[i])
		}
	}
	return out, nil
}

// head reports whether no event of r's key before r is pending (or, unless
// deadSkips, DEAD).
func (s *memStore) head(r *Record, deadSkips bool) bool {
	for _, o := range s.rows {
		if o.Seq < r.Seq && o.Envelope.Ordered() && o.Envelope.OrderingKey() == r.Envelope.OrderingKey() &&
			(pending(o) || o.Status == StatusDead && !deadSkips) {
			return false
		}
	}
	return true
}

func (s *memStore) PendingKeys(_ context.Context, _ Tx, keys []string) ([]string, error) {
	err := s.enter("PendingKeys")
	defer s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range keys {
		for _, r := range s.rows {
			if r.Envelope.Ordered() && r.Envelope.OrderingKey() == k && r.Status != StatusDone {
				out = append(out, k)
				break
			}
		}
	}
	return out, nil
}

func (s *memStore) Skip(_ context.Context, ids []string, now time.Time, note string) (int64, error) {
	err := s.enter("Skip")
	defer s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, id := range ids {
		if r, ok := s.rows[id]; ok && r.Status == StatusDead {
			r.Status, r.DoneAt, r.LastError = StatusDone, now, note
			n++
		}
	}
	return n, nil
}

func (s *memStore) Renew(_ context.Context, owner string, ids []string, now time.Time) (int64, error) {
	err := s.enter("Renew")
	defer s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, id := range ids {
		if r := s.fenced(owner, id); r != nil {
			r.LockedAt = now
			n++
		}
	}
	return n, nil
}

func (s *memStore) fenced(owner, id string) *Record {
	r, ok := s.rows[id]
	if !ok || !pending(r) || r.LockedBy != owner {
		return nil
	}
	return r
}

func (s *memStore) MarkDone(_ context.Context, owner string, ids []string, now time.Time) (int64, error) {
	err := s.enter("MarkDone")
	defer s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, id := range ids {
		if r := s.fenced(owner, id); r != nil {
			r.Status, r.DoneAt, r.LockedBy, r.LockedAt = StatusDone, now, "", time.Time{}
			n++
		}
	}
	return n, nil
}

func (s *memStore) MarkRetry(_ context.Context, o Outcome) (bool, error) {
	defer s.runAfter("MarkRetry")
	return s.settle("MarkRetry", o, func(r *Record) {
		r.Status, r.AvailableAt = StatusRetry, o.At
	})
}

// setAfter makes fn run right after each call of method returns, outside
// the store's lock (to act between two steps of the code under test).
func (s *memStore) setAfter(method string, fn func()) {
	s.mu.Lock()
	if s.after == nil {
		s.after = map[string]func(){}
	}
	s.after[method] = fn
	s.mu.Unlock()
}

func (s *memStore) runAfter(method string) {
	s.mu.Lock()
	fn := s.after[method]
	s.mu.Unlock()
	if fn != nil {
		fn()
	}
}

func (s *memStore) MarkDead(_ context.Context, o Outcome) (bool, error) {
	return s.settle("MarkDead", o, func(r *Record) {
		r.Status, r.DoneAt = StatusDead, o.At
	})
}

// settle applies a fenced outcome to one row and drops its claim.
func (s *memStore) settle(method string, o Outcome, apply func(*Record)) (bool, error) {
	err := s.enter(method)
	defer s.mu.Unlock()
	if err != nil {
		return false, err
	}
	r := s.fenced(o.Owner, o.ID)
	if r == nil {
		return false, nil
	}
	apply(r)
	r.LastError = TruncateError(o.Error)
	r.LockedBy, r.LockedAt = "", time.Time{}
	if o.CountAttempt {
		r.Attempts++
	}
	return true, nil
}

func (s *memStore) Release(_ context.Context, owner string, ids []string) (int64, error) {
	err := s.enter("Release")
	defer s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, id := range ids {
		if r := s.fenced(owner, id); r != nil {
			r.LockedBy, r.LockedAt = "", time.Time{}
			n++
		}
	}
	return n, nil
}

func (s *memStore) match(q Query) []*Record {
	var out []*Record
	for _, r := range s.rows {
		if (len(q.Statuses) == 0 || slices.Contains(q.Statuses, r.Status)) &&
			(q.AggregateType == "" || q.AggregateType == r.Envelope.AggregateType()) &&
			(q.EventType == "" || q.EventType == r.Envelope.Type()) && r.ID > q.AfterID &&
			(q.TenantID == "" || q.TenantID == r.Envelope.TenantID()) &&
			(len(q.IDs) == 0 || slices.Contains(q.IDs, r.ID)) &&
			(!q.Blocking || r.Status == StatusDead && r.Envelope.Ordered() && s.head(r, false)) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *Record) int {
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	return out
}

func (s *memStore) Get(_ context.Context, id string) (Record, error) {
	err := s.enter("Get")
	defer s.mu.Unlock()
	if err != nil {
		return Record{}, err
	}
	r, ok := s.rows[id]
	if !ok {
		return Record{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return *r, nil
}

func (s *memStore) List(_ context.Context, q Query) ([]Record, error) {
	err := s.enter("List")
	defer s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	var out []Record
	for _, r := range s.match(q) {
		if len(out) == limit {
			break
		}
		out = append(out, *r)
	}
	return out, nil
}

func (s *memStore) Count(_ context.Context, q Query) (int64, error) {
	err := s.enter("Count")
	defer s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return int64(len(s.match(q))), nil
}

func (s *memStore) Stats(context.Context, time.Time) (Stats, error) {
	err := s.enter("Stats")
	defer s.mu.Unlock()
	if err != nil {
		return Stats{}, err
	}
	st := Stats{ByStatus: map[Status]int64{}}
	types := map[string]*TypeBacklog{}
	for _, r := range s.rows {
		st.ByStatus[r.Status]++
		if pending(r) {
			tb := types[r.Envelope.Type()]
			if tb == nil {
				tb = &TypeBacklog{Type: r.Envelope.Type(), Oldest: r.CreatedAt}
				types[tb.Type] = tb
			}
			tb.Pending++
			if r.CreatedAt.Before(tb.Oldest) {
				tb.Oldest = r.CreatedAt
			}
			if r.LockedBy != "" {
				st.Claimed++
			}
		}
		if pending(r) && (st.OldestPending.IsZero() || r.CreatedAt.Before(st.OldestPending)) {
			st.OldestPending = r.CreatedAt
		}
		if r.Status == StatusDead && r.Envelope.Ordered() && s.head(r, false) {
			st.BlockedKeys++
			if st.OldestBlocked.IsZero() || r.DoneAt.Before(st.OldestBlocked) {
				st.OldestBlocked = r.DoneAt
			}
		}
	}
	for _, k := range sortedKeys(types) {
		st.Types = append(st.Types, *types[k])
	}
	return st, nil
}

func (s *memStore) Delete(_ context.Context, ids []string) (int64, error) {
	err := s.enter("Delete")
	defer s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, id := range ids {
		if r, ok := s.rows[id]; ok && r.Status == StatusDead {
			delete(s.rows, id)
			n++
		}
	}
	return n, nil
}

func (s *memStore) Replay(_ context.Context, ids []string, now time.Time) (int64, error) {
	err := s.enter("Replay")
	defer s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, id := range ids {
		if r, ok := s.rows[id]; ok && r.Status == StatusDead {
			r.Status, r.Attempts, r.AvailableAt, r.LockedBy, r.LockedAt, r.DoneAt = StatusNew, 0, now, "", time.Time{}, time.Time{}
			n++
		}
	}
	return n, nil
}

func (s *memStore) Purge(_ context.Context, req PurgeRequest) (int64, error) {
	err := s.enter("Purge")
	defer s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, r := range s.sorted() {
		if int(n) == req.Limit {
			break
		}
		end := r.DoneAt
		if end.IsZero() {
			end = r.CreatedAt
		}
		if r.Status == req.Status && end.Before(req.Before) && (req.TenantID == "" || r.Envelope.TenantID() == req.TenantID) {
			delete(s.rows, r.ID)
			n++
		}
	}
	return n, nil
}

type txKey struct{}

// fakeTxContext finds the transaction withTx put in the context: an
// outboxtx.Scope, which is an outbox.Tx.
type fakeTxContext struct{}

func (fakeTxContext) Current(ctx context.Context) (Tx, error) {
	if tx, ok := ctx.Value(txKey{}).(*outboxtx.Scope); ok && !tx.Ended() {
		return tx, nil
	}
	return nil, ErrNoTransaction
}

// withTx begins a transaction; end it with Commit or Rollback.
func withTx(ctx context.Context) (context.Context, *outboxtx.Scope) {
	tx := outboxtx.NewScope(nil)
	return context.WithValue(ctx, txKey{}, tx), tx
}

func bufferLogger() (*slog.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// countingMetrics records the counters it receives.
type countingMetrics struct {
	NopMetrics
	mu     sync.Mutex
	counts map[string]int
}

func (m *countingMetrics) inc(name string, n int) {
	m.mu.Lock()
	if m.counts == nil {
		m.counts = map[string]int{}
	}
	m.counts[name] += n
	m.mu.Unlock()
}

func (m *countingMetrics) get(name string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[name]
}

// The counters keep the names the tests were written with.
func (m *countingMetrics) EventEnqueued(_ EventLabels, p Path) {
	if p == PathHot {
		m.inc("HotEnqueued", 1)
	} else {
		m.inc("ColdEnqueued", 1)
	}
}
func (m *countingMetrics) EventDropped(EventLabels)           { m.inc("HotDropped", 1) }
func (m *countingMetrics) Delivered(EventLabels)              { m.inc("DispatchSuccess", 1) }
func (m *countingMetrics) Failed(EventLabels)                 { m.inc("DispatchFailure", 1) }
func (m *countingMetrics) Dead(EventLabels)                   { m.inc("DispatchDead", 1) }
func (m *countingMetrics) Expired(EventLabels)                { m.inc("Expired", 1) }
func (m *countingMetrics) EventsWritten(_ EventLabels, n int) { m.inc("EventsWritten", n) }
func (m *countingMetrics) StaleUpdates(n int)                 { m.inc("StaleUpdates", n) }
func (m *countingMetrics) KeyBlocked()                        { m.inc("KeyBlocked", 1) }
func (m *countingMetrics) AckBatch(int)                       { m.inc("AckBatch", 1) }

func (s *memStore) CountAttempt(_ context.Context, owner, id string) (bool, error) {
	err := s.enter("CountAttempt")
	defer s.mu.Unlock()
	if err != nil {
		return false, err
	}
	r, ok := s.rows[id]
	if !ok || r.LockedBy != owner || !pending(r) {
		return false, nil
	}
	r.Attempts++
	r.LastError = ErrInFlight.Error()
	return true, nil
}
