package outbox

import (
	"errors"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// gate is the one place that decides which events this Client may claim
// and start: every hold-back — the types it does not route, the stored
// pauses, the open circuit breakers, the per-route rate and concurrency
// limits — is a claim filter decided here. The poller's claims ask it for
// their type filters (request, sideClaims), the hot path asks it whether a
// write may be inserted claimed (hot), and the workers whether a queued
// event may start (admits); claims tells it each delivery's outcome
// (observe) and each held event's end. It is owned by claims.
type gate struct {
	reg      *Registry // nil: a writer-only Client, which claims nothing
	claimAll bool
	owner    string
	mode     string
	started  time.Time
	clock    Clock
	log      *slog.Logger
	metrics  Metrics

	breakerFailures int
	breakerInterval time.Duration
	policies        map[string]RoutePolicy
	// wake asks the poller to poll soon (claims.wakePoller).
	wake func()
	// hotProbes: this Client has no poller (ModeHotPathOnly), so a
	// half-open breaker probes with an event of the hot path.
	hotProbes bool

	// warnedTypes and warnedSkip: request logged that a filter was cut to
	// MaxClaimTypes.
	warnedTypes, warnedSkip atomic.Bool

	// calm is set while nothing is paused and every breaker is closed:
	// the workers' and the hot path's checks then take no lock, but for
	// the events of a limited route (their deliveries are counted).
	calm atomic.Bool

	mu       sync.RWMutex
	pauses   []Pause
	paused   map[string]bool // by scope (PauseAll included)
	nodes    []Node
	breakers map[string]*breaker
	limits   map[string]*limiter
	// inFlight counts the held events (queued or delivering) of each
	// limited type.
	inFlight map[string]int

	lastPoll time.Time
	// The last errors of the poller and of the control refresh, each
	// cleared when its part succeeds again.
	pollErr, ctlErr lastError
}

// lastError is the last error of a part of the Client, and when it
// happened; zero once the part succeeds again.
type lastError struct {
	text string
	at   time.Time
}

// set records the outcome err (nil: a success) at now; g.mu is held.
func (e *lastError) set(err error, now time.Time) {
	if err == nil {
		*e = lastError{}
		return
	}
	*e = lastError{text: storableText(err.Error(), MaxReasonLen), at: now}
}

// breaker is the circuit breaker of one route (event type).
type breaker struct {
	state    string // BreakerClosed, BreakerOpen, BreakerHalfOpen
	failures int
	openedAt time.Time
	opens    int64
	// probe is the id of the half-open route's probe event, once claimed.
	probe string
}

// limiter is this Client's share of one route's limits.
type limiter struct {
	rate        float64 // tokens a second; 0: no rate limit
	burst       float64
	tokens      float64
	last        time.Time // the monotonic clock: rates are in real time
	concurrency int       // 0: no concurrency limit, unless limited
	limited     bool      // concurrency applies (RoutePolicy.Concurrency > 0)
	// backlog: the route's last claim was full, so that more is waiting.
	backlog bool
}

func newGate(cfg Config, reg *Registry) *gate {
	g := &gate{
		reg: reg, claimAll: cfg.ClaimAll || cfg.UnroutedRetry < 0, owner: cfg.Owner, mode: cfg.Mode.String(), clock: cfg.Clock,
		log: cfg.Logger.With("outbox_owner", cfg.Owner), metrics: cfg.Metrics,
		breakerFailures: cfg.BreakerFailures, breakerInterval: cfg.BreakerInterval,
		policies: limitingRoutes(cfg.Routes), paused: map[string]bool{}, breakers: map[string]*breaker{},
		limits: map[string]*limiter{}, inFlight: map[string]int{}, hotProbes: cfg.Mode == ModeHotPathOnly,
	}
	g.mu.Lock()
	g.shareLimits()
	g.mu.Unlock()
	g.calm.Store(true)
	return g
}

// limitingRoutes returns the entries of routes that limit deliveries
// (a TTL is the writer's), nil if none does.
func limitingRoutes(routes map[string]RoutePolicy) map[string]RoutePolicy {
	var out map[string]RoutePolicy
	for t, p := range routes {
		if p.limits() {
			if out == nil {
				out = make(map[string]RoutePolicy)
			}
			out[t] = p
		}
	}
	return out
}

// settle updates calm; g.mu is held.
func (g *gate) settle() {
	calm := len(g.paused) == 0
	for _, b := range g.breakers {
		if b.state != BreakerClosed {
			calm = false
		}
	}
	g.calm.Store(calm)
}

// routes returns the event types this Client routes, sorted, or nil when
// it claims every type (a catch-all route, or Config.ClaimAll).
func (g *gate) routes() []string {
	if g.claimAll || g.reg == nil {
		return nil
	}
	return g.reg.routedTypes()
}

// node is this Client as it reports itself to the table at now.
func (g *gate) node(now time.Time) Node {
	if g.started.IsZero() {
		g.started = now
	}
	return Node{Owner: g.owner, Mode: g.mode, Types: g.routes(), Started: g.started, Seen: now}
}

// request returns the type filters of the main claim; ok is false while
// it may claim nothing (PauseAll, or no route at all). Each filter stays
// within MaxClaimTypes: a Client that routes more types claims every type
// but those it skips (their unrouted events are offered again after
// UnroutedRetry, as with ClaimAll), a skip list that would be longer is
// folded into the routed types, and past that only its first
// MaxClaimTypes are skipped — limited routes first, then open breakers,
// then pauses, whose events the workers give back unstarted (admits).
func (g *gate) request() (types, skip []string, ok bool) {
	types = g.routes()
	if types != nil && len(types) == 0 {
		return nil, nil, false
	}
	if len(types) > MaxClaimTypes {
		g.warnOnce(&g.warnedTypes, "outbox: this client routes more event types than one claim filters on; it claims every type but those held back, and offers the unrouted ones again after UnroutedRetry",
			"routed_types", len(types), "max", MaxClaimTypes)
		types = nil
	}
	g.mu.RLock()
	if g.paused[PauseAll] {
		g.mu.RUnlock()
		return nil, nil, false
	}
	for t := range g.limits {
		if !g.paused[t] && !g.open(t) {
			skip = append(skip, t)
		}
	}
	for t, b := range g.breakers {
		if b.state != BreakerClosed && !g.paused[t] {
			skip = append(skip, t)
		}
	}
	for t := range g.paused {
		skip = append(skip, t)
	}
	g.mu.RUnlock()
	if len(skip) > MaxClaimTypes {
		if types != nil {
			types = slices.DeleteFunc(types, func(t string) bool { return slices.Contains(skip, t) })
			return types, nil, len(types) > 0
		}
		g.warnOnce(&g.warnedSkip, "outbox: more event types are held back than one claim skips; the rest are claimed and given back unstarted",
			"held_back", len(skip), "max", MaxClaimTypes)
		skip = skip[:MaxClaimTypes]
	}
	slices.Sort(skip)
	return types, skip, true
}

// warnOnce logs msg the first time flag is set.
func (g *gate) warnOnce(flag *atomic.Bool, msg string, args ...any) {
	if flag.CompareAndSwap(false, true) {
		g.log.Warn(msg, args...)
	}
}

// quiet reports, under the read lock, that t's breaker (if any) is closed
// with no failure counted and no probe out: a success changes nothing.
func (g *gate) quiet(t string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	b := g.breakers[t]
	return b == nil || b.state == BreakerClosed && b.failures == 0 && b.probe == ""
}

// open reports whether t's breaker holds it back; g.mu is held.
func (g *gate) open(t string) bool {
	b := g.breakers[t]
	return b != nil && b.state != BreakerClosed
}

// sideClaim is a claim of one route's events apart from the main claim:
// a half-open breaker's probe, or a limited route's share.
type sideClaim struct {
	typ   string
	limit int
	probe bool
}

// sideClaims returns the claims of single routes due at now, with room
// events at most between them, taking the limits' tokens (give back what
// a claim did not use with claimedSide).
func (g *gate) sideClaims(now time.Time, room int) []sideClaim {
	if g.calm.Load() && len(g.policies) == 0 {
		return nil // every breaker closed, no limited route: no lock, no scan
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused[PauseAll] || room <= 0 {
		return nil
	}
	var out []sideClaim
	for _, t := range sortedKeys(g.breakers) {
		b := g.breakers[t]
		if room <= 0 {
			break
		}
		if g.paused[t] || b.state == BreakerClosed || b.probe != "" {
			continue
		}
		if b.state == BreakerOpen && now.Sub(b.openedAt) < g.breakerInterval {
			continue
		}
		if b.state == BreakerOpen {
			g.transition(t, b, BreakerHalfOpen, nil)
		}
		if _, limited := g.limits[t]; limited && !g.limits[t].take(1) {
			continue // a probe is a delivery of the route: within its limits
		}
		out = append(out, sideClaim{typ: t, limit: 1, probe: true})
		room--
	}
	at := time.Now() // the limits' rates are in real time
	for _, t := range sortedKeys(g.limits) {
		if room <= 0 {
			break
		}
		if g.paused[t] || g.open(t) {
			continue
		}
		l := g.limits[t]
		n := room
		if l.limited {
			n = min(n, l.concurrency-g.inFlight[t])
		}
		if l.rate > 0 {
			l.refill(at)
			n = min(n, int(l.tokens))
		}
		if n <= 0 {
			continue
		}
		if l.rate > 0 {
			l.tokens -= float64(n)
		}
		out = append(out, sideClaim{typ: t, limit: n})
		room -= n
	}
	return out
}

// claimedSide records what the side claim s got: its probe, or the
// tokens it did not use, given back.
func (g *gate) claimedSide(s sideClaim, recs []Record) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s.probe {
		b := g.breakers[s.typ]
		if b != nil && b.state == BreakerHalfOpen && len(recs) > 0 {
			b.probe = recs[0].ID
		}
		if len(recs) == 0 && g.limits[s.typ] != nil {
			g.limits[s.typ].giveBack(1)
		}
		return
	}
	if l := g.limits[s.typ]; l != nil {
		l.backlog = len(recs) == s.limit
		l.giveBack(s.limit - len(recs))
	}
}

// wait returns how soon a limited route with a backlog has its next
// token, or max when none waits for one.
func (g *gate) wait(maxWait time.Duration) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := maxWait
	for _, l := range g.limits {
		if l.backlog && l.rate > 0 {
			need := max(1-l.tokens, 0)
			w = min(w, time.Duration(need/l.rate*float64(time.Second))+time.Millisecond)
		}
	}
	return w
}

