package outbox

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"
)

// DefaultMetricsInterval spaces the backlog samples unless
// Config.MetricsInterval sets another interval.
const DefaultMetricsInterval = 15 * time.Second

// backlogSampler reports the table's backlog to Metrics.Backlog every
// interval, and runs the horizon guard's samples every HorizonInterval,
// from Start to Close: one goroutine for both.
type backlogSampler struct {
	store    Store
	metrics  Metrics // nil: no backlog samples
	clock    Clock
	log      *slog.Logger
	interval time.Duration
	guard    *horizonGuard // nil: no guard
	bg       background

	mu       sync.Mutex
	last     Stats
	sampleAt time.Time // when last was read (zero: never)
}

// latest returns the last sample if it was read within two intervals of
// now.
func (s *backlogSampler) latest(now time.Time) (Stats, bool) {
	if s == nil {
		return Stats{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fresh := s.metrics != nil && !s.sampleAt.IsZero() && now.Sub(s.sampleAt) <= 2*s.interval
	return s.last, fresh
}

// newBacklogSampler returns the sampler cfg (defaults applied, see
// Config.WithDefaults) asks for with the guard g, or nil: no guard, and
// no Metrics or a negative MetricsInterval.
func newBacklogSampler(cfg Config, g *horizonGuard) *backlogSampler {
	s := &backlogSampler{store: cfg.Store, metrics: cfg.Metrics, clock: cfg.Clock, log: cfg.Logger, interval: cfg.MetricsInterval, guard: g}
	if cfg.MetricsInterval < 0 || isNop(cfg.Metrics) {
		if g == nil {
			return nil
		}
		s.metrics = nil
	}
	return s
}

func (s *backlogSampler) start(ctx context.Context) error {
	if s == nil {
		return nil
	}
	return s.bg.start(ctx, "backlog sampler", func(ctx context.Context) {
		backlog := s.ticker(s.metrics != nil, s.interval)
		defer backlog.Stop()
		horizon := s.ticker(s.guard != nil, s.guard.every())
		defer horizon.Stop()
		if s.metrics != nil {
			s.sample(ctx)
		}
		if s.guard != nil {
			s.guard.sample(ctx)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-backlog.C:
				s.sample(ctx)
			case <-horizon.C:
				s.guard.sample(ctx)
			}
		}
	})
}

// ticker returns a ticker of every, or, unless on, one that never ticks.
func (s *backlogSampler) ticker(on bool, every time.Duration) *time.Ticker {
	t := time.NewTicker(max(every, time.Millisecond))
	if !on {
		t.Stop()
	}
	return t
}

func (s *backlogSampler) close(ctx context.Context) error {
	if s == nil {
		return nil
	}
	return s.bg.close(ctx, "backlog sampler")
}

// sample reads Store.Stats, bounded by the interval, and reports it.
func (s *backlogSampler) sample(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, s.interval)
	defer cancel()
	now := utcNow(s.clock)
	st, err := s.store.Stats(sctx, now)
	if err != nil {
		if ctx.Err() == nil { // not cut off by Close
			s.log.Warn("outbox: could not sample the backlog for metrics", "error", err)
		}
		return
	}
	s.mu.Lock()
	s.last, s.sampleAt = st, now
	s.mu.Unlock()
	s.metrics.Backlog(backlogOf(st, now))
}

// backlogOf turns Stats into a Backlog at now.
func backlogOf(st Stats, now time.Time) Backlog {
	b := Backlog{
		Pending:     st.ByStatus[StatusNew] + st.ByStatus[StatusRetry],
		Due:         st.Due,
		Dead:        st.ByStatus[StatusDead],
		BlockedKeys: st.BlockedKeys,
		Retrying:    st.ByStatus[StatusRetry],
		InFlight:    st.Claimed,
	}
	if !st.OldestPending.IsZero() {
		b.OldestPending = max(now.Sub(st.OldestPending), 0)
	}
	return b
}

// countWritten reports the events of a committed write, one call per run
// of events of one type and tenant.
func countWritten(m Metrics, events []Envelope) {
	for i := 0; i < len(events); {
		l := labelsOf(events[i])
		j := i + 1
		for j < len(events) && labelsOf(events[j]) == l {
			j++
		}
		m.EventsWritten(l, j-i)
		i = j
	}
}

// WithAddedHeaders returns a copy of e with the headers of h added, for a
// WriterHook that stamps the events it writes (a trace context, see the
// otel module): a key e already has keeps its value unless replace is
// true. e itself is not changed. Keys must not be empty and values must be
// valid UTF-8 text without NUL, and the result must keep the limits on
// headers (MaxHeaders, MaxHeaderNameLen, MaxHeadersSize); errors wrap
// ErrInvalidEnvelope.
func (e Envelope) WithAddedHeaders(h map[string]string, replace bool) (Envelope, error) {
	if len(h) == 0 {
		return e, nil
	}
	headers := make(map[string]string, len(e.headers)+len(h))
	maps.Copy(headers, e.headers)
	for k, v := range h {
		if _, ok := headers[k]; ok && !replace {
			continue
		}
		headers[k] = v
	}
	e.headers = headers
	if err := e.checkWritable(); err != nil {
		return Envelope{}, err
	}
	e.checked = true
	return e, nil
}
