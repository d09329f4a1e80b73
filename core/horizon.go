package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// HorizonReporter is a Store that can report what keeps its table from
// being vacuumed (PostgreSQL): its dead tuples, its size, and the oldest
// transaction, prepared transaction or replication slot that pins the
// horizon below which the dead tuples of every table of the database stay.
// A Client whose Store is one samples it every HorizonInterval, warns when
// a threshold (HorizonDeadTuples, HorizonAge, HorizonTableMegabytes) is passed, and
// reports it in Stats, Health and Metrics.Horizon. A Store of a database
// without such a horizon returns an error wrapping ErrUnsupported; the
// Client then stops asking.
type HorizonReporter interface {
	// Horizon reads the state of the table's storage. It must stay cheap:
	// a few catalog and statistics views, never the table itself.
	Horizon(ctx context.Context) (Horizon, error)
}

// The kinds of a HorizonHolder.
const (
	// HolderTransaction is a session whose transaction holds a snapshot or
	// a transaction id: a long query, or a session idle in transaction.
	HolderTransaction = "transaction"
	// HolderPrepared is a prepared transaction (PREPARE TRANSACTION) not
	// yet committed or rolled back.
	HolderPrepared = "prepared transaction"
	// HolderSlot is a replication slot whose xmin (a standby's
	// hot_standby_feedback) holds the horizon, active or not.
	HolderSlot = "replication slot"
	// HolderReplication is a replication connection without a slot whose
	// standby's feedback holds the horizon.
	HolderReplication = "replication connection"
)

// Horizon is the state of the outbox table's storage, as a
// HorizonReporter reads it from the database's statistics.
type Horizon struct {
	// LiveTuples and DeadTuples are the table's live and dead row
	// versions, as the statistics count them: every delivered event leaves
	// one dead version (its DONE update) and a purged one another, which
	// only vacuum reclaims.
	LiveTuples, DeadTuples int64
	// LastVacuum and LastAutovacuum are when the table was last vacuumed
	// by hand and by autovacuum (zero: never, since the statistics were
	// reset).
	LastVacuum, LastAutovacuum time.Time
	// TableSize is the table's size on disk in bytes, indexes and TOAST
	// included.
	TableSize int64
	// Holders are what holds the horizon back: the oldest of each kind,
	// oldest first (by XIDAge). Empty when nothing does.
	Holders []HorizonHolder
	// Hidden counts the sessions of the database whose transactions the
	// store's role may not see (grant it pg_read_all_stats): a holder may
	// hide among them.
	Hidden int
}

// HorizonHolder is one thing that holds the horizon back.
type HorizonHolder struct {
	// Kind is HolderTransaction, HolderPrepared, HolderSlot or
	// HolderReplication.
	Kind string
	// PID is the server process of the session (a transaction, an active
	// slot's connection); 0 for none.
	PID int
	// Name is the session's application_name, the prepared transaction's
	// gid, or the slot's name; State the session's state ("active", "idle
	// in transaction", …) or the slot's ("active", "inactive"). Both come
	// from the database, cut to 64 bytes: escape them where they are shown.
	Name, State string
	// Age is how long it has held the horizon: since its transaction
	// started, since it was prepared, or, for a slot, since the Client
	// first saw its xmin where it is now (at least that long). Zero when
	// unknown.
	Age time.Duration
	// XIDAge is how many transactions old the horizon it holds is: what
	// vacuum cannot clean up after.
	XIDAge int64
	// XMin is the transaction id it holds the horizon at.
	XMin int64
}

// Oldest returns the holder that holds the horizon furthest back, and
// whether there is one.
func (h Horizon) Oldest() (HorizonHolder, bool) {
	if len(h.Holders) == 0 {
		return HorizonHolder{}, false
	}
	return h.Holders[0], true
}

// The checks of the horizon guard (HorizonWarning.Check).
const (
	CheckDeadTuples = "dead_tuples"
	CheckHolderAge  = "holder_age"
	CheckTableSize  = "table_size"
)

// HorizonWarning is a threshold of the horizon guard that the table
// passed.
type HorizonWarning struct {
	// Check is CheckDeadTuples, CheckHolderAge or CheckTableSize.
	Check string
	// Message says what was found, and the threshold.
	Message string
}

// HorizonReport is the horizon guard's latest sample: the table's Horizon,
// when it was read, and the thresholds it passes.
type HorizonReport struct {
	Horizon
	// At is when the sample was read (the Client's clock).
	At time.Time
	// Warnings are the thresholds passed, none when all is well.
	Warnings []HorizonWarning
}

// Warning reports whether the report passes a threshold.
func (r *HorizonReport) Warning() bool { return r != nil && len(r.Warnings) > 0 }

