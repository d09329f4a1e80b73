package outbox

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Status is the delivery state of a stored event.
type Status int8

// The stored statuses. NEW and RETRY are pending; DONE and DEAD are terminal.
const (
	StatusNew   Status = 0
	StatusDone  Status = 1
	StatusRetry Status = 2
	StatusDead  Status = 3
)

// String returns NEW, DONE, RETRY or DEAD.
func (s Status) String() string {
	switch s {
	case StatusNew:
		return "NEW"
	case StatusDone:
		return "DONE"
	case StatusRetry:
		return "RETRY"
	case StatusDead:
		return "DEAD"
	}
	return fmt.Sprintf("Status(%d)", int8(s))
}

// MaxErrorLen is how many characters of an error message are stored.
const MaxErrorLen = 4000

// TruncateError shortens s to MaxErrorLen characters (not bytes), so stored
// error text stays valid UTF-8.
func TruncateError(s string) string {
	if len(s) <= MaxErrorLen {
		return s
	}
	n := 0
	for i := range s {
		if n == MaxErrorLen {
			return s[:i]
		}
		n++
	}
	return s
}

// Record is a stored event with its delivery state.
type Record struct {
	ID string
	// Envelope is the decoded event; it is valid only when Err is nil.
	Envelope Envelope
	// Err is set when the row could not be decoded into an Envelope (for
	// example corrupt headers). The poller sends such rows to DEAD.
	Err         error
	Status      Status
	Attempts    int
	CreatedAt   time.Time
	AvailableAt time.Time
	DoneAt      time.Time // zero unless DONE or DEAD
	LastError   string
	LockedBy    string
	LockedAt    time.Time
	// Seq is the event's place in the table's insertion sequence: of two
	// ordered events of one key (see Envelope.OrderingKey), the one with
	// the lower Seq is the earlier. Sequence numbers are assigned at insert
	// and increase; they may have gaps.
	Seq int64
	// Subscribers are the subscribers (Registry.Subscribe) the event
	// still owes, sorted, since a delivery in which only they failed: its
	// retries, and a replay, run only them. Nil means every listener of
	// its route. A DONE event keeps the last ones it owed, for the record.
	Subscribers []string
}

// ClaimRequest describes one claim: take up to Limit due, pending events for Owner.
type ClaimRequest struct {
	// Owner is the claiming dispatcher's owner id (unique per process start).
	Owner string
	// Now is the current time from the framework's Clock.
	Now time.Time
	// Lease is how long a claim protects a row: a row whose claim was
	// neither made nor renewed (Renew) in the last Lease, by Now, is taken
	// over. A Client asks for Config.Lease plus Config.MaxClockSkew: the
	// claim times were written with other instances' clocks.
	Lease time.Duration
	// SkipRecent leaves out events created less than this long ago.
	SkipRecent time.Duration
	// Limit is the maximum number of rows claimed.
	Limit int
	// NoRecovery leaves expired claims alone: the claim takes due,
	// unclaimed rows only. Pollers recover about once a second, not at
	// every claim: a recovery reads the claimed rows by claim time from the
	// oldest, and until the table is vacuumed (PostgreSQL) or purged
	// (InnoDB) that includes an index entry for every row claimed and
	// finished since — a cost a draining poller would pay per claim.
	NoRecovery bool
	// Ordered claims events stored with an ordering key (see
	// Envelope.Ordered) only when they are the first event of their key
	// that is not DONE (and, with DeadSkips, not DEAD): at most one event
	// of a key is claimed at a time, in their Seq order. A claim that is
	// not Ordered leaves such events alone (it still recovers expired
	// claims of any event).
	Ordered bool
	// DeadSkips lets the events of a key whose earlier event is DEAD be
	// claimed (DeadSkipsKey); by default a DEAD event holds back the later
	// events of its key (DeadBlocksKey).
	DeadSkips bool
	// Run is the most events of one key an Ordered claim takes (≤1: the
	// head alone): the head and the events that follow it on its key, in
	// Seq order, each pending, unclaimed, due and let through by the type
	// filters, up to the first that is not. The events of one key in a
	// claim's result are such a run, and are to be delivered in Seq order
	// by one worker, each once the one before it is DONE. The recovery of
	// expired claims takes an ordered event only while nothing earlier of
	// its key is pending (a run's claims expire together: its later events
	// wait for the earlier ones, whoever recovers them).
	Run int
	// Types, when not nil, claims only events of these event types (the
	// types a Client routes); an empty, non-nil Types claims nothing.
	// SkipTypes leaves out events of these types (paused, or held back by
	// a circuit breaker or a limit). Both apply to recovered claims too,
	// and an ordered claim applies them to the head of each key only: a
	// key whose head is left out waits, its later events unclaimed.
	// Each carries at most MaxClaimTypes distinct types; a Store may
	// refuse more.
	Types     []string
	SkipTypes []string
}

