package outboxadmin

import (
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// Horizon is the JSON view of the horizon guard's report on the outbox
// table's storage (outbox.HorizonReport); ages are in seconds, sizes in
// bytes.
type Horizon struct {
	// SampledAt is when the guard read it.
	SampledAt      time.Time  `json:"sampled_at"`
	DeadTuples     int64      `json:"dead_tuples"`
	LiveTuples     int64      `json:"live_tuples"`
	TableBytes     int64      `json:"table_bytes"`
	LastVacuum     *time.Time `json:"last_vacuum,omitempty"`
	LastAutovacuum *time.Time `json:"last_autovacuum,omitempty"`
	// Holders hold the horizon back, oldest first: the oldest of each kind.
	Holders []HorizonHolder `json:"holders"`
	// Hidden counts the sessions whose transactions the store's role may
	// not see.
	Hidden int `json:"hidden_sessions,omitempty"`
	// Warnings are the thresholds passed; empty when all is well.
	Warnings []HorizonWarning `json:"warnings"`
}

// HorizonHolder is the JSON view of an outbox.HorizonHolder.
type HorizonHolder struct {
	Kind  string `json:"kind"`
	PID   int    `json:"pid,omitempty"`
	Name  string `json:"name,omitempty"`
	State string `json:"state,omitempty"`
	// AgeSeconds is 0 when unknown (a slot seen for the first time).
	AgeSeconds float64 `json:"age_seconds"`
	XIDAge     int64   `json:"xid_age"`
}

// HorizonWarning is the JSON view of an outbox.HorizonWarning.
type HorizonWarning struct {
	Check   string `json:"check"`
	Message string `json:"message"`
}

// NewHorizon returns the view of r, nil for none.
func NewHorizon(r *outbox.HorizonReport) *Horizon {
	if r == nil {
		return nil
	}
	out := &Horizon{SampledAt: r.At.UTC(), DeadTuples: r.DeadTuples, LiveTuples: r.LiveTuples, TableBytes: r.TableSize,
		LastVacuum: timePtr(r.LastVacuum), LastAutovacuum: timePtr(r.LastAutovacuum), Hidden: r.Hidden,
		Holders: make([]HorizonHolder, 0, len(r.Holders)), Warnings: make([]HorizonWarning, 0, len(r.Warnings))}
	for _, h := range r.Holders {
		out.Holders = append(out.Holders, HorizonHolder{Kind: h.Kind, PID: h.PID, Name: h.Name, State: h.State,
			AgeSeconds: h.Age.Seconds(), XIDAge: h.XIDAge})
	}
	for _, w := range r.Warnings {
		out.Warnings = append(out.Warnings, HorizonWarning{Check: w.Check, Message: w.Message})
	}
	return out
}
