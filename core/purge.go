package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Purge defaults (the reference specification's values).
const (
	DefaultRetention     = 7 * 24 * time.Hour
	DefaultPurgeBatch    = 500
	DefaultPurgeInterval = time.Hour
)

// PurgeConfig configures a PurgeScheduler. Zero values take the defaults.
type PurgeConfig struct {
	// Purger deletes the rows (required).
	Purger Purger
	// Retention keeps DONE events this long after they ended (default 7 days).
	Retention time.Duration
	// DeadRetention, when set, purges DEAD events this long after they
	// ended. Zero keeps them until they are replayed: a DEAD event is one
	// nobody handled, and purging it would lose it.
	DeadRetention time.Duration
	// BatchSize bounds each DELETE, and so how long it holds locks (default 500).
	BatchSize int
	// Interval between purges (default 1h). The first purge runs at Start.
	Interval time.Duration
	// Logger and Clock default to slog.Default() and SystemClock.
	Logger *slog.Logger
	Clock  Clock
}

// PurgeScheduler periodically deletes terminal events older than the
// retention, in bounded batches. Pending events are never touched.
type PurgeScheduler struct {
	cfg   PurgeConfig
	log   *slog.Logger
	clock Clock

	bg background
}

// NewPurgeScheduler validates cfg and returns a PurgeScheduler.
func NewPurgeScheduler(cfg PurgeConfig) (*PurgeScheduler, error) {
	if cfg.Purger == nil {
		return nil, configErr("purge scheduler needs a Purger")
	}
	if cfg.Retention < 0 || cfg.DeadRetention < 0 || cfg.BatchSize < 0 || cfg.Interval < 0 {
		return nil, configErr("purge settings must not be negative")
	}
	setDefault(&cfg.Retention, DefaultRetention)
	setDefault(&cfg.BatchSize, DefaultPurgeBatch)
	setDefault(&cfg.Interval, DefaultPurgeInterval)
	return &PurgeScheduler{cfg: cfg, log: loggerOr(cfg.Logger), clock: clockOr(cfg.Clock)}, nil
}

// PurgeOnce deletes DONE events older than Retention (and DEAD events
// older than DeadRetention, when set), batch after batch until a batch is
// not full, and returns the total. A RetentionPurger's PurgeRetention
// runs rather than Purge.
func (s *PurgeScheduler) PurgeOnce(ctx context.Context) (int64, error) {
	now := utcNow(s.clock)
	total, err := s.purge(ctx, StatusDone, now.Add(-s.cfg.Retention))
	if err != nil || s.cfg.DeadRetention == 0 {
		return total, err
	}
	n, err := s.purge(ctx, StatusDead, now.Add(-s.cfg.DeadRetention))
	return total + n, err
}

func (s *PurgeScheduler) purge(ctx context.Context, status Status, before time.Time) (int64, error) {
	purge := s.cfg.Purger.Purge
	if r, ok := s.cfg.Purger.(RetentionPurger); ok {
		purge = r.PurgeRetention
	}
	var total int64
	for {
		n, err := purge(ctx, PurgeRequest{Status: status, Before: before, Limit: s.cfg.BatchSize})
		total += n
		if err != nil {
			return total, fmt.Errorf("outbox: purge %s events: %w", status, err)
		}
		if n < int64(s.cfg.BatchSize) {
			return total, nil
		}
	}
}

// Start runs PurgeOnce now and then every Interval until Close.
func (s *PurgeScheduler) Start(ctx context.Context) error {
	return s.bg.start(ctx, "purge scheduler", s.loop)
}

func (s *PurgeScheduler) loop(ctx context.Context) {
	ticker := time.NewTicker(s.cfg.Interval)
	defer ticker.Stop()
	for {
		n, err := s.PurgeOnce(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Error("outbox: purge failed", "error", err)
		case n > 0:
			s.log.Info("outbox: purged terminal events", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// Close stops the scheduler and waits for a running purge to end, or for
// ctx to end (an error wrapping ctx.Err()); every call waits.
func (s *PurgeScheduler) Close(ctx context.Context) error { return s.bg.close(ctx, "purge scheduler") }

// setDefault sets *v to def if it is zero: a PurgeScheduler is also built
// alone (inbox, idempotency), from a PurgeConfig that is not defaulted.
func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