// RunContinuer is implemented by a Store that continues the runs of an
// ordered claim (ClaimRequest.Run) without a new claim. A worker that
// reaches the last event of a full run asks for the events that follow it
// on its key while that event's DONE is being stored, and delivers them
// next, each once the one before it is DONE — the key's events go on
// without a walk of the keys, and without waiting for the next poll.
// Without it, a key goes on with the next claim of a poller.
type RunContinuer interface {
	// ContinueRuns claims, for each tail, the events that follow it on
	// its key in Seq order, each pending, unclaimed, due and let through
	// by req's type filters, up to the first that is not and at most
	// req.Run, as Run takes a head's run; req.Limit bounds the events in
	// all. It claims nothing else and recovers no expired claim. A tail's
	// event is this owner's, DONE or about to be: no other claim takes
	// an event of its key meanwhile (it is no head), and once it is DONE
	// the events that follow it compete with the claims of any instance,
	// whose lock tells them apart. It takes nothing after a tail that an
	// open event of its key comes before — pending (an event replayed
	// since), or with req.DeadSkips false one that is not DONE: that
	// event goes first, as a head. The records come grouped by key, each
	// run in Seq order.
	ContinueRuns(ctx context.Context, req ClaimRequest, tails []RunTail) ([]Record, error)
}

// RunTail is the last event of a run an owner holds: its ordering key and
// its Seq (see RunContinuer).
type RunTail struct {
	Key string
	Seq int64
}

// MaxClaimTypes bounds the distinct event types of a ClaimRequest's Types
// and of its SkipTypes: the SQL stores read a claim of some types once per
// type, and bind its types one parameter each on most databases.
const MaxClaimTypes = 256

// Query selects stored events for inspection and dead-letter management.
type Query struct {
	// Statuses to include; empty means all.
	Statuses []Status
	// IDs, when not empty, selects only these event ids.
	IDs []string
	// AggregateType and EventType filter when not empty.
	AggregateType string
	EventType     string
	// TenantID, when not empty, selects only the events of this tenant
	// (Envelope.TenantID); empty selects the events of every tenant, and
	// those without one. SQL stores serve a tenant's queries from an index
	// of the events that carry a tenant (see docs/tenants.md).
	TenantID string
	// AfterID returns only events with an id greater than this (keyset paging).
	AfterID string
	// Limit caps the rows returned by List (default 100). Count ignores it.
	Limit int
	// Blocking selects only DEAD events that hold back their ordering key:
	// each is the first event of its key that is not DONE (see
	// Config.Ordered and DeadBlocksKey).
	Blocking bool
}

// Stats summarises the outbox table.
type Stats struct {
	// ByStatus counts rows per status. The NEW, RETRY and DEAD figures
	// are exact; the DONE figure is an estimate when DoneEstimated is set.
	ByStatus map[Status]int64
	// DoneEstimated reports that ByStatus[StatusDone] is an estimate, not
	// a count: DONE rows are nearly the whole of a large table, and a
	// Store may derive their number from the table's size as the database
	// keeps it (its statistics, or the range of its insertion sequence)
	// less the other statuses, so that Stats reads the pending and DEAD
	// rows only, never the whole table. The in-memory Store counts exactly.
	DoneEstimated bool
	// Due counts the NEW and RETRY rows due at the time given to Stats
	// (available at or before it), claimed or not: the work a poller
	// would take now. The other pending rows wait for a delay or a retry's
	// backoff.
	Due int64
	// DeadBySubscriber counts the DEAD events that owe each subscriber
	// (Record.Subscribers), by subscriber name; nil when none does.
	DeadBySubscriber map[string]int64
	// OldestPending is the creation time of the oldest NEW or RETRY row
	// (zero if none).
	OldestPending time.Time
	// BlockedKeys counts the ordering keys whose first event that is not
	// DONE is DEAD: with Config.Ordered and DeadBlocksKey, every later
	// event of such a key waits until that event is replayed or skipped
	// (DeadEvents.Replay, DeadEvents.Skip). Query.Blocking lists them.
	BlockedKeys int64
	// OldestBlocked is when the longest-blocked key's DEAD event ended (zero
	// if no key is blocked).
	OldestBlocked time.Time
	// Claimed counts the pending rows that are claimed: queued or being
	// delivered by some instance.
	Claimed int64
	// Types is the pending backlog per event type, most pending first, at
	// most MaxStatsTypes of them (TypesTruncated says some were left out).
	Types          []TypeBacklog
	TypesTruncated bool
	// Unrouted (Client.Stats only) are the entries of Types that no live
	// instance on the table routes (see Node): they stay pending until one
	// does.
	Unrouted []TypeBacklog
	// Horizon (Client.Stats only) is the horizon guard's latest report on
	// the table's storage (see HorizonReporter): nil when the Store has no
	// horizon, the guard is off (Config.HorizonInterval) or could not read
	// it.
	Horizon *HorizonReport
}

