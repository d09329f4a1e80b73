package outbox

import (
	"context"
	"fmt"
	"time"
)

// Health is a Client's view of itself and of its table, for liveness and
// readiness probes and for operators (Client.Health).
type Health struct {
	// Started reports that Start ran and Close did not.
	Started bool
	// Mode is the Client's Mode, by name; Owner its owner id.
	Mode  string
	Owner string
	// LastPoll is when the poller last claimed without an error (zero
	// before the first, and without a poller); LastPollAge its age.
	LastPoll    time.Time
	LastPollAge time.Duration
	// LastError is the last database error of the poller or of the
	// control refresh (the later of the two), and LastErrorAt when it
	// happened; an error is forgotten once its part succeeds again.
	LastError   string
	LastErrorAt time.Time
	// OldestPendingAge is the age of the oldest NEW or RETRY event, Dead
	// the count of DEAD events, BlockedKeys the ordering keys a DEAD event
	// holds back: from the latest backlog sample (Config.MetricsInterval)
	// or a fresh Stats.
	OldestPendingAge time.Duration
	Dead             int64
	BlockedKeys      int64
	// Paused are the stored pauses; Routes the state of each route that
	// has a circuit breaker or a limit, or is paused.
	Paused []Pause
	Routes []RouteState
	// Nodes counts the live instances on the table (see Node).
	Nodes int
	// Horizon is the horizon guard's latest report on the table's storage,
	// as in Stats.Horizon (nil without one). Its Warnings are warnings:
	// the Client works on, and they do not make it unready (restarting it
	// would not end another session's transaction), but the table bloats
	// until they are dealt with (see docs/operations.md).
	Horizon *HorizonReport
}

// Breaker states of a route (RouteState.Breaker).
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"
	BreakerHalfOpen = "half-open"
)

// RouteState is the delivery state of one route (an event type) in a
// Client: its circuit breaker, its share of the limits, and its pause.
type RouteState struct {
	Type string
	// Breaker is BreakerClosed, BreakerOpen or BreakerHalfOpen; Failures
	// the consecutive failures counted; OpenedAt when it last opened
	// (zero while closed), and Opens how many times it opened.
	Breaker  string
	Failures int
	OpenedAt time.Time
	Opens    int64
	// Paused reports a stored pause of the type (or of PauseAll).
	Paused bool
	// Rate and Concurrency are this Client's share of the route's limits
	// (see RoutePolicy), InFlight the events of a limited route it holds
	// now (queued or being delivered).
	Rate        float64
	Concurrency int
	InFlight    int
}

// Started reports whether Start ran and Close did not: what a liveness
// probe asks, without reading the database.
func (c *Client) Started() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started && !c.closed
}

// Health reports the Client's health (see Health). It reads the table's
// backlog (Store.Stats) unless the backlog sampler's last sample is
// recent (see Config.MetricsInterval); the pauses, routes and nodes are
// this Client's view, refreshed every ControlInterval and Lease/3; the
// horizon the guard's latest report (read now if it is older than two
// HorizonIntervals). An
// error means the database could not be read, and the Health returned then
// holds what is known without it.
func (c *Client) Health(ctx context.Context) (Health, error) {
	h := Health{Started: c.Started(), Mode: c.cfg.Mode.String(), Owner: c.cfg.Owner}
	now := utcNow(c.cfg.Clock)
	c.claims.gate.health(&h)
	if !h.LastPoll.IsZero() {
		h.LastPollAge = max(now.Sub(h.LastPoll), 0)
	}
	if c.control == nil { // a writer-only Client reads the pauses itself
		if _, ok := c.cfg.Store.(Controls); ok {
			ps, err := c.Pauses(ctx)
			if err != nil {
				return h, fmt.Errorf("outbox: health: %w", err)
			}
			h.Paused = ps
		}
	}
	st, fresh := c.sampler.latest(now)
	if !fresh {
		var err error
		if st, err = c.cfg.Store.Stats(ctx, now); err != nil {
			return h, fmt.Errorf("outbox: health: %w", err)
		}
	}
	b := backlogOf(st, now)
	h.OldestPendingAge, h.Dead, h.BlockedKeys = b.OldestPending, b.Dead, b.BlockedKeys
	h.Horizon = c.guard.report(ctx)
	return h, nil
}
