package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// nodeForgetLeases is how many Leases after its last heartbeat a node is
// forgotten by the others' heartbeats; it stops counting as live after one
// Lease (see liveSince).
const nodeForgetLeases = 3

// controller keeps a delivering Client's gate in step with the control
// tables (Controls): it reads the stored pauses at Start and every
// ControlInterval, and reports this Client as a live Node at Start and
// every Lease/3, reading the live nodes the limits are shared among; at
// Close it leaves. Without Controls it does nothing.
type controller struct {
	ctl      Controls
	gate     *gate
	lease    time.Duration
	skew     time.Duration // Config.MaxClockSkew: other nodes beat with their clocks
	interval time.Duration
	clock    Clock
	log      *slog.Logger
	bg       background
	// joined: start reported this node, which close removes.
	joined atomic.Bool
	// failing: the last refresh failed and was logged as a warning; the
	// next failures are logged at debug level until one succeeds (control
	// tables not migrated yet would warn every ControlInterval).
	failing atomic.Bool
	// refreshing serializes refresh: the background loop's and those of
	// Client.Pause and Resume, so that an older read of the pauses is
	// never applied after a newer one.
	refreshing sync.Mutex
}

func newController(cfg Config, g *gate) *controller {
	ctl, _ := cfg.Store.(Controls)
	return &controller{ctl: ctl, gate: g, lease: cfg.Lease, skew: cfg.MaxClockSkew, interval: cfg.ControlInterval, clock: cfg.Clock,
		log: cfg.Logger.With("outbox_owner", cfg.Owner)}
}

// liveSince is the oldest last heartbeat of a live node at now.
func (c *controller) liveSince(now time.Time) time.Time { return now.Add(-c.lease - c.skew) }

// start reads the pauses and beats once, so that the first claim obeys
// them, then keeps doing so until close. A database error at start is
// logged and recorded (Health), not returned: the refresh retries it.
func (c *controller) start(ctx context.Context) error {
	if c.ctl == nil {
		return nil
	}
	c.refresh(ctx)
	c.joined.Store(true)
	c.beat(ctx)
	return c.bg.start(ctx, "control refresh", func(ctx context.Context) {
		pauses := time.NewTicker(c.interval)
		defer pauses.Stop()
		beats := time.NewTicker(max(c.lease/3, time.Millisecond))
		defer beats.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-pauses.C:
				c.refresh(ctx)
			case <-beats.C:
				c.beat(ctx)
			}
		}
	})
}

// refresh reads the stored pauses into the gate.
func (c *controller) refresh(ctx context.Context) {
	if c.ctl == nil {
		return
	}
	c.refreshing.Lock()
	defer c.refreshing.Unlock()
	ctx, cancel := context.WithTimeout(ctx, max(c.interval, time.Second))
	defer cancel()
	ps, err := c.ctl.Pauses(ctx)
	if err != nil {
		c.failed(ctx, "read the stored pauses", err)
		return
	}
	c.recovered()
	if c.gate.setPauses(ps) && c.gate.wake != nil {
		c.gate.wake() // a resumed route has events waiting
	}
}

// beat reports this Client as live and reads the live nodes.
func (c *controller) beat(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(c.lease/3, time.Second))
	defer cancel()
	now := utcNow(c.clock)
	if err := c.ctl.Beat(ctx, c.gate.node(now), now.Add(-nodeForgetLeases*c.lease)); err != nil {
		c.failed(ctx, "report this node", err)
		return
	}
	ns, err := c.ctl.Nodes(ctx, c.liveSince(now))
	if err != nil {
		c.failed(ctx, "read the live nodes", err)
		return
	}
	c.recovered()
	c.gate.setNodes(ns)
}

// recovered notes a refresh that succeeded after failures.
func (c *controller) recovered() {
	c.gate.controlled(nil, utcNow(c.clock))
	if c.failing.Swap(false) {
		c.log.Info("outbox: control refresh works again")
	}
}

func (c *controller) failed(ctx context.Context, what string, err error) {
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), context.Canceled) {
		return // cut off by Close
	}
	c.gate.controlled(fmt.Errorf("%s: %w", what, err), utcNow(c.clock))
	if c.failing.Swap(true) {
		c.log.Debug("outbox: control refresh failed again: could not "+what, "error", err)
		return
	}
	c.log.Warn("outbox: control refresh failed: could not "+what+" (logged again once it has worked; pauses and limits keep their last state)", "error", err)
}

// close stops the refresh and forgets this node in the table, so that the
// others take its share of the limits at once.
func (c *controller) close(ctx context.Context) error {
	if c == nil || c.ctl == nil {
		return nil
	}
	err := c.bg.close(ctx, "control refresh")
	if !c.joined.Swap(false) {
		return err
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeoutOnStop)
	defer cancel()
	if lerr := c.ctl.Leave(lctx, c.gate.owner); lerr != nil {
		c.log.Warn("outbox: could not remove this node from the table; the others count it until it ages out", "error", lerr)
	}
	return err
}

// unrouted returns the entries of types that no live node routes: read
// from the table with Controls, else those this Client does not route.
func (c *Client) unrouted(ctx context.Context, types []TypeBacklog, now time.Time) ([]TypeBacklog, error) {
	mine := c.claims.gate.routes()
	nodes := []Node{{Types: mine}}
	if c.cfg.Mode == ModeWriterOnly {
		nodes = nil
	}
	if ctl, ok := c.cfg.Store.(Controls); ok {
		live, err := ctl.Nodes(ctx, now.Add(-c.cfg.Lease))
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, live...)
	}
	var out []TypeBacklog
	for _, tb := range types {
		routed := slices.ContainsFunc(nodes, func(n Node) bool { return n.routes(tb.Type) })
		if !routed {
			out = append(out, tb)
		}
	}
	return out, nil
}