// MaxStatsTypes bounds Stats.Types: event types come from the table's
// writers, which a reader does not control.
const MaxStatsTypes = 200

// MaxNodeTypes bounds the event types the stores keep of a Node
// (Controls.Beat): a Node that routes more is kept as one that routes
// every type (Types nil). Its list serves reports and shares, never what
// it claims: while it lives no type is reported unrouted, and it is
// counted in the share of every route's limits, which only lowers the
// others' shares.
const MaxNodeTypes = 1000

// TypeBacklog is the pending backlog of one event type.
type TypeBacklog struct {
	Type string
	// Pending counts its NEW and RETRY rows; Oldest is the creation time
	// of the oldest.
	Pending int64
	Oldest  time.Time
}

// Outcome is a fenced status update of one claimed event: it applies only
// while Owner still holds the claim on ID.
type Outcome struct {
	// Owner is the claim's owner id.
	Owner string
	// ID is the event id.
	ID string
	// At is when the event is due again (MarkRetry) or when it ended (MarkDead).
	At time.Time
	// Error is the failure to record; stores keep MaxErrorLen characters.
	Error string
	// CountAttempt increments the event's attempts.
	CountAttempt bool
	// Subscribers (MarkRetry, MarkDead) are the subscribers the event
	// still owes from now on (Record.Subscribers); nil stores none.
	Subscribers []string
}

// Store persists outbox events. It owns its connection pool: only Insert
// runs in the caller's transaction, every other method on the store's own
// connections. Implementations must be safe for concurrent use, and take
// every timestamp from the caller (the framework's Clock), never from the
// database.
//
// Status updates are fenced: MarkDone, MarkRetry, MarkDead and Release change
// a row only while it is still claimed by the given owner, so a worker whose
// claim expired and was taken over changes nothing.
type Store interface {
	// Insert adds events as NEW in the transaction tx, created at now and
	// available at max(now, AvailableAt), numbered in the order of events
	// by the table's insertion sequence (Record.Seq); ordered events
	// (Envelope.Ordered) are stored with their OrderingKey. tx comes from
	// the TxContext the store works with; a Tx of another kind is an error
	// wrapping ErrInvalidConfig. When owner is not empty, events that are not Delayed
	// are inserted already claimed by owner (the hot path owns its rows).
	// An id that is already stored, or that appears twice in events, fails
	// the insert with an error wrapping ErrDuplicateEvent; none of the
	// events is then inserted and tx stays usable.
	Insert(ctx context.Context, tx Tx, now time.Time, owner string, events []Envelope) error
	// Claim atomically claims up to req.Limit events for req.Owner: first
	// pending events whose claim expired (claimed or renewed more than
	// req.Lease ago, by any owner, req.Owner included), then due unclaimed
	// pending events, oldest due first. A taken-over row records the
	// take-over: its last error is set to ErrClaimExpired's text, unless it
	// is ErrInFlight's (set by CountAttempt: the delivery had started),
	// which it keeps; its attempts are not changed (its previous owner may
	// never have started it). A claimed row must not slow the next claims down: stores index
	// unclaimed and claimed rows apart. With req.Ordered, an ordered event
	// is claimed only as the head of its key (see ClaimRequest.Ordered).
	Claim(ctx context.Context, req ClaimRequest) ([]Record, error)
	// Renew sets the claim time of owner's claimed pending events to now
	// (a heartbeat: their deliveries are still running, or they are
	// queued) and returns how many rows changed.
	Renew(ctx context.Context, owner string, ids []string, now time.Time) (int64, error)
	// MarkDone marks owner's claimed events DONE at now and returns how many
	// rows changed.
	MarkDone(ctx context.Context, owner string, ids []string, now time.Time) (int64, error)
	// MarkRetry makes the event pending again at o.At, recording o.Error. It
	// reports whether the row changed.
	MarkRetry(ctx context.Context, o Outcome) (bool, error)
	// MarkDead moves the event to DEAD at o.At, recording o.Error. It reports
	// whether the row changed.
	MarkDead(ctx context.Context, o Outcome) (bool, error)
	// CountAttempt increments the attempts of owner's claimed event before
	// a delivery that may never end (one taken over, see ErrClaimExpired),
	// so that an event whose listener kills its process reaches DEAD, and
	// sets its last error to ErrInFlight's text: a take-over keeps it, so
	// the next owner knows the delivery was in flight. It reports whether
	// the row changed.
	CountAttempt(ctx context.Context, owner, id string) (bool, error)
	// Release drops owner's claim on pending events so any poller can take
	// them at once (used on shutdown for events that were never delivered).
	Release(ctx context.Context, owner string, ids []string) (int64, error)
	// Get returns one event with its state, or an error wrapping ErrNotFound.
	Get(ctx context.Context, id string) (Record, error)
	// List returns events matching q, ordered by id.
	List(ctx context.Context, q Query) ([]Record, error)
	// Count returns how many events match q.
	Count(ctx context.Context, q Query) (int64, error)
	// Stats counts events by status and the pending ones due at now, and
	// finds the oldest pending one. It must stay cheap on a large table:
	// the DONE figure may be an estimate (Stats.DoneEstimated).
	Stats(ctx context.Context, now time.Time) (Stats, error)
	// Replay moves DEAD events back to NEW with zero attempts, due at now and
	// unclaimed, and returns how many rows changed.
	Replay(ctx context.Context, ids []string, now time.Time) (int64, error)
	// Delete removes DEAD events for good and returns how many rows it
	// removed; ids of events in any other status are left alone.
	Delete(ctx context.Context, ids []string) (int64, error)
	// Skip moves DEAD events to DONE at now without delivering them,
	// recording note as their last error, and returns how many rows
	// changed; ids of events in any other status are left alone. The
	// ordered events of their keys that waited for them go on.
	Skip(ctx context.Context, ids []string, now time.Time, note string) (int64, error)
	// PendingKeys returns which of keys have a stored ordered event that is
	// not DONE (NEW, RETRY, claimed or DEAD), as the transaction tx sees the
	// table (its own inserts included): the writer of an ordered Client
	// claims an event at insert, for its hot path, only if nothing of its
	// key is pending ahead of it.
	PendingKeys(ctx context.Context, tx Tx, keys []string) ([]string, error)
}

