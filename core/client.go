package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Client is the outbox for one table: it writes events in the caller's
// transaction and, depending on its Mode, delivers them to the listeners
// registered on it — right after commit, and through a poller that any
// number of instances can run side by side — retries, moves events that
// keep failing to DEAD, and purges old ones. Every part shares one clock,
// logger, metrics, owner id and lease.
//
// Register listeners with Handle or Register, call Start, write with Write,
// and Close on shutdown. A Client is safe for concurrent use.
type Client struct {
	cfg        Config
	registry   Registry
	eventTypes sync.Map // reflect.Type -> eventTypeName, see RegisterEventType
	writer     *writer
	d          *dispatcher
	poller     *poller
	purge      *PurgeScheduler
	dead       *DeadEvents
	sampler    *backlogSampler
	guard      *horizonGuard
	// claims are the parts' claims, with the gate; control keeps the
	// gate in step with the stored pauses and the live nodes (nil for a
	// Client that delivers nothing).
	claims  *claims
	control *controller
	// listen hears the other instances' wake-ups (see Waker) for the
	// poller.
	listen background

	mu      sync.Mutex
	started bool
	closed  bool
}

// New validates cfg (Config.Validate), fills in its defaults
// (Config.WithDefaults) and assembles a Client; call Start to run it.
// Errors wrap ErrInvalidConfig and name the setting.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	c := &Client{cfg: cfg, dead: newDeadEvents(cfg.Store, cfg.Clock), guard: newHorizonGuard(cfg)}
	c.sampler = newBacklogSampler(cfg, c.guard)
	c.dead.record = c.record
	var err error
	// One claims for the parts: a writer-only Client's only inserts, and
	// has no acks to batch.
	var cl *claims
	if cfg.Mode == ModeWriterOnly {
		cl = newClaims(cfg, 0)
	} else {
		cl = newClaimsOf(cfg, ackRoom(cfg), &c.registry)
		c.d = newDispatcher(cfg, &c.registry, cl)
		c.control = newController(cfg, cl.gate)
	}
	c.claims = cl
	cl.cross = newCrossWake(cfg)
	c.dead.wake = cl.wakeAll
	if cfg.Mode == ModeFull || cfg.Mode == ModePollerOnly {
		cl.polls = true
		c.poller = newPoller(cfg, cl, c.d)
		if cfg.Purger != nil && !cfg.DisablePurge {
			if c.purge, err = newPurgeScheduler(cfg); err != nil {
				return nil, err
			}
		}
	}
	if cfg.TxContext != nil {
		hot := c.d
		if cfg.Mode == ModePollerOnly {
			hot = nil
		}
		if c.writer, err = newWriter(cfg, cl, hot); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// newPurgeScheduler returns the purge scheduler of cfg's Purger.
func newPurgeScheduler(cfg Config) (*PurgeScheduler, error) {
	return NewPurgeScheduler(PurgeConfig{Purger: cfg.Purger, Retention: cfg.Retention, DeadRetention: cfg.DeadRetention,
		BatchSize: cfg.PurgeBatchSize, Interval: cfg.PurgeInterval, Logger: cfg.Logger, Clock: cfg.Clock})
}

// Handle routes events of type et, on any aggregate type, to fn: the
// common case. fn must be idempotent (deduplicate by Envelope.ID); an
// error retries the event, RetryAfter retries it without using an attempt.
// A second listener for the same event type fails with ErrDuplicateListener.
func (c *Client) Handle(et EventType, fn func(ctx context.Context, e Envelope) error) error {
	return c.registry.Handle(et, fn)
}

// Register routes events of type et on aggregate type at to l. It wins over
// a Handle for et.
func (c *Client) Register(at AggregateType, et EventType, l Listener) error {
	return c.registry.Register(at, et, l)
}

// Subscribe adds l as the subscriber called name of the events of type et,
// on any aggregate type: each subscriber gets every event of the type and
// retries on its own, so a failing subscriber never runs the others again
// (see Registry.Subscribe).
func (c *Client) Subscribe(name string, et EventType, l Listener) error {
	return c.registry.Subscribe(name, et, l)
}

// HandleAll routes every event that no Handle or Register route matches to
// l, for example a broker relay (see the relay package). Specific routes
// win over it; a second catch-all fails with ErrDuplicateListener.
func (c *Client) HandleAll(l Listener) error { return c.registry.HandleAll(l) }

// Write inserts events in the transaction carried by ctx and returns their
// ids. With no transaction in ctx it fails with an error wrapping
// ErrNoTransaction and writes nothing. After commit the events are
// delivered in this process at once (ModeFull, ModeHotPathOnly), or by a
// poller. A Client in ModePollerOnly without a TxContext cannot write.
func (c *Client) Write(ctx context.Context, events ...Envelope) ([]string, error) {
	if c.writer == nil {
		return nil, configErr("this client has no TxContext and cannot write")
	}
	return c.writer.Write(ctx, events...)
}

// Start runs the dispatcher, then the poller and the purge scheduler, as
// the Mode asks. ctx lends its values to listeners; its cancellation does
// not stop the Client, Close does.
func (c *Client) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if c.started {
		return configErr("client already started")
	}
	if c.d != nil {
		if err := c.d.Start(ctx); err != nil {
			return err
		}
	}
	if c.control != nil {
		if err := c.control.start(ctx); err != nil {
			return errors.Join(err, c.d.Close(ctx))
		}
	}
	if c.poller != nil {
		if err := c.poller.Start(ctx); err != nil {
			return errors.Join(err, c.control.close(ctx), c.d.Close(ctx))
		}
	}
	if c.purge != nil {
		if err := c.purge.Start(ctx); err != nil {
			return errors.Join(err, c.poller.Close(ctx), c.control.close(ctx), c.d.Close(ctx))
		}
	}
	if c.poller != nil && c.claims.cross != nil {
		cl, log := c.claims, c.cfg.Logger.With("outbox_owner", c.cfg.Owner)
		_ = c.listen.start(ctx, "wake-up listener", func(ctx context.Context) { // fails only when closed, as the sampler
			listenLoop(ctx, c.cfg.Waker, c.cfg.Owner, log, c.cfg.MaxPollBackoff, cl.wakePoller)
		})
	}
	if c.sampler != nil {
		if err := c.sampler.start(ctx); err != nil {
			return err // it fails only once closed, and Close was not called
		}
	}
	c.started = true
	c.cfg.Logger.Info("outbox: client started", "outbox_owner", c.cfg.Owner, "mode", c.cfg.Mode.String())
	return nil
}