// hot reports whether a write of events may take the hot path: every one
// is routed by this Client (unless it claims every type), and none is
// paused, held back by a breaker, or of a limited route (those are left
// to the claims that keep the limits).
func (g *gate) hot(events []Envelope) bool {
	if !g.claimAll && g.reg != nil {
		for _, e := range events {
			if g.reg.listenerFor(e.AggregateType(), e.Type()) == nil {
				return false // another service's: left to its pollers
			}
		}
	}
	if g.calm.Load() && !g.limitedAny(events) {
		return true
	}
	g.mu.RLock()
	hot, probe := g.hotLocked(events)
	g.mu.RUnlock()
	if probe {
		return g.hotProbe(events)
	}
	return hot
}

// limitedAny reports whether one of events is of a limited route. It
// takes no lock: g.policies never changes.
func (g *gate) limitedAny(events []Envelope) bool {
	if len(g.policies) == 0 {
		return false
	}
	for _, e := range events {
		if _, ok := g.policies[e.Type()]; ok {
			return true
		}
	}
	return false
}

// hotLocked is hot under g.mu's read lock; probe reports that the write
// is held back by breakers only, which may probe with it (hotProbes).
func (g *gate) hotLocked(events []Envelope) (hot, probe bool) {
	if g.paused[PauseAll] {
		return false, false
	}
	hot = true
	for _, e := range events {
		t := e.Type()
		if g.paused[t] {
			return false, false
		}
		if _, ok := g.limits[t]; ok {
			return false, false
		}
		if g.open(t) {
			hot, probe = false, g.hotProbes
		}
	}
	return hot, probe
}