// PurgeRequest selects the terminal events one Purge deletes.
type PurgeRequest struct {
	// Status is StatusDone or StatusDead; any other status is an error
	// wrapping ErrInvalidConfig.
	Status Status
	// Before is the cutoff: events whose completion time (or creation
	// time, if none) is before it are deleted.
	Before time.Time
	// Limit is the most events deleted; zero or less deletes none.
	Limit int
	// TenantID, when not empty, deletes only the events of this tenant
	// (Envelope.TenantID); empty deletes those of every tenant.
	TenantID string
}

// Purger deletes terminal events.
type Purger interface {
	// Purge deletes at most req.Limit events in req.Status (StatusDone or
	// StatusDead), of req.TenantID when set, whose completion time (or
	// creation time, if none) is before req.Before, and returns how many.
	Purge(ctx context.Context, req PurgeRequest) (int64, error)
}

// RetentionPurger is a Purger with a cheaper way to apply a retention:
// the PurgeScheduler calls PurgeRetention rather than Purge. It deletes
// events as Purge does, but may keep some of those req selects for a
// while (a table partitioned by time drops a partition only once all its
// events are old enough) and may delete more than req.Limit at once
// (whole partitions); it returns how many it deleted, and the scheduler
// calls it again while that is at least req.Limit.
type RetentionPurger interface {
	Purger
	PurgeRetention(ctx context.Context, req PurgeRequest) (int64, error)
}

// SetTypes sets Types to the backlogs of types, most pending first, then
// by type, at most MaxStatsTypes of them (TypesTruncated when types has
// more), for Stores filling Stats. It reorders types.
func (s *Stats) SetTypes(types []TypeBacklog) {
	slices.SortFunc(types, func(a, b TypeBacklog) int {
		return cmp.Or(cmp.Compare(b.Pending, a.Pending), strings.Compare(a.Type, b.Type))
	})
	s.TypesTruncated = len(types) > MaxStatsTypes
	s.Types = types[:min(len(types), MaxStatsTypes):min(len(types), MaxStatsTypes)]
	if len(s.Types) == 0 {
		s.Types = nil
	}
}

// AddDeadSubscribers adds n DEAD events owing the subscribers names to
// DeadBySubscriber, for Stores filling Stats.
func (s *Stats) AddDeadSubscribers(names []string, n int64) {
	if len(names) == 0 || n == 0 {
		return
	}
	if s.DeadBySubscriber == nil {
		s.DeadBySubscriber = make(map[string]int64, len(names))
	}
	for _, name := range names {
		s.DeadBySubscriber[name] += n
	}
}