// Close stops the purge scheduler and the poller, then lets the dispatcher
// deliver what is queued for up to DrainTimeout (or until ctx ends) and
// gives back the claims of what it could not deliver, so that other
// instances take those events at once. Writes after Close still succeed;
// their events are left to pollers. Close is idempotent, and every call
// waits for every goroutine the Client started, until ctx ends: it returns
// nil once they have all stopped, or an error wrapping ctx.Err() if ctx
// ended first — then listeners may still run (they were cancelled), and a
// later Close waits for them again. The outcomes of listeners that return
// late are still stored before their goroutines end.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	var errs []error
	if c.sampler != nil {
		errs = append(errs, c.sampler.close(ctx))
	}
	if c.purge != nil {
		errs = append(errs, c.purge.Close(ctx))
	}
	errs = append(errs, c.listen.close(ctx, "wake-up listener"))
	if c.poller != nil {
		errs = append(errs, c.poller.Close(ctx))
	}
	if c.d != nil {
		errs = append(errs, c.d.Close(ctx))
	}
	if c.control != nil {
		errs = append(errs, c.control.close(ctx))
	}
	errs = append(errs, c.claims.cross.close(ctx)) // the last wake-ups: released events, acks of ordered ones
	return errors.Join(errs...)
}

// Owner returns the owner id this Client claims rows with.
func (c *Client) Owner() string { return c.cfg.Owner }

// Dead returns the dead-letter admin: list, count and replay DEAD events.
func (c *Client) Dead() *DeadEvents { return c.dead }

// Get returns one stored event with its delivery state, or an error
// wrapping ErrNotFound.
func (c *Client) Get(ctx context.Context, id string) (Record, error) {
	return c.cfg.Store.Get(ctx, id)
}

// Stats counts the table's events by status and finds the oldest pending
// one and the keys blocked by a DEAD event (see Stats.BlockedKeys), and
// the pending event types that no live instance routes (Stats.Unrouted),
// and the horizon guard's latest report (Stats.Horizon).
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	now := utcNow(c.cfg.Clock)
	st, err := c.cfg.Store.Stats(ctx, now)
	if err != nil {
		return st, err
	}
	if st.Unrouted, err = c.unrouted(ctx, st.Types, now); err != nil {
		return st, fmt.Errorf("outbox: stats: live nodes: %w", err)
	}
	st.Horizon = c.guard.report(ctx)
	return st, nil
}

// PollOnce claims one batch and queues it for delivery, as the poller does
// on its own, and returns how many events were queued. It needs a started
// Client with a poller (ModeFull or ModePollerOnly).
func (c *Client) PollOnce(ctx context.Context) (int, error) {
	if c.poller == nil {
		return 0, configErr("PollOnce needs a poller (ModeFull or ModePollerOnly)")
	}
	n, _, err := c.poller.PollOnce(ctx)
	return n, err
}

// PurgeOnce deletes terminal events older than the retention now, in
// batches, and returns how many. It needs a Purger.
func (c *Client) PurgeOnce(ctx context.Context) (int64, error) {
	if c.purge == nil {
		if c.cfg.Purger == nil {
			return 0, configErr("PurgeOnce needs a Purger")
		}
		s, err := newPurgeScheduler(c.cfg)
		if err != nil {
			return 0, err
		}
		return s.PurgeOnce(ctx)
	}
	return c.purge.PurgeOnce(ctx)
}
