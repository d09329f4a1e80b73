package outbox

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// PauseAll is the scope of a pause that stops the delivery of every event
// type on the table (see Client.Pause).
const PauseAll = "*"

// Bounds of what an operator writes into the control tables: a pause's
// scope is an event type (MaxEventTypeLen) or PauseAll.
const (
	// MaxActorLen bounds an actor's name (see WithActor).
	MaxActorLen = 255
	// MaxReasonLen bounds the reason of a pause or of an operator action.
	MaxReasonLen = 1000
)

// ErrUnsupported is returned by the operator methods of a Client whose
// Store does not keep the control tables (see Controls) or the overrides
// (see Overrides).
var ErrUnsupported = errors.New("outbox: not supported by this store")

// Pause is a stored pause of delivery: while it is stored, no Client on
// the table claims or delivers the events in its Scope; they stay pending,
// in order, until it is removed (Client.Resume).
type Pause struct {
	// Scope is the event type paused, or PauseAll.
	Scope string
	// By is who paused (see WithActor), Reason why, and At when.
	By     string
	Reason string
	At     time.Time
}

// Node is an instance delivering from the table, as it last reported
// itself (Controls.Beat): the Clients of a table share rate and
// concurrency limits among the live ones, and an event type that none of
// them routes is reported as unrouted.
type Node struct {
	// Owner is the Client's owner id (Config.Owner).
	Owner string
	// Mode is the Client's Mode, by name.
	Mode string
	// Types are the event types the Client routes, sorted; nil when it
	// claims every type (a catch-all route, or Config.ClaimAll).
	Types []string
	// Started is when the Client started, Seen when it last reported.
	Started, Seen time.Time
}

// routes reports whether n routes event type t: its Types (sorted, as
// the stores keep them) hold it, or it routes every type.
func (n Node) routes(t string) bool {
	if n.Types == nil {
		return true
	}
	_, ok := slices.BinarySearch(n.Types, t)
	return ok
}

// AuditEntry records one operator action (a pause, a resume, a replay, a
// skip, a deletion, a forced DEAD) on the table.
type AuditEntry struct {
	// ID orders the entries: a later entry has a greater id. The store
	// assigns it.
	ID int64
	// At is when the action ran; Actor who ran it (see WithActor).
	At    time.Time
	Actor string
	// Action names it: "pause", "resume", "replay", "skip", "delete",
	// "force-dead", "skip-head".
	Action string
	// Target says what it applied to: a scope, event ids, or a filter.
	Target string
	// Reason is the operator's reason, if one was given.
	Reason string
	// Count is how many events it changed.
	Count int64
}

// AuditQuery pages through the audit trail, newest first.
type AuditQuery struct {
	// BeforeID returns only entries with an id below it (0: from the newest).
	BeforeID int64
	// Limit caps the entries returned (default 100).
	Limit int
}

// Controls is what a Store keeps beside the outbox table for the
// instances that share it and for their operators: stored pauses, the
// live instances, and the audit trail. The SQL stores and outboxmem
// implement it. With a Store that does not, nothing is ever paused, each
// instance takes the whole of a limit, and the operator methods of Client
// that need it return ErrUnsupported.
type Controls interface {
	// SetPause stores p, replacing the pause of its scope if there is one.
	SetPause(ctx context.Context, p Pause) error
	// DeletePause removes the pause of scope and reports whether there was one.
	DeletePause(ctx context.Context, scope string) (bool, error)
	// Pauses returns every stored pause, by scope.
	Pauses(ctx context.Context) ([]Pause, error)
	// Beat records n (by its Owner) as seen at n.Seen, and forgets the
	// nodes last seen before forgetBefore.
	Beat(ctx context.Context, n Node, forgetBefore time.Time) error
	// Leave forgets the node owner (its Client closed).
	Leave(ctx context.Context, owner string) error
	// Nodes returns the nodes seen at or after since, by owner.
	Nodes(ctx context.Context, since time.Time) ([]Node, error)
	// AppendAudit records e, assigning its ID, and returns it.
	AppendAudit(ctx context.Context, e AuditEntry) (int64, error)
	// Audit returns the entries q selects, newest first.
	Audit(ctx context.Context, q AuditQuery) ([]AuditEntry, error)
}

// Overrides are the operator's changes to events in any state, beside the
// dead-letter ones of Store (Replay, Skip, Delete). None of them delivers
// anything; each returns how many rows it changed. A row claimed by a
// running delivery is changed all the same: that delivery's outcome is
// then fenced off (see Store).
type Overrides interface {
	// ForceDead moves pending events (NEW or RETRY, claimed or not) to DEAD
	// at now, recording note as their last error.
	ForceDead(ctx context.Context, ids []string, now time.Time, note string) (int64, error)
	// Remove deletes events in any status.
	Remove(ctx context.Context, ids []string) (int64, error)
	// SkipPending moves pending events to DONE at now without delivering
	// them, recording note as their last error: the ordered events of
	// their keys that waited for them go on.
	SkipPending(ctx context.Context, ids []string, now time.Time, note string) (int64, error)
}