// Defaults of the horizon guard's knobs.
const (
	// DefaultHorizonInterval spaces the guard's samples.
	DefaultHorizonInterval = time.Minute
	// DefaultHorizonAge is the age of a holder of the horizon past which
	// the guard warns.
	DefaultHorizonAge = 15 * time.Minute
	// DefaultHorizonDeadTuples is the count of dead tuples past which the
	// guard warns.
	DefaultHorizonDeadTuples = 10_000_000
)

// horizonRelog is how often a warning that stays is logged again.
const horizonRelog = 15 * time.Minute

// maxHolderText bounds the text of a holder that the database returns.
const maxHolderText = 64

// horizonGuard samples a HorizonReporter, checks the thresholds and logs
// when a warning starts, stays (every horizonRelog) and ends.
type horizonGuard struct {
	store    HorizonReporter
	interval time.Duration
	age      time.Duration // 0: off
	dead     int64         // 0: off
	size     int64         // bytes; 0: off
	clock    Clock
	log      *slog.Logger
	metrics  Metrics

	mu sync.Mutex
	// last is the latest report (nil: none yet); off that the store said
	// ErrUnsupported; failing that the last read failed and was logged.
	last    *HorizonReport
	off     bool
	failing bool
	// warned is when each check's warning was last logged.
	warned map[string]time.Time
	// slots is where and since when each slot holder was first seen.
	slots map[string]slotSeen
}

type slotSeen struct {
	xmin  int64
	since time.Time
}

// newHorizonGuard returns the guard of cfg (defaults applied), or nil: the
// Store is no HorizonReporter, or HorizonInterval is negative.
func newHorizonGuard(cfg Config) *horizonGuard {
	hr, ok := cfg.Store.(HorizonReporter)
	if !ok || cfg.HorizonInterval < 0 {
		return nil
	}
	g := &horizonGuard{store: hr, interval: cfg.HorizonInterval, age: max(cfg.HorizonAge, 0),
		dead: int64(max(cfg.HorizonDeadTuples, 0)), size: int64(cfg.HorizonTableMegabytes) << 20,
		clock: cfg.Clock, log: cfg.Logger.With("outbox_owner", cfg.Owner), metrics: cfg.Metrics,
		warned: map[string]time.Time{}, slots: map[string]slotSeen{}}
	return g
}

// every is the interval of the guard's samples (0 for none).
func (g *horizonGuard) every() time.Duration {
	if g == nil {
		return 0
	}
	return g.interval
}

// report returns the latest report if it is at most two intervals old,
// else reads a new one; nil when the guard is off or the read failed.
func (g *horizonGuard) report(ctx context.Context) *HorizonReport {
	if g == nil {
		return nil
	}
	now := utcNow(g.clock)
	g.mu.Lock()
	last, off := g.last, g.off
	g.mu.Unlock()
	if off {
		return nil
	}
	if last != nil && now.Sub(last.At) <= 2*g.interval {
		return last
	}
	return g.sample(ctx)
}

// sample reads the horizon, bounded by the interval, checks it, logs
// what changed and reports it to Metrics. It returns the new report, or
// nil if the read failed.
func (g *horizonGuard) sample(ctx context.Context) *HorizonReport {
	sctx, cancel := context.WithTimeout(ctx, max(g.interval, time.Second))
	defer cancel()
	h, err := g.store.Horizon(sctx)
	now := utcNow(g.clock)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		switch {
		case errors.Is(err, ErrUnsupported):
			g.off = true
		case ctx.Err() != nil: // cut off by Close
		case g.failing:
			g.log.Debug("outbox: horizon guard: could not read the table's storage again", "error", err)
		default:
			g.failing = true
			g.log.Warn("outbox: horizon guard: could not read the table's storage (logged again once it has worked)", "error", err)
		}
		return nil
	}
	if g.failing {
		g.failing = false
		g.log.Info("outbox: horizon guard: reads the table's storage again")
	}
	g.slotAges(&h, now)
	r := &HorizonReport{Horizon: h, At: now, Warnings: g.check(h)}
	g.logChanges(r, now)
	g.last = r
	g.metrics.Horizon(*r)
	return r
}

// slotAges sets the Age of the slot holders: how long the guard has seen
// each slot's xmin where it is now. g.mu is held.
func (g *horizonGuard) slotAges(h *Horizon, now time.Time) {
	seen := make(map[string]slotSeen, len(g.slots))
	for i := range h.Holders {
		ho := &h.Holders[i]
		if ho.Kind != HolderSlot {
			continue
		}
		s, ok := g.slots[ho.Name]
		if !ok || s.xmin != ho.XMin {
			s = slotSeen{xmin: ho.XMin, since: now}
		}
		seen[ho.Name] = s
		ho.Age = max(now.Sub(s.since), 0)
	}
	g.slots = seen
}