// hotProbe reports whether a write held back by breakers may take the
// hot path as their probe, in a Client without a poller: every open
// breaker it meets is due for a probe (half-open, none in flight). The
// first of its events that a worker reaches is the probe (see admits).
func (g *gate) hotProbe(events []Envelope) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := utcNow(g.clock)
	for _, e := range events {
		b := g.breakers[e.Type()]
		if b == nil || b.state == BreakerClosed {
			continue
		}
		if b.probe != "" || b.state == BreakerOpen && now.Sub(b.openedAt) < g.breakerInterval {
			return false
		}
	}
	for _, e := range events {
		if b := g.breakers[e.Type()]; b != nil && b.state == BreakerOpen {
			g.transition(e.Type(), b, BreakerHalfOpen, nil)
		}
	}
	return true
}

// admits reports whether a queued event may start now: its type is not
// paused, and its breaker is closed, or e is the half-open breaker's
// probe. One that may not is given back unstarted.
func (g *gate) admits(e Envelope) bool {
	if g.calm.Load() {
		return true
	}
	t := e.Type()
	g.mu.RLock()
	if g.paused[PauseAll] || g.paused[t] {
		g.mu.RUnlock()
		return false
	}
	b := g.breakers[t]
	if b == nil || b.state == BreakerClosed || b.probe == e.ID() {
		g.mu.RUnlock()
		return true
	}
	g.mu.RUnlock()
	if !g.hotProbes {
		return false
	}
	g.mu.Lock() // a hot probe: the first event of a half-open route
	defer g.mu.Unlock()
	if b.state == BreakerHalfOpen && b.probe == "" {
		b.probe = e.ID()
		return true
	}
	return false
}