type actorKey struct{}

// WithActor returns ctx carrying who acts through it: the operator methods
// of Client record it as the actor of their audit entries and pauses. An
// admin handler sets its authorizer's principal; outboxctl, the user
// running it.
func WithActor(ctx context.Context, who string) context.Context {
	return context.WithValue(ctx, actorKey{}, who)
}

// ActorOf returns the actor ctx carries (WithActor), or, if none, the
// operating system's user running this process, or "unknown". It is made
// fit to store: valid UTF-8 without control characters, at most
// MaxActorLen bytes.
func ActorOf(ctx context.Context) string {
	who, _ := ctx.Value(actorKey{}).(string)
	if who == "" {
		if u, err := user.Current(); err == nil {
			who = "os:" + u.Username
		}
	}
	if who = storableText(who, MaxActorLen); who == "" {
		who = "unknown"
	}
	return who
}

// storableText is s as the control tables store it: storedError's
// cleaning, cut to at most n bytes on a rune boundary.
func storableText(s string, n int) string {
	s = strings.TrimSpace(storedError(s))
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// validScope checks the scope of a pause: PauseAll or an event type name.
func validScope(scope string) error {
	if scope == PauseAll {
		return nil
	}
	if scope == "" || len(scope) > MaxEventTypeLen || storableText(scope, MaxEventTypeLen) != scope {
		return fmt.Errorf("%w: a pause's scope is an event type of 1 to %d printable characters without edge spaces, or %q; got %q",
			ErrInvalidConfig, MaxEventTypeLen, PauseAll, scope)
	}
	return nil
}

// controls returns the Store's Controls, or ErrUnsupported.
func (c *Client) controls() (Controls, error) {
	ctl, ok := c.cfg.Store.(Controls)
	if !ok {
		return nil, fmt.Errorf("%w: the Store (%T) keeps no control tables", ErrUnsupported, c.cfg.Store)
	}
	return ctl, nil
}

// Pause stops the delivery of the events of type scope (an event type's
// name), or of every event with PauseAll, on every Client that delivers
// from the table, until Resume: they are not claimed, the hot path leaves
// them to the pollers, and those already queued are given back unstarted,
// their attempts unused. Other instances obey within a second or so (see
// docs/operations.md); a pause is stored, so it outlives restarts.
// Ordered keys keep their order: a key whose first pending event is
// paused waits. The actor (WithActor), the time and reason are stored
// with the pause and in the audit trail. Pausing a scope again replaces
// its reason.
func (c *Client) Pause(ctx context.Context, scope, reason string) error {
	if err := validScope(scope); err != nil {
		return err
	}
	ctl, err := c.controls()
	if err != nil {
		return err
	}
	p := Pause{Scope: scope, By: ActorOf(ctx), Reason: storableText(reason, MaxReasonLen), At: utcNow(c.cfg.Clock)}
	if err := ctl.SetPause(ctx, p); err != nil {
		return fmt.Errorf("outbox: pause %s: %w", scope, err)
	}
	c.paused(ctx)
	c.record(ctx, AuditEntry{Action: "pause", Target: scope, Reason: p.Reason, Count: 1})
	return nil
}

// Resume removes the pause of scope (see Pause); the events it held are
// delivered again. It fails with ErrNotFound if scope is not paused.
func (c *Client) Resume(ctx context.Context, scope string) error {
	if err := validScope(scope); err != nil {
		return err
	}
	ctl, err := c.controls()
	if err != nil {
		return err
	}
	ok, err := ctl.DeletePause(ctx, scope)
	if err != nil {
		return fmt.Errorf("outbox: resume %s: %w", scope, err)
	}
	if !ok {
		return fmt.Errorf("%w: %s is not paused", ErrNotFound, scope)
	}
	c.paused(ctx)
	c.record(ctx, AuditEntry{Action: "resume", Target: scope, Count: 1})
	return nil
}

// Pauses returns the stored pauses, by scope.
func (c *Client) Pauses(ctx context.Context) ([]Pause, error) {
	ctl, err := c.controls()
	if err != nil {
		return nil, err
	}
	return ctl.Pauses(ctx)
}

// Audit returns the operator actions q selects, newest first.
func (c *Client) Audit(ctx context.Context, q AuditQuery) ([]AuditEntry, error) {
	ctl, err := c.controls()
	if err != nil {
		return nil, err
	}
	if q.Limit <= 0 {
		q.Limit = 100
	}
	return ctl.Audit(ctx, q)
}

// ForceDead moves pending events (NEW or RETRY, claimed or not) to DEAD
// at once, undelivered, with ForcedNote and reason as their last error,
// and returns how many it moved; ids in any other status are left alone.
// A delivery running meanwhile stores nothing. It is recorded in the
// audit trail.
func (c *Client) ForceDead(ctx context.Context, reason string, ids ...string) (int64, error) {
	return c.override(ctx, AuditEntry{Action: "force-dead", Target: idsTarget(ids), Reason: reason},
		func(o Overrides, now time.Time, reason string) (int64, error) {
			return o.ForceDead(ctx, ids, now, withReason(ForcedNote, reason))
		})
}

// DeleteEvents removes events in any status for good and returns how many
// it removed. Deleting an ordered event lets the later events of its key
// go on. It is recorded in the audit trail; DeadEvents.Delete removes
// DEAD events only.
func (c *Client) DeleteEvents(ctx context.Context, reason string, ids ...string) (int64, error) {
	return c.override(ctx, AuditEntry{Action: "delete", Target: idsTarget(ids), Reason: reason},
		func(o Overrides, _ time.Time, _ string) (int64, error) { return o.Remove(ctx, ids) })
}

// SkipHead gives up a pending event without delivering it: it becomes
// DONE with SkipNote and reason as its last error, so that the later
// events of its ordering key go on. It fails with ErrNotFound if id is not
// pending. (A DEAD head is skipped with DeadEvents.Skip.) It is recorded
// in the audit trail.
func (c *Client) SkipHead(ctx context.Context, id, reason string) error {
	n, err := c.override(ctx, AuditEntry{Action: "skip-head", Target: id, Reason: reason},
		func(o Overrides, now time.Time, reason string) (int64, error) {
			return o.SkipPending(ctx, []string{id}, now, withReason(SkipNote, reason))
		})
	if err == nil && n == 0 {
		return fmt.Errorf("%w: no pending event with id %s", ErrNotFound, id)
	}
	return err
}

// override runs change, an operator's change of events through the
// Store's Overrides at the current time with e's reason made storable,
// wakes the poller if events changed (ordered events may go on), and
// records e in the audit trail with the count.
func (c *Client) override(ctx context.Context, e AuditEntry, change func(o Overrides, now time.Time, reason string) (int64, error)) (int64, error) {
	o, ok := c.cfg.Store.(Overrides)
	if !ok {
		return 0, fmt.Errorf("%w: the Store (%T) has no overrides", ErrUnsupported, c.cfg.Store)
	}
	e.Reason = storableText(e.Reason, MaxReasonLen)
	n, err := change(o, utcNow(c.cfg.Clock), e.Reason)
	if err != nil {
		return n, fmt.Errorf("outbox: %s: %w", e.Action, err)
	}
	if n > 0 {
		c.dead.woke(n)
		e.Count = n
		c.record(ctx, e)
	}
	return n, nil
}

// ForcedNote is the last error of an event an operator moved to DEAD
// (Client.ForceDead), followed by their reason.
const ForcedNote = "outbox: moved to DEAD by an operator"

// withReason returns note, followed by reason if there is one, cut to
// MaxErrorLen.
func withReason(note, reason string) string {
	if reason != "" {
		note += ": " + reason
	}
	return TruncateError(note)
}

// idsTarget is an audit entry's target of a list of event ids: the first
// few, and how many more.
func idsTarget(ids []string) string {
	const shown = 5
	if len(ids) <= shown {
		return "ids " + strings.Join(ids, ",")
	}
	return fmt.Sprintf("ids %s and %d more", strings.Join(ids[:shown], ","), len(ids)-shown)
}

// record appends e to the audit trail, with the actor of ctx and the
// time, when the Store keeps one. An action that was done is not undone
// by a failed record: the failure is logged.
func (c *Client) record(ctx context.Context, e AuditEntry) {
	ctl, ok := c.cfg.Store.(Controls)
	if !ok {
		return
	}
	e.At, e.Actor = utcNow(c.cfg.Clock), ActorOf(ctx)
	e.Target = storableText(e.Target, MaxReasonLen)
	if _, err := ctl.AppendAudit(context.WithoutCancel(ctx), e); err != nil {
		c.cfg.Logger.Error("outbox: could not record an operator action in the audit trail", "action", e.Action, "target", e.Target, "error", err)
	}
}

// paused tells this Client's engine that the stored pauses changed, so
// that it reads them at once rather than at its next refresh.
func (c *Client) paused(ctx context.Context) {
	if c.control != nil {
		c.control.refresh(ctx)
	}
}