// check returns the thresholds h passes.
func (g *horizonGuard) check(h Horizon) []HorizonWarning {
	var ws []HorizonWarning
	if g.dead > 0 && h.DeadTuples > g.dead {
		ws = append(ws, HorizonWarning{Check: CheckDeadTuples, Message: fmt.Sprintf(
			"the outbox table has %d dead tuples (%d live), more than HorizonDeadTuples %d: vacuum does not keep up%s",
			h.DeadTuples, h.LiveTuples, g.dead, vacuumedText(h))})
	}
	// The oldest holder by transactions first; a slot's age is known only
	// once it has been seen for a while.
	for _, ho := range h.Holders {
		if g.age > 0 && ho.Age > g.age {
			ws = append(ws, HorizonWarning{Check: CheckHolderAge, Message: fmt.Sprintf(
				"%s has held the horizon for %s (%d transactions), longer than HorizonAge %s: vacuum cannot remove the dead tuples of any table of the database",
				holderText(ho), fmtValue(roundAge(ho.Age)), ho.XIDAge, fmtValue(g.age))})
			break
		}
	}
	if g.size > 0 && h.TableSize > g.size {
		ws = append(ws, HorizonWarning{Check: CheckTableSize, Message: fmt.Sprintf(
			"the outbox table takes %s with its indexes, more than HorizonTableMegabytes %d", fmtBytes(h.TableSize), g.size>>20)})
	}
	return ws
}

// logChanges logs a warning when a check starts to warn and every
// horizonRelog while it stays, and an info line when it ends. g.mu is held.
func (g *horizonGuard) logChanges(r *HorizonReport, now time.Time) {
	on := map[string]bool{}
	for _, w := range r.Warnings {
		on[w.Check] = true
		if at, ok := g.warned[w.Check]; ok && now.Sub(at) < horizonRelog {
			continue
		}
		g.warned[w.Check] = now
		g.log.Warn("outbox: horizon guard: "+w.Message, horizonAttrs(r, w.Check)...)
	}
	for check := range g.warned {
		if !on[check] {
			delete(g.warned, check)
			g.log.Info("outbox: horizon guard: "+check+" is within its threshold again", horizonAttrs(r, check)...)
		}
	}
}

// horizonAttrs are the numbers a log line of the guard carries.
func horizonAttrs(r *HorizonReport, check string) []any {
	attrs := []any{"check", check, "dead_tuples", r.DeadTuples, "live_tuples", r.LiveTuples, "table_bytes", r.TableSize}
	if ho, ok := r.Oldest(); ok {
		attrs = append(attrs, slog.Group("holder", "kind", ho.Kind, "pid", ho.PID, "name", ho.Name, "state", ho.State,
			"age", fmtValue(roundAge(ho.Age)), "xid_age", ho.XIDAge))
	}
	return attrs
}

// roundAge rounds an age for a message: to 100ms under a minute, else to
// the second.
func roundAge(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// holderText names a holder in a message.
func holderText(h HorizonHolder) string {
	var b strings.Builder
	switch h.Kind {
	case HolderTransaction:
		fmt.Fprintf(&b, "the transaction of pid %d", h.PID)
	case HolderPrepared:
		fmt.Fprintf(&b, "the prepared transaction %q", h.Name)
	case HolderSlot:
		fmt.Fprintf(&b, "the replication slot %q", h.Name)
	default:
		fmt.Fprintf(&b, "the %s of pid %d", h.Kind, h.PID)
	}
	var detail []string
	if h.State != "" {
		detail = append(detail, h.State)
	}
	if h.Name != "" && (h.Kind == HolderTransaction || h.Kind == HolderReplication) {
		detail = append(detail, fmt.Sprintf("application %q", h.Name))
	}
	if len(detail) > 0 {
		b.WriteString(" (" + strings.Join(detail, ", ") + ")")
	}
	return b.String()
}

// vacuumedText says when the table was last vacuumed, for a message.
func vacuumedText(h Horizon) string {
	last := h.LastVacuum
	if h.LastAutovacuum.After(last) {
		last = h.LastAutovacuum
	}
	if last.IsZero() {
		return "; it was never vacuumed"
	}
	return "; last vacuumed at " + last.UTC().Format(time.RFC3339)
}

// fmtBytes writes n bytes in binary units.
func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// HolderText clips a holder's text from the database to 64 bytes of valid
// UTF-8 without control characters, for Stores filling HorizonHolder.
func HolderText(s string) string { return storableText(s, maxHolderText) }