// held and ended count the held events of the limited routes: held
// reports whether it counted one of type t.
func (g *gate) held(t string) bool {
	if _, limited := g.policies[t]; !limited { // g.policies never changes: no lock
		return false
	}
	g.mu.Lock()
	g.inFlight[t]++
	g.mu.Unlock()
	return true
}

func (g *gate) ended(t string) {
	g.mu.Lock()
	if g.inFlight[t] > 0 {
		g.inFlight[t]--
	}
	l := g.limits[t]
	wake := l != nil && l.backlog && l.limited && g.wake != nil
	g.mu.Unlock()
	if wake { // room for the next event of a limited route with a backlog
		g.wake()
	}
}

// observe counts the outcome o of a delivery of e in its route's breaker.
// A success closes it; a failure counts, and opens it at BreakerFailures
// in a row (or at once, for a probe). Not failures of the route: a
// RetryAfter (the listener asked for a delay), ErrPermanent (the event is
// at fault, not the downstream), an unroutable or undecodable event (no
// delivery ran). A release (Close, a pause) is no outcome.
func (g *gate) observe(e Envelope, o outcome) {
	if g.breakerFailures <= 0 {
		return // no breakers, no probes
	}
	if o.verdict == settleRelease {
		g.clearProbe(e)
		return
	}
	if o.verdict != settleDone && !routeFailure(o.err) {
		g.clearProbe(e)
		return
	}
	t := e.Type()
	if o.verdict == settleDone && g.quiet(t) {
		return // a success of a route that has nothing to reset
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.breakers[t]
	if b == nil {
		if o.verdict == settleDone {
			return
		}
		if len(g.breakers) >= maxBreakers {
			return
		}
		b = &breaker{state: BreakerClosed}
		g.breakers[t] = b
	}
	probe := b.probe == e.ID()
	if probe {
		b.probe = ""
	}
	if o.verdict == settleDone {
		b.failures = 0
		if b.state != BreakerClosed && (probe || b.state == BreakerHalfOpen) {
			g.transition(t, b, BreakerClosed, nil)
		}
		return
	}
	b.failures++
	switch {
	case b.state == BreakerHalfOpen && probe:
		g.transition(t, b, BreakerOpen, o.err)
	case b.state == BreakerClosed && b.failures >= g.breakerFailures:
		g.transition(t, b, BreakerOpen, o.err)
	}
}

// maxBreakers bounds the breakers a Client keeps: one per type it routes,
// or, with a catch-all route, per type it delivered.
const maxBreakers = 10_000

// routeFailure reports whether err, a delivery's failure, counts against
// its route (see observe).
func routeFailure(err error) bool {
	var ra *RetryAfterError
	var bad *undecodableError
	return err != nil && !errors.As(err, &ra) && !errors.Is(err, ErrPermanent) && !errors.Is(err, ErrUnroutable) && !errors.As(err, &bad)
}

// clearProbe forgets e as its route's probe: its delivery had no outcome
// for the breaker, and another event may probe.
func (g *gate) clearProbe(e Envelope) {
	g.mu.Lock()
	if b := g.breakers[e.Type()]; b != nil && b.probe == e.ID() {
		b.probe = ""
	}
	g.mu.Unlock()
}

// transition moves b, t's breaker, to state, logs and counts it; g.mu is
// held.
func (g *gate) transition(t string, b *breaker, state string, cause error) {
	from := b.state
	b.state = state
	switch state {
	case BreakerOpen:
		b.openedAt = utcNow(g.clock)
		if from == BreakerClosed {
			b.opens++
			g.log.Warn("outbox: circuit breaker opened: the route's events are left pending, their attempts unused, and one probe is delivered per interval",
				"event_type", t, "failures", b.failures, "probe_interval", g.breakerInterval, "error", cause)
		}
	case BreakerClosed:
		g.log.Info("outbox: circuit breaker closed: the route delivers again", "event_type", t, "open_for", utcNow(g.clock).Sub(b.openedAt))
		b.openedAt, b.failures = time.Time{}, 0
	case BreakerHalfOpen:
		g.log.Debug("outbox: circuit breaker half-open: probing the route", "event_type", t)
	}
	g.metrics.BreakerState(t, state)
	g.settle()
}

// setPauses replaces the pauses this Client obeys; changed reports
// whether the paused scopes changed.
func (g *gate) setPauses(ps []Pause) (changed bool) {
	m := make(map[string]bool, len(ps))
	for _, p := range ps {
		m[p.Scope] = true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for s := range g.paused {
		if !m[s] {
			changed = true
			g.metrics.Paused(s, false)
			g.log.Info("outbox: delivery resumed", "scope", s)
		}
	}
	for _, p := range ps {
		if !g.paused[p.Scope] {
			changed = true
			g.metrics.Paused(p.Scope, true)
			g.log.Info("outbox: delivery paused", "scope", p.Scope, "by", p.By, "reason", p.Reason)
		}
	}
	g.pauses, g.paused = ps, m
	g.settle()
	return changed
}

// setNodes replaces the live nodes and shares the limits among them.
func (g *gate) setNodes(ns []Node) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nodes = ns
	g.shareLimits()
}

// shareLimits sets this Client's share of each route's limits: an equal
// share of the live nodes that route the type (itself included), the
// remainder of a concurrency going to the first owners by name. g.mu is
// held.
func (g *gate) shareLimits() {
	for t, p := range g.policies {
		owners := []string{g.owner}
		for _, n := range g.nodes {
			if n.Owner != g.owner && n.routes(t) {
				owners = append(owners, n.Owner)
			}
		}
		sort.Strings(owners)
		k := len(owners)
		rank := slices.Index(owners, g.owner)
		l, fresh := g.limits[t], false
		if l == nil {
			l, fresh = &limiter{last: time.Now()}, true
			g.limits[t] = l
		}
		l.rate, l.limited = p.Rate/float64(k), p.Concurrency > 0
		if p.Rate > 0 {
			burst := p.Burst
			if burst <= 0 {
				burst = max(1, int(math.Ceil(p.Rate)))
			}
			l.burst = max(1, math.Ceil(float64(burst)/float64(k)))
			if fresh {
				l.tokens = l.burst
			}
			l.tokens = min(l.tokens, l.burst)
		}
		if l.limited {
			l.concurrency = p.Concurrency / k
			if rank < p.Concurrency%k {
				l.concurrency++
			}
		}
	}
}

// refill adds the tokens earned since l.last.
func (l *limiter) refill(now time.Time) {
	if el := now.Sub(l.last); el > 0 {
		l.tokens = min(l.burst, l.tokens+l.rate*el.Seconds())
	}
	l.last = now
}

// take takes n tokens, if l has a rate and them.
func (l *limiter) take(n int) bool {
	if l.rate <= 0 {
		return true
	}
	l.refill(time.Now())
	if l.tokens < float64(n) {
		return false
	}
	l.tokens -= float64(n)
	return true
}

func (l *limiter) giveBack(n int) {
	if l.rate > 0 && n > 0 {
		l.tokens = min(l.burst, l.tokens+float64(n))
	}
}

// polled records the outcome of a poll (err: nil for a success) at now,
// controlled the control refresh's (Health).
func (g *gate) polled(err error, now time.Time) {
	g.mu.Lock()
	if err == nil {
		g.lastPoll = now
	}
	g.pollErr.set(err, now)
	g.mu.Unlock()
}

func (g *gate) controlled(err error, now time.Time) {
	g.mu.Lock()
	g.ctlErr.set(err, now)
	g.mu.Unlock()
}

// health fills h with what the gate knows.
func (g *gate) health(h *Health) {
	g.mu.Lock()
	defer g.mu.Unlock()
	h.LastPoll, h.LastError, h.LastErrorAt = g.lastPoll, g.pollErr.text, g.pollErr.at
	if g.ctlErr.text != "" && g.ctlErr.at.After(h.LastErrorAt) {
		h.LastError, h.LastErrorAt = g.ctlErr.text, g.ctlErr.at
	}
	h.Paused = slices.Clone(g.pauses)
	h.Nodes = len(g.nodes)
	types := map[string]bool{}
	for t := range g.breakers {
		types[t] = true
	}
	for t := range g.limits {
		types[t] = true
	}
	for t := range g.paused {
		if t != PauseAll {
			types[t] = true
		}
	}
	for _, t := range sortedKeys(types) {
		rs := RouteState{Type: t, Breaker: BreakerClosed, Paused: g.paused[t] || g.paused[PauseAll], InFlight: g.inFlight[t]}
		if b := g.breakers[t]; b != nil {
			rs.Breaker, rs.Failures, rs.OpenedAt, rs.Opens = b.state, b.failures, b.openedAt, b.opens
		}
		if l := g.limits[t]; l != nil {
			rs.Rate, rs.Concurrency = l.rate, l.concurrency
		}
		h.Routes = append(h.Routes, rs)
	}
}

// routedTypes returns the event types r routes, sorted, or nil when it
// has a catch-all route (HandleAll): those a Client claims.
func (r *Registry) routedTypes() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.all != nil {
		return nil
	}
	out := make([]string, 0, len(r.any)+len(r.exact))
	for t := range r.any {
		out = append(out, t)
	}
	for k := range r.exact {
		out = append(out, k.event)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
