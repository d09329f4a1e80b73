package outboxmem

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

var (
	_ outbox.Controls  = (*Store)(nil)
	_ outbox.Overrides = (*Store)(nil)
)

// controls are the control tables of a Store (outbox.Controls): its
// pauses by scope, its nodes by owner, and the audit trail in id order.
// They have a lock of their own: the claims do not wait for them. The
// zero value is empty and usable.
type controls struct {
	mu     sync.Mutex
	pauses map[string]outbox.Pause
	nodes  map[string]outbox.Node
	audit  []outbox.AuditEntry
	lastID int64
}

// SetPause stores p, replacing the pause of its scope if there is one.
func (s *Store) SetPause(ctx context.Context, p outbox.Pause) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("outboxmem: pause: %w", err)
	}
	c := &s.ctl
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pauses == nil {
		c.pauses = map[string]outbox.Pause{}
	}
	p.At = ts(p.At)
	c.pauses[p.Scope] = p
	return nil
}

// DeletePause removes the pause of scope and reports whether there was one.
func (s *Store) DeletePause(ctx context.Context, scope string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("outboxmem: resume: %w", err)
	}
	c := &s.ctl
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.pauses[scope]
	delete(c.pauses, scope)
	return ok, nil
}

// Pauses returns every stored pause, by scope.
func (s *Store) Pauses(ctx context.Context) ([]outbox.Pause, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("outboxmem: pauses: %w", err)
	}
	c := &s.ctl
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []outbox.Pause
	for _, scope := range slices.Sorted(maps.Keys(c.pauses)) {
		out = append(out, c.pauses[scope])
	}
	return out, nil
}

// Beat records n (by its Owner) as seen at n.Seen, and forgets the nodes
// last seen before forgetBefore (none when it is zero). Of n.Types it
// keeps at most outbox.MaxNodeTypes, sorted: a node with more is kept as
// routing every type (nil), as the SQL stores keep it.
func (s *Store) Beat(ctx context.Context, n outbox.Node, forgetBefore time.Time) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("outboxmem: beat: %w", err)
	}
	n.Started, n.Seen = ts(n.Started), ts(n.Seen)
	if n.Types != nil && len(n.Types) <= outbox.MaxNodeTypes {
		n.Types = slices.Clone(n.Types) // empty stays empty: a node that routes no type
		slices.Sort(n.Types)
		n.Types = slices.Compact(n.Types)
	} else {
		n.Types = nil
	}
	forgetBefore = ts(forgetBefore)
	c := &s.ctl
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes == nil {
		c.nodes = map[string]outbox.Node{}
	}
	c.nodes[n.Owner] = n
	if !forgetBefore.IsZero() {
		maps.DeleteFunc(c.nodes, func(_ string, n outbox.Node) bool { return n.Seen.Before(forgetBefore) })
	}
	return nil
}

// Leave forgets the node owner (its Client closed).
func (s *Store) Leave(ctx context.Context, owner string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("outboxmem: leave: %w", err)
	}
	c := &s.ctl
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.nodes, owner)
	return nil
}

// Nodes returns the nodes seen at or after since, by owner.
func (s *Store) Nodes(ctx context.Context, since time.Time) ([]outbox.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("outboxmem: nodes: %w", err)
	}
	c := &s.ctl
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []outbox.Node
	for _, n := range c.nodes {
		if !n.Seen.Before(since) {
			n.Types = slices.Clone(n.Types)
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b outbox.Node) int { return cmp.Compare(a.Owner, b.Owner) })
	return out, nil
}

// AppendAudit records e, assigning its ID, and returns it.
func (s *Store) AppendAudit(ctx context.Context, e outbox.AuditEntry) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("outboxmem: record %q: %w", e.Action, err)
	}
	c := &s.ctl
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastID++
	e.ID, e.At = c.lastID, ts(e.At)
	c.audit = append(c.audit, e)
	return e.ID, nil
}

// DefaultAuditLimit is how many entries Audit returns when
// AuditQuery.Limit is zero, as in the SQL stores.
const DefaultAuditLimit = 100

// Audit returns the entries q selects, newest first: at most q.Limit
// (DefaultAuditLimit when zero), with an id below q.BeforeID when set.
// The trail is kept: no purge deletes it.
func (s *Store) Audit(ctx context.Context, q outbox.AuditQuery) ([]outbox.AuditEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("outboxmem: audit: %w", err)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultAuditLimit
	}
	c := &s.ctl
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []outbox.AuditEntry
	for i := len(c.audit) - 1; i >= 0 && len(out) < limit; i-- {
		if e := c.audit[i]; q.BeforeID <= 0 || e.ID < q.BeforeID {
			out = append(out, e)
		}
	}
	return out, nil
}

// ForceDead moves pending events (NEW or RETRY, claimed or not) to DEAD
// at now, recording note (truncated) as their last error, and returns
// how many rows changed. Their claims are dropped, so that a delivery
// running meanwhile stores no outcome. Like MarkDead's, a forced DEAD
// event of an ordering key holds back the events behind it.
func (s *Store) ForceDead(ctx context.Context, ids []string, now time.Time, note string) (int64, error) {
	return s.endPending(ctx, "force dead", ids, func(r *row) {
		r.status, r.doneAt, r.lastError = outbox.StatusDead, ts(now), outbox.TruncateError(note)
		r.unlock()
	})
}

// SkipPending moves pending events (claimed or not) to DONE at now
// without delivering them, records note (truncated) as their last error,
// and returns how many rows changed: the later events of a skipped head
// go on.
func (s *Store) SkipPending(ctx context.Context, ids []string, now time.Time, note string) (int64, error) {
	return s.endPending(ctx, "skip pending", ids, func(r *row) {
		r.status, r.doneAt, r.lastError = outbox.StatusDone, ts(now), outbox.TruncateError(note)
		r.unlock()
	})
}

// endPending applies end to each distinct id of a pending row and returns
// how many there were.
func (s *Store) endPending(ctx context.Context, what string, ids []string, end func(r *row)) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("outboxmem: %s: %w", what, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, id := range ids {
		if r, ok := s.rows[id]; ok && pending(r) {
			s.change(r, end)
			n++
		}
	}
	return n, nil
}

// Remove deletes events in any status and returns how many it removed.
func (s *Store) Remove(ctx context.Context, ids []string) (int64, error) {
	return s.remove(ctx, "remove", ids, func(*row) bool { return true })
}
