package outboxadmin

import (
	"cmp"
	"context"
	"slices"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// Pause is the JSON view of a stored pause (outbox.Pause).
type Pause struct {
	// Scope is the paused event type, or "*" for every type.
	Scope  string    `json:"scope"`
	By     string    `json:"by"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// NewPauses returns the views of ps, never nil.
func NewPauses(ps []outbox.Pause) []Pause {
	out := make([]Pause, 0, len(ps))
	for _, p := range ps {
		out = append(out, Pause{Scope: p.Scope, By: p.By, Reason: p.Reason, At: p.At.UTC()})
	}
	return out
}

// AuditEntry is the JSON view of one operator action (outbox.AuditEntry).
type AuditEntry struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	Reason string    `json:"reason,omitempty"`
	Count  int64     `json:"count"`
}

// NewAudit returns the views of es, in their order, never nil.
func NewAudit(es []outbox.AuditEntry) []AuditEntry {
	out := make([]AuditEntry, 0, len(es))
	for _, e := range es {
		out = append(out, AuditEntry{ID: e.ID, At: e.At.UTC(), Actor: e.Actor, Action: e.Action, Target: e.Target, Reason: e.Reason, Count: e.Count})
	}
	return out
}

// Route is the JSON view of a route's delivery state (outbox.RouteState).
type Route struct {
	Type     string     `json:"type"`
	Breaker  string     `json:"breaker"`
	Failures int        `json:"failures"`
	OpenedAt *time.Time `json:"opened_at,omitempty"`
	Opens    int64      `json:"opens"`
	Paused   bool       `json:"paused"`
	// Rate and Concurrency are the Client's share of the route's limits
	// (0: none); InFlight its deliveries of the route now.
	Rate        float64 `json:"rate,omitempty"`
	Concurrency int     `json:"concurrency,omitempty"`
	InFlight    int     `json:"in_flight"`
}

// Health is the JSON view of a Client's health (outbox.Health); ages are
// in seconds.
type Health struct {
	Started bool   `json:"started"`
	Mode    string `json:"mode"`
	Owner   string `json:"owner"`
	// LastPollAt is null before the first successful poll.
	LastPollAt         *time.Time `json:"last_poll_at"`
	LastPollAgeSeconds *float64   `json:"last_poll_age_seconds"`
	LastError          string     `json:"last_error,omitempty"`
	LastErrorAt        *time.Time `json:"last_error_at,omitempty"`
	// OldestPendingAgeSeconds is 0 when nothing is pending.
	OldestPendingAgeSeconds float64 `json:"oldest_pending_age_seconds"`
	Dead                    int64   `json:"dead"`
	BlockedKeys             int64   `json:"blocked_keys"`
	Paused                  []Pause `json:"paused"`
	Routes                  []Route `json:"routes"`
	Nodes                   int     `json:"nodes"`
	// OpenBreakers counts the routes whose breaker is not closed.
	OpenBreakers int `json:"open_breakers"`
	// Horizon is the horizon guard's report (PostgreSQL), left out
	// without one; its warnings do not make the Client unready.
	Horizon *Horizon `json:"horizon,omitempty"`
}

// NewHealth returns the view of h.
func NewHealth(h outbox.Health) Health {
	out := Health{Started: h.Started, Mode: h.Mode, Owner: h.Owner, LastPollAt: timePtr(h.LastPoll), LastError: h.LastError,
		LastErrorAt: timePtr(h.LastErrorAt), OldestPendingAgeSeconds: h.OldestPendingAge.Seconds(), Dead: h.Dead,
		BlockedKeys: h.BlockedKeys, Paused: NewPauses(h.Paused), Routes: make([]Route, 0, len(h.Routes)), Nodes: h.Nodes,
		Horizon: NewHorizon(h.Horizon)}
	if !h.LastPoll.IsZero() {
		age := h.LastPollAge.Seconds()
		out.LastPollAgeSeconds = &age
	}
	for _, r := range h.Routes {
		out.Routes = append(out.Routes, Route{Type: r.Type, Breaker: r.Breaker, Failures: r.Failures, OpenedAt: timePtr(r.OpenedAt),
			Opens: r.Opens, Paused: r.Paused, Rate: r.Rate, Concurrency: r.Concurrency, InFlight: r.InFlight})
		if r.Breaker != "" && r.Breaker != outbox.BreakerClosed {
			out.OpenBreakers++
		}
	}
	return out
}

// TypeBacklog is the JSON view of an event type's pending backlog
// (outbox.TypeBacklog).
type TypeBacklog struct {
	Type    string     `json:"type"`
	Pending int64      `json:"pending"`
	Oldest  *time.Time `json:"oldest,omitempty"`
}

// newTypeBacklogs returns the views of ts, nil for none.
func newTypeBacklogs(ts []outbox.TypeBacklog) []TypeBacklog {
	var out []TypeBacklog
	for _, t := range ts {
		out = append(out, TypeBacklog{Type: t.Type, Pending: t.Pending, Oldest: timePtr(t.Oldest)})
	}
	return out
}

// MaxPlanKeys bounds the event types and the tenants a ReplayPlan counts
// one by one: they come from the table's writers. The others are counted
// together (ReplayPlan.OtherTypes, OtherTenants).
const MaxPlanKeys = 100

// Count is how many events one event type or one tenant has in a
// ReplayPlan.
type Count struct {
	Name   string `json:"name"`
	Events int64  `json:"events"`
}

// ReplayPlan is a dry run of a replay: how many DEAD events it would
// make pending again, of which event types and tenants. Add counts one
// event; Done sorts the counts into Types and Tenants.
type ReplayPlan struct {
	// Events counts every event added.
	Events int64 `json:"events"`
	// Types and Tenants count the events per event type and per tenant
	// (the empty tenant is ""), at most MaxPlanKeys of each, most events
	// first; OtherTypes and OtherTenants count the events of the rest.
	Types        []Count `json:"types"`
	Tenants      []Count `json:"tenants"`
	OtherTypes   int64   `json:"other_types,omitempty"`
	OtherTenants int64   `json:"other_tenants,omitempty"`

	types, tenants map[string]int64
}

// Add counts rec (an event that cannot be decoded has type "?").
func (p *ReplayPlan) Add(rec outbox.Record) {
	if p.types == nil {
		p.types, p.tenants = map[string]int64{}, map[string]int64{}
	}
	p.Events++
	typ, tenant := "?", ""
	if rec.Err == nil {
		typ, tenant = rec.Envelope.Type(), rec.Envelope.TenantID()
	}
	p.OtherTypes += addBounded(p.types, typ)
	p.OtherTenants += addBounded(p.tenants, tenant)
}

// Done fills Types and Tenants from the events added, and returns p.
func (p *ReplayPlan) Done() ReplayPlan {
	p.Types, p.Tenants = sortedCounts(p.types), sortedCounts(p.tenants)
	return *p
}

// addBounded counts key in m, unless m is full and lacks it: then it
// returns 1, the event to count among the others.
func addBounded(m map[string]int64, key string) int64 {
	if _, ok := m[key]; !ok && len(m) >= MaxPlanKeys {
		return 1
	}
	m[key]++
	return 0
}

func sortedCounts(m map[string]int64) []Count {
	out := make([]Count, 0, len(m))
	for k, n := range m {
		out = append(out, Count{Name: k, Events: n})
	}
	slices.SortFunc(out, func(a, b Count) int { return cmp.Or(cmp.Compare(b.Events, a.Events), cmp.Compare(a.Name, b.Name)) })
	return out
}

// PlanReplay is the dry run of dead.ReplayAll(ctx, q): it pages through
// the DEAD events q selects (q.Limit a page, 500 by default) and counts
// them, changing nothing.
func PlanReplay(ctx context.Context, dead *outbox.DeadEvents, q outbox.Query) (ReplayPlan, error) {
	var p ReplayPlan
	if q.Limit <= 0 {
		q.Limit = idBatch
	}
	for {
		recs, err := dead.List(ctx, q)
		if err != nil {
			return p.Done(), err
		}
		for _, r := range recs {
			p.Add(r)
		}
		if len(recs) < q.Limit {
			return p.Done(), nil
		}
		q.AfterID = recs[len(recs)-1].ID
	}
}
