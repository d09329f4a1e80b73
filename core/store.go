package outbox

import (
	"context"
	"fmt"
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
}

// ClaimRequest describes one claim: take up to Limit due, pending events for Owner.
type ClaimRequest struct {
	// Owner is the claiming dispatcher's owner id (unique per process start).
	Owner string
	// Now is the current time from the framework's Clock.
	Now time.Time
	// Lease is how long a claim protects a row: rows claimed by another
	// owner longer ago than Lease are claimable again.
	Lease time.Duration
	// OwnReclaimAfter makes rows already claimed by Owner claimable again
	// once their claim is this old: rows the hot path inserted claimed but
	// could not enqueue. Zero disables it.
	OwnReclaimAfter time.Duration
	// SkipRecent leaves out events created less than this long ago.
	SkipRecent time.Duration
	// Limit is the maximum number of rows claimed.
	Limit int
}

// Query selects stored events for inspection and dead-letter management.
type Query struct {
	// Statuses to include; empty means all.
	Statuses []Status
	// IDs, when not empty, selects only these event ids.
	IDs []string
	// AggregateType and EventType filter when not empty.
	AggregateType string
	EventType     string
	// AfterID returns only events with an id greater than this (keyset paging).
	AfterID string
	// Limit caps the rows returned by List (default 100). Count ignores it.
	Limit int
}

// Stats summarises the outbox table.
type Stats struct {
	// ByStatus counts rows per status.
	ByStatus map[Status]int64
	// OldestPending is the creation time of the oldest NEW or RETRY row
	// (zero if none).
	OldestPending time.Time
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
	// available at max(now, AvailableAt). tx comes from the TxContext the
	// store works with; a Tx of another kind is an error wrapping
	// ErrInvalidConfig. When owner is not empty, events that are not Delayed
	// are inserted already claimed by owner (the hot path owns its rows).
	// An id that is already stored, or that appears twice in events, fails
	// the insert with an error wrapping ErrDuplicateEvent; none of the
	// events is then inserted and tx stays usable.
	Insert(ctx context.Context, tx Tx, now time.Time, owner string, events []Envelope) error
	// Claim atomically claims due pending events, oldest due first. A row
	// claimed by another owner whose lease expired is taken over: its last
	// error is set to ErrClaimExpired's text (its attempts are not changed:
	// its previous owner may never have started it). A row re-claimed by its
	// own owner (OwnReclaimAfter) keeps its claim time: re-claiming never
	// renews a lease.
	Claim(ctx context.Context, req ClaimRequest) ([]Record, error)
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
	// so that an event whose listener kills its process reaches DEAD. It
	// reports whether the row changed.
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
	// Stats counts events by status and finds the oldest pending one.
	Stats(ctx context.Context) (Stats, error)
	// Replay moves DEAD events back to NEW with zero attempts, due at now and
	// unclaimed, and returns how many rows changed.
	Replay(ctx context.Context, ids []string, now time.Time) (int64, error)
}

// Purger deletes terminal events.
type Purger interface {
	// Purge deletes at most limit events in status (StatusDone or
	// StatusDead) whose completion time (or creation time, if none) is
	// before before, and returns how many.
	Purge(ctx context.Context, status Status, before time.Time, limit int) (int64, error)
}
