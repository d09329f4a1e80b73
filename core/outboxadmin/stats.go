package outboxadmin

import (
	"slices"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// statuses are the statuses of an event, in the order operator views list
// them: pending first, then the two ends.
var statuses = []outbox.Status{outbox.StatusNew, outbox.StatusRetry, outbox.StatusDone, outbox.StatusDead}

// Statuses returns NEW, RETRY, DONE and DEAD, the order in which operator
// views list an outbox's counts.
func Statuses() []outbox.Status { return slices.Clone(statuses) }

// Stats is the JSON view of outbox.Stats: the events per status, their
// total, how many are pending and since when.
type Stats struct {
	// Counts maps status names to their events: NEW, RETRY, DONE and DEAD
	// always, zero counts included, and any other status a store reports.
	Counts map[string]int64 `json:"counts"`
	// Total counts every event.
	Total int64 `json:"total"`
	// DoneEstimated reports that the DONE count, and so Total, is an
	// estimate (outbox.Stats.DoneEstimated: a store counts a large table's
	// DONE rows from its statistics, not row by row).
	DoneEstimated bool `json:"done_estimated"`
	// Pending counts the NEW and RETRY events.
	Pending int64 `json:"pending"`
	// Due counts the pending events that are due (outbox.Stats.Due).
	Due int64 `json:"due"`
	// DeadBySubscriber counts the DEAD events owing each subscriber
	// (outbox.Stats.DeadBySubscriber); left out when none does.
	DeadBySubscriber map[string]int64 `json:"dead_by_subscriber,omitempty"`
	// OldestPendingAt is when the oldest pending event was created, and
	// OldestPendingAgeSeconds how long ago; both are null when no event is
	// pending.
	OldestPendingAt         *time.Time `json:"oldest_pending_at"`
	OldestPendingAgeSeconds *float64   `json:"oldest_pending_age_seconds"`
	// Claimed counts the pending events claimed by an instance: queued or
	// being delivered (outbox.Stats.Claimed).
	Claimed int64 `json:"claimed"`
	// Unrouted is the pending backlog of the event types that no live
	// instance on the table routes (outbox.Stats.Unrouted, of
	// Client.Stats); left out when there is none.
	Unrouted []TypeBacklog `json:"unrouted,omitempty"`
	// Horizon is the horizon guard's report on the table's storage
	// (outbox.Stats.Horizon, of Client.Stats); left out without one.
	Horizon *Horizon `json:"horizon,omitempty"`
}

// NewStats returns the view of st at time now, which the age of the oldest
// pending event is measured from (never below zero).
func NewStats(st outbox.Stats, now time.Time) Stats {
	out := Stats{Counts: make(map[string]int64, len(statuses)), DoneEstimated: st.DoneEstimated, Due: st.Due, DeadBySubscriber: st.DeadBySubscriber, OldestPendingAt: timePtr(st.OldestPending),
		Claimed: st.Claimed, Unrouted: newTypeBacklogs(st.Unrouted), Horizon: NewHorizon(st.Horizon)}
	for _, s := range statuses {
		out.Counts[s.String()] = 0
	}
	for s, n := range st.ByStatus {
		out.Counts[s.String()] += n
		out.Total += n
	}
	out.Pending = out.Counts[outbox.StatusNew.String()] + out.Counts[outbox.StatusRetry.String()]
	if !st.OldestPending.IsZero() {
		age := max(now.Sub(st.OldestPending), 0).Seconds()
		out.OldestPendingAgeSeconds = &age
	}
	return out
}
