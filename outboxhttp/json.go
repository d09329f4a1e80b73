package outboxhttp

import (
	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxadmin"
)

// infoJSON is the answer of GET api: what the page needs to start.
type infoJSON struct {
	Title string `json:"title"`
	// ReadOnly is true when the handler has no authorizer.
	ReadOnly bool `json:"read_only"`
	// Authorized tells whether this request's user may replay and delete:
	// false when read-only or when Authorize refused the request.
	Authorized bool `json:"authorized"`
	// AuthorizationError is why Authorize refused the request.
	AuthorizationError string       `json:"authorization_error,omitempty"`
	Sources            []sourceJSON `json:"sources"`
}

type sourceJSON struct {
	Name string `json:"name"`
}

// statsJSON is the answer of GET api/{source}/stats.
type statsJSON struct {
	Source string `json:"source"`
	outboxadmin.Stats
}

// eventJSON is one event. Lists leave out its headers and payload; the
// event endpoint has them. Both have payload_size.
type eventJSON = outboxadmin.Event

func toEventJSON(r outbox.Record, full bool) eventJSON {
	return outboxadmin.NewEvent(r, outboxadmin.EventOptions{Payload: full, PayloadSize: true})
}

// listJSON is the answer of the list endpoints.
type listJSON struct {
	Events []eventJSON `json:"events"`
	// NextAfter is set when more events match: pass it as after= for the
	// next page.
	NextAfter string `json:"next_after,omitempty"`
	// Matching counts every DEAD event the filter selects (dead list only).
	Matching *int64 `json:"matching,omitempty"`
}

// changeJSON is the answer of a replay or a delete.
type changeJSON struct {
	Replayed *int64 `json:"replayed,omitempty"`
	Deleted  *int64 `json:"deleted,omitempty"`
	// IDs are the ids the request named (none for a replay of all
	// matching events).
	IDs []string `json:"ids,omitempty"`
}

// idsRequest is the body of POST dead/replay and dead/delete.
type idsRequest struct {
	// IDs names the events; every one must be DEAD.
	IDs []string `json:"ids"`
	// All replays every DEAD event that Type, Aggregate and Tenant select
	// (replay only; instead of IDs).
	All       bool   `json:"all"`
	Type      string `json:"type"`
	Aggregate string `json:"aggregate"`
	Tenant    string `json:"tenant"`
	// DryRun, with All, counts the events the replay would replay, per
	// event type and per tenant, and changes nothing.
	DryRun bool `json:"dry_run"`
}

// planJSON is the answer of a replay's dry run.
type planJSON struct {
	DryRun bool `json:"dry_run"`
	outboxadmin.ReplayPlan
}

// healthJSON is the answer of GET api/{source}/health.
type healthJSON struct {
	Source string `json:"source"`
	outboxadmin.Health
}

// pausesJSON is the answer of GET api/{source}/pauses.
type pausesJSON struct {
	Pauses []outboxadmin.Pause `json:"pauses"`
}

// pauseRequest is the body of POST actions/pause and actions/resume.
type pauseRequest struct {
	// Scope is an event type, or "*" for every type.
	Scope string `json:"scope"`
	// Reason is why (pause only; required).
	Reason string `json:"reason"`
}

// pauseChangeJSON is the answer of a pause or a resume.
type pauseChangeJSON struct {
	Paused  string `json:"paused,omitempty"`
	Resumed string `json:"resumed,omitempty"`
}

// auditJSON is the answer of GET api/{source}/audit.
type auditJSON struct {
	Entries []outboxadmin.AuditEntry `json:"entries"`
	// NextBefore is set when older entries follow: pass it as before=.
	NextBefore int64 `json:"next_before,omitempty"`
}

// actionRequest is the body of POST actions/force-dead, actions/delete
// and actions/skip-head.
type actionRequest struct {
	IDs    []string `json:"ids"`
	Reason string   `json:"reason"`
}

// actionJSON is the answer of an operator action on events.
type actionJSON struct {
	Action  string   `json:"action"`
	Changed int64    `json:"changed"`
	IDs     []string `json:"ids"`
}
