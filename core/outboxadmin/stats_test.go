package outboxadmin_test

import (
	"slices"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxadmin"
)

func TestStatsJSON(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		st   outbox.Stats
		want string
	}{
		{"empty", outbox.Stats{}, `{
  "counts": {
    "DEAD": 0,
    "DONE": 0,
    "NEW": 0,
    "RETRY": 0
  },
  "total": 0,
  "done_estimated": false,
  "pending": 0,
  "due": 0,
  "oldest_pending_at": null,
  "oldest_pending_age_seconds": null,
  "claimed": 0
}`},
		{"busy", outbox.Stats{
			ByStatus:         map[outbox.Status]int64{outbox.StatusNew: 3, outbox.StatusRetry: 2, outbox.StatusDead: 1, outbox.Status(9): 4},
			Due:              4,
			DeadBySubscriber: map[string]int64{"mail": 1},
			OldestPending:    now.Add(-90*time.Second - 500*time.Millisecond).In(time.FixedZone("JST", 9*3600)),
		}, `{
  "counts": {
    "DEAD": 1,
    "DONE": 0,
    "NEW": 3,
    "RETRY": 2,
    "Status(9)": 4
  },
  "total": 10,
  "done_estimated": false,
  "pending": 5,
  "due": 4,
  "dead_by_subscriber": {
    "mail": 1
  },
  "oldest_pending_at": "2026-03-01T11:58:29.5Z",
  "oldest_pending_age_seconds": 90.5,
  "claimed": 0
}`},
		// A clock behind the database's: the age is zero, never negative.
		{"ahead", outbox.Stats{ByStatus: map[outbox.Status]int64{outbox.StatusNew: 1}, OldestPending: now.Add(time.Second)}, `{
  "counts": {
    "DEAD": 0,
    "DONE": 0,
    "NEW": 1,
    "RETRY": 0
  },
  "total": 1,
  "done_estimated": false,
  "pending": 1,
  "due": 0,
  "oldest_pending_at": "2026-03-01T12:00:01Z",
  "oldest_pending_age_seconds": 0,
  "claimed": 0
}`},
		// Claimed rows, and a type no live instance routes.
		{"unrouted", outbox.Stats{ByStatus: map[outbox.Status]int64{outbox.StatusNew: 3}, Claimed: 1,
			Unrouted: []outbox.TypeBacklog{{Type: "LegacyEvent", Pending: 2, Oldest: now.Add(-time.Hour)}}}, `{
  "counts": {
    "DEAD": 0,
    "DONE": 0,
    "NEW": 3,
    "RETRY": 0
  },
  "total": 3,
  "done_estimated": false,
  "pending": 3,
  "due": 0,
  "oldest_pending_at": null,
  "oldest_pending_age_seconds": null,
  "claimed": 1,
  "unrouted": [
    {
      "type": "LegacyEvent",
      "pending": 2,
      "oldest": "2026-03-01T11:00:00Z"
    }
  ]
}`},
		// A large table's DONE rows counted from statistics.
		{"estimated", outbox.Stats{ByStatus: map[outbox.Status]int64{outbox.StatusDone: 1200000, outbox.StatusDead: 2}, DoneEstimated: true}, `{
  "counts": {
    "DEAD": 2,
    "DONE": 1200000,
    "NEW": 0,
    "RETRY": 0
  },
  "total": 1200002,
  "done_estimated": true,
  "pending": 0,
  "due": 0,
  "oldest_pending_at": null,
  "oldest_pending_age_seconds": null,
  "claimed": 0
}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := indent(t, outboxadmin.NewStats(tc.st, now)); got != tc.want {
				t.Errorf("JSON:\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestStatuses(t *testing.T) {
	got := outboxadmin.Statuses()
	want := []outbox.Status{outbox.StatusNew, outbox.StatusRetry, outbox.StatusDone, outbox.StatusDead}
	if !slices.Equal(got, want) {
		t.Fatalf("Statuses() = %v, want %v", got, want)
	}
	got[0] = outbox.StatusDead // a copy: the next caller gets the list intact
	if again := outboxadmin.Statuses(); !slices.Equal(again, want) {
		t.Fatalf("Statuses() after a caller changed its copy = %v", again)
	}
}
