package protomodel

import (
	"fmt"
	"slices"
)

// kind is the kind of an action. The kinds up to tick are the calm ones
// (see progress), in the order the calm schedule prefers them.
type kind uint8

const (
	kRestart kind = iota
	kFinishOK
	kFlush
	kContinue
	kStart
	kClaim
	kClaimFresh
	kTick
	kFinishFail
	kNoContinue
	kLapse
	kCrash
)

// calm reports whether k is an action of the calm schedule: no crash, no
// failure, no lost heartbeat.
func (k kind) calm() bool { return k <= kTick }

// violation is a broken invariant.
type violation struct {
	invariant string
	detail    string
}

// succ is one successor of a state: the action taken and what it led to.
type succ struct {
	kind  kind
	label string
	next  *state
	bad   *violation
}

// step is one action being applied to a copy of a state.
type step struct {
	cfg   *config
	s     *state
	n     int // the node acting
	bad   *violation
	notes []string
}

func (t *step) violate(inv, format string, args ...any) {
	if t.bad == nil {
		t.bad = &violation{invariant: inv, detail: fmt.Sprintf(format, args...)}
	}
}

func (t *step) note(format string, args ...any) {
	t.notes = append(t.notes, fmt.Sprintf(format, args...))
}

func (t *step) me() uint8 { return uint8(t.n + 1) }

func (t *step) node() *node { return &t.s.nodes[t.n] }

// successors calls emit with every state s leads to in one action.
func successors(cfg *config, s *state, emit func(succ)) {
	try := func(k kind, n int, label string, act func(t *step) bool) {
		t := &step{cfg: cfg, s: s.clone(), n: n}
		if !act(t) {
			return
		}
		if len(t.notes) > 0 {
			label += " (" + join(t.notes) + ")"
		}
		emit(succ{kind: k, label: label, next: t.s, bad: t.bad})
	}
	// Time passes; before it, each node's heartbeat renews its claims, or
	// fails (an outage). A DONE is written or given up before (its writes
	// are retried for about 1.5 s, a tick is Lease/2), and a listener
	// returns before its ListenerTimeout unless it hangs.
	for mask := 0; mask < 1<<cfg.nodes; mask++ {
		ok, k, label := true, kTick, "time passes"
		var fails []int
		for n := range cfg.nodes {
			if mask&(1<<n) != 0 {
				ok = ok && s.nodes[n].up && len(s.nodes[n].units) > 0
				fails = append(fails, n)
			}
		}
		if !ok || len(fails) > int(s.outages) {
			continue
		}
		if len(fails) > 0 {
			k, label = kLapse, fmt.Sprintf("the heartbeat of %v fails, time passes", fails)
		}
		try(k, -1, label, func(t *step) bool {
			t.s.outages -= uint8(len(fails))
			for n := range cfg.nodes {
				if t.s.nodes[n].up && !slices.Contains(fails, n) {
					t.n = n
					t.renew()
				}
			}
			return t.tick()
		})
	}
	for n := range cfg.nodes {
		nd := &s.nodes[n]
		if !nd.up {
			try(kRestart, n, fmt.Sprintf("n%d restarts", n), (*step).restart)
			continue
		}
		if s.crashes > 0 {
			try(kCrash, n, fmt.Sprintf("n%d crashes", n), func(t *step) bool { t.s.crashes--; t.down(); return true })
		}
		try(kClaim, n, fmt.Sprintf("n%d claims, recovering expired claims", n), func(t *step) bool { return t.claim(true) })
		try(kClaimFresh, n, fmt.Sprintf("n%d claims", n), func(t *step) bool { return t.claim(false) })
		for u := range nd.units {
			un := &nd.units[u]
			switch un.phase {
			case idle:
				try(kStart, n, fmt.Sprintf("n%d starts e%d", n, un.items[un.next].ev), func(t *step) bool { return t.start(u) })
			case running:
				e := un.items[un.next-1].ev
				try(kFinishOK, n, fmt.Sprintf("n%d: listener of e%d returns", n, e), func(t *step) bool { return t.finish(u, true) })
				if s.failures > 0 && !cfg.events[e].poison {
					try(kFinishFail, n, fmt.Sprintf("n%d: listener of e%d fails", n, e), func(t *step) bool { return t.finish(u, false) })
				}
			case acking:
				e := un.items[un.next-1].ev
				if !un.flushed {
					try(kFlush, n, fmt.Sprintf("n%d writes DONE of e%d", n, e), func(t *step) bool { return t.flush(u, true) })
					if s.outages > 0 {
						try(kLapse, n, fmt.Sprintf("n%d cannot write DONE of e%d", n, e), func(t *step) bool { t.s.outages--; return t.flush(u, false) })
					}
				}
				if un.more && !un.asked && int(un.next) == len(un.items) {
					try(kContinue, n, fmt.Sprintf("n%d continues the run after e%d", n, e), func(t *step) bool { return t.continueRun(u) })
					try(kNoContinue, n, fmt.Sprintf("n%d does not continue the run after e%d (its worker has an event waiting)", n, e), func(t *step) bool {
						t.node().units[u].more = false
						t.advance(u)
						return true
					})
				}
			}
		}
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "; "
		}
		out += x
	}
	return out
}

// tick advances the clock by one tick: leases run, deliveries age, delays
// pass. It is no action when nothing changes.
func (t *step) tick() bool {
	changed := false
	hang := false
	for n := range t.cfg.nodes {
		for _, u := range t.s.nodes[n].units {
			switch {
			case u.phase == acking && !u.flushed:
				return false // the DONE is written, or given up, first
			case u.phase == running && u.runAge+1 == t.cfg.timeout:
				hang = true
			}
		}
	}
	if hang {
		if t.s.hangs == 0 {
			return false // the listener returns first
		}
		t.s.hangs--
		t.note("a listener outlives its ListenerTimeout")
	}
	inc := func(v *uint8, limit uint8) {
		if *v < limit {
			*v++
			changed = true
		}
	}
	for i := range t.cfg.events {
		r := &t.s.rows[i]
		if r.owner != noOwner && r.status == pending {
			inc(&r.lockAge, t.cfg.lease)
			inc(&r.ownAge, t.cfg.lease)
		}
		if r.delay > 0 {
			r.delay--
			changed = true
		}
	}
	for n := range t.cfg.nodes {
		for u := range t.s.nodes[n].units {
			un := &t.s.nodes[n].units[u]
			for i := range un.items {
				if un.items[i].current {
					inc(&un.items[i].age, t.cfg.lease)
				}
			}
			if un.started {
				inc(&un.runAge, t.cfg.timeout)
			}
		}
	}
	return changed
}

func (t *step) restart() bool {
	t.node().up = true
	return true
}

// down ends the node's process: its local state is lost, its rows are a
// dead process's.
func (t *step) down() {
	nd := t.node()
	nd.up, nd.units = false, nil
	for i := range t.cfg.events {
		if t.s.rows[i].owner == t.me() {
			t.s.rows[i].owner = deadOwner
		}
	}
}

// holds reports whether the node holds e's row: pending, locked by it.
func (t *step) holds(e int8) bool {
	r := &t.s.rows[e]
	return r.status == pending && r.owner == t.me()
}

// release is Store.Release of ids, fenced: it drops this owner's claims.
func (t *step) release(ids []int8) {
	for _, e := range ids {
		if t.holds(e) {
			r := &t.s.rows[e]
			r.owner, r.lockAge, r.ownAge = noOwner, 0, 0
		}
	}
}

// lock claims e's row for this node now.
func (t *step) lock(e int8) {
	r := &t.s.rows[e]
	r.owner, r.lockAge, r.ownAge = t.me(), 0, 0
}

// earlierOpen reports whether an event of e's key before it holds it
// back: one that is pending, or DEAD under DeadBlocksKey.
func (t *step) earlierOpen(e int8) bool {
	k := t.cfg.events[e].key
	for j := int8(0); j < e; j++ {
		if t.cfg.events[j].key != k {
			continue
		}
		switch t.s.rows[j].status {
		case pending:
			return true
		case dead:
			if !t.cfg.deadSkips {
				return true
			}
		}
	}
	return false
}

// claimable reports whether e's row may be claimed fresh: pending,
// unclaimed and due.
func (t *step) claimable(e int8) bool {
	r := &t.s.rows[e]
	return r.status == pending && r.owner == noOwner && r.delay == 0
}

// claimRun claims up to n events that follow e on its key, in Seq order,
// each pending, unclaimed and due, up to the first that is not, and none
// while an open event of the key comes before e (the store's
// claimRunHeads, of a claim's runs and of ContinueRuns).
func (t *step) claimRun(e int8, n int) []int8 {
	if t.earlierOpen(e) {
		return nil // an event before it goes first, as a head (runSQL)
	}
	var recs []int8
	for next := e + 1; int(next) < len(t.cfg.events) && len(recs) < n; next++ {
		if t.cfg.events[next].key != t.cfg.events[e].key {
			continue
		}
		if !t.claimable(next) {
			break
		}
		t.lock(next)
		recs = append(recs, next)
	}
	return recs
}

// claim is claims.claim: Store.Claim (the recovery of expired claims
// with headsOnly, then the heads of the keys and their runs, and the
// unordered due rows), admitAll and the poller's dispatcher.enqueueClaimed.
func (t *step) claim(recover bool) bool {
	cfg := t.cfg
	var recs []int8
	if recover {
		expiredAt := cfg.lease
		if cfg.mutant == leaseEarly {
			expiredAt--
		}
		var got []int8
		for e := range int8(len(cfg.events)) {
			r := &t.s.rows[e]
			if r.status != pending || r.owner == noOwner || r.lockAge < expiredAt {
				continue
			}
			if r.ownAge < cfg.lease {
				t.violate("RenewedNotTakenOver", "e%d taken over from %s, which claimed or renewed it %d ticks ago (lease %d)", e, ownerName(r.owner), r.ownAge, cfg.lease)
			}
			if r.last != errInFlight {
				r.last = errExpired
			}
			t.lock(e)
			got = append(got, e)
		}
		// headsOnly: an ordered event behind an open one of its key is given back.
		for _, e := range got {
			if cfg.events[e].key != 0 && cfg.mutant != recoverNonHeads && t.earlierOpen(e) {
				t.release([]int8{e})
				continue
			}
			recs = append(recs, e)
		}
	}
	// The heads of the keys, each with its run.
	for k := int8(1); k <= maxEvents; k++ {
		head := int8(-1)
		for e := range int8(len(cfg.events)) {
			if cfg.events[e].key != k {
				continue
			}
			st := t.s.rows[e].status
			if st == done || (st == dead && cfg.deadSkips) {
				continue
			}
			head = e
			break
		}
		if head < 0 || !t.claimable(head) {
			continue
		}
		t.lock(head)
		recs = append(recs, head)
		recs = append(recs, t.claimRun(head, cfg.run-1)...)
	}
	for e := range int8(len(cfg.events)) {
		if cfg.events[e].key == 0 && t.claimable(e) {
			t.lock(e)
			recs = append(recs, e)
		}
	}
	if len(recs) == 0 {
		return false
	}
	slices.Sort(recs) // a key's run in Seq order (groupRuns)
	t.note("claimed %v", recs)
	for _, run := range t.groupRuns(t.admitAll(recs)) {
		t.enqueue(run)
	}
	return true
}

// admitAll is claims.admitAll: an event whose attempts are spent goes to
// DEAD at once (MarkDead, fenced), and the rest of its run is given back.
func (t *step) admitAll(recs []int8) []int8 {
	var out, back []int8
	cut := map[int8]bool{}
	for _, e := range recs {
		k := t.cfg.events[e].key
		if k != 0 && cut[k] {
			back = append(back, e)
			continue
		}
		if t.s.rows[e].attempts < t.cfg.maxAttempts {
			out = append(out, e)
			continue
		}
		if k != 0 {
			cut[k] = true
		}
		t.markEnd(e, dead, false)
		t.note("e%d's attempts are spent: DEAD", e)
	}
	t.release(back)
	return out
}

// groupRuns splits recs (in Seq order) into runs: the events of one key
// together, each unordered event alone.
func (t *step) groupRuns(recs []int8) [][]int8 {
	var runs [][]int8
	at := map[int8]int{}
	for _, e := range recs {
		k := t.cfg.events[e].key
		if k == 0 {
			runs = append(runs, []int8{e})
			continue
		}
		if i, ok := at[k]; ok {
			runs[i] = append(runs[i], e)
			continue
		}
		at[k] = len(runs)
		runs = append(runs, []int8{e})
	}
	return runs
}

// acquire is holds.acquire: it fails while e is held by a delivery within
// its deadline (or not started); a hold past it is replaced.
func (t *step) acquire(e int8) (item, bool) {
	nd := t.node()
	for u := range nd.units {
		un := &nd.units[u]
		for i := range un.items {
			it := &un.items[i]
			if it.ev != e || !it.current {
				continue
			}
			if !it.deadlined || un.runAge < t.cfg.timeout {
				return item{}, false
			}
			it.current = false // replaced: its delivery outlived its deadline
		}
	}
	r := &t.s.rows[e]
	return item{ev: e, suspect: r.last == errExpired || r.last == errInFlight, attempts: r.attempts, current: true}, true
}

// holdRun is dispatcher.holdRun: it holds recs up to the first held
// already, and returns the items and the ids after that one.
func (t *step) holdRun(recs []int8) (items []item, back []int8) {
	for i, e := range recs {
		it, ok := t.acquire(e)
		if !ok {
			return items, recs[i+1:]
		}
		items = append(items, it)
	}
	return items, nil
}

// continues is claims.continues.
func (t *step) continues(n int) bool { return t.cfg.run > 1 && n >= t.cfg.run }

// enqueue is dispatcher.enqueueClaimed and newWorkerRun: a run is held
// and queued for one worker.
func (t *step) enqueue(run []int8) {
	first, ok := t.acquire(run[0])
	if !ok {
		t.release(run[1:]) // being delivered here already: its run waits for it
		return
	}
	rest, back := t.holdRun(run[1:])
	t.release(back)
	items := append([]item{first}, rest...)
	nd := t.node()
	nd.units = append(nd.units, unit{items: items, more: t.continues(len(items))})
}

// giveBack is dispatcher.giveBack: the events of u not started yet are
// let go and released.
func (t *step) giveBack(u *unit) {
	var ids []int8
	for i := int(u.next); i < len(u.items); i++ {
		if u.items[i].current {
			u.items[i].current = false
			ids = append(ids, u.items[i].ev)
		}
	}
	t.release(ids)
}

func (t *step) removeUnit(u int) {
	nd := t.node()
	nd.units = slices.Delete(nd.units, u, u+1)
}

// renew is claims.renew: one Renew of the held events that are queued or
// delivering within their deadline; the holds whose rows are still this
// owner's are marked renewed (holds.renewedAt).
func (t *step) renew() bool {
	nd := t.node()
	var its []*item
	for u := range nd.units {
		un := &nd.units[u]
		for i := range un.items {
			if it := &un.items[i]; it.current && (!it.deadlined || un.runAge < t.cfg.timeout) {
				its = append(its, it)
			}
		}
	}
	if len(its) == 0 {
		return false
	}
	for _, it := range its {
		r := &t.s.rows[it.ev]
		if r.status != pending {
			continue
		}
		switch {
		case r.owner == t.me():
			r.lockAge, r.ownAge = 0, 0
		case t.cfg.mutant == renewAnyOwner && r.owner != noOwner:
			r.lockAge = 0
			t.violate("Fenced", "n%d's heartbeat renewed e%d, whose claim is %s's", t.n, it.ev, ownerName(r.owner))
		}
	}
	for _, it := range its {
		if t.holds(it.ev) || t.cfg.mutant == renewMarksAll || t.cfg.mutant == renewAnyOwner {
			it.age = 0
		}
	}
	return true
}

// start is the start of the next event of run u (dispatcher.step): a
// claim that lapsed while queued is let go (claims.expired), a taken-over
// event's attempt is counted first (claims.countAttempt), then its
// listener starts.
func (t *step) start(u int) bool {
	cfg := t.cfg
	un := &t.node().units[u]
	it := &un.items[un.next]
	e := it.ev
	un.next++
	stop := func() bool {
		t.giveBack(un)
		t.removeUnit(u)
		return true
	}
	if it.age >= cfg.lease {
		it.current = false
		t.note("its hold lapsed: let go")
		return stop()
	}
	un.charged = false
	if it.suspect && cfg.mutant != countAtEnd {
		if !t.holds(e) {
			it.current = false
			t.note("CountAttempt found the claim taken over")
			return stop()
		}
		r := &t.s.rows[e]
		r.attempts++
		r.last = errInFlight
		un.charged = true
		t.note("CountAttempt: attempts=%d", r.attempts)
	}
	if r := t.s.rows[e]; r.status == pending && r.owner != t.me() {
		t.violate("ExclusiveStart", "n%d starts e%d, whose claim is %s's", t.n, e, ownerName(r.owner))
	}
	k := cfg.events[e].key
	for j := int8(0); j < e && k != 0; j++ {
		if cfg.events[j].key != k {
			continue
		}
		if st := t.s.rows[j].status; st == pending || (st == dead && !cfg.deadSkips) {
			t.violate("KeyOrder", "n%d starts e%d while e%d of its key is %s", t.n, e, j, [...]string{"PENDING", "DONE", "DEAD"}[st])
		}
	}
	if r := &t.s.rows[e]; cfg.events[e].poison && r.starts < 15 { // counted for the poison event only
		r.starts++
	}
	un.phase, un.started, un.runAge = running, true, 0
	for i := int(un.next) - 1; i < len(un.items); i++ {
		un.items[i].deadlined = true // renewed until this delivery's deadline (holds.start, claims.delivering)
	}
	return true
}

// finish is the end of a listener (deliver.go and claims.decide, then
// claims.settleStep or settle): a poison event ends the process; a
// success waits for its DONE (acks.go); a failure gives back the rest of
// the run and writes RETRY or, its attempts spent, DEAD.
func (t *step) finish(u int, ok bool) bool {
	cfg := t.cfg
	un := &t.node().units[u]
	it := un.items[un.next-1]
	e := it.ev
	if cfg.events[e].poison {
		t.note("it ends the process")
		t.down()
		return true
	}
	if ok {
		t.s.rows[e].succeeded = true
		un.phase, un.flushed, un.doneOK = acking, false, false
		if cfg.mutant == runNoWait && int(un.next) < len(un.items) {
			// The DONE is left to the ack batch and the run goes on.
			un.items[un.next-1].current = false
			ack := unit{items: []item{it}, next: 1, phase: acking, started: true, runAge: un.runAge}
			un.phase = idle
			t.node().units = append(t.node().units, ack)
		}
		return true
	}
	t.s.failures--
	attempt := it.attempts + 1
	count := !un.charged
	t.giveBack(un)
	un.items[un.next-1].current = false
	st := pending
	if attempt >= cfg.maxAttempts {
		st = dead
	}
	t.markEnd(e, st, count)
	t.removeUnit(u)
	return true
}

// markEnd is MarkRetry (st pending) or MarkDead, fenced by the owner.
func (t *step) markEnd(e int8, st status, count bool) {
	if !t.holds(e) {
		t.note("e%d's outcome is fenced off", e)
		return
	}
	r := &t.s.rows[e]
	r.status, r.last, r.owner, r.lockAge, r.ownAge = st, errFailed, noOwner, 0, 0
	if count {
		r.attempts++
	}
	if st == pending {
		r.delay = t.cfg.retryDelay
	}
}

// flush writes the DONE of u's event that succeeded (claims.markDone),
// fenced, or gives it up (written unset: the database could not be
// reached), and lets go of its hold. A DONE that changed nothing lets its
// run go on if the row is DONE (claims.doneAnyway).
func (t *step) flush(u int, written bool) bool {
	un := &t.node().units[u]
	it := &un.items[un.next-1]
	e := it.ev
	r := &t.s.rows[e]
	applied := false
	switch {
	case !written:
	case t.holds(e):
		applied = true
	case t.cfg.mutant == unfencedDone && r.status == pending:
		applied = true
		t.violate("Fenced", "n%d's DONE of e%d applied to a row that is %s's", t.n, e, ownerName(r.owner))
	}
	if applied {
		r.status, r.owner, r.lockAge, r.ownAge, r.last = done, noOwner, 0, 0, errNone
	} else if written {
		t.note("stale: changed nothing")
	}
	it.current = false
	// doneAnyway: a stale DONE lets the run go on if the row is DONE,
	// whoever stored it.
	un.flushed, un.doneOK = true, applied || (written && r.status == done)
	t.advance(u)
	return true
}

// continueRun is claims.continueRuns (RunContinuer.ContinueRuns): the
// events after u's last one on its key, each pending, unclaimed and due,
// up to the first that is not, at most Run.
func (t *step) continueRun(u int) bool {
	un := &t.node().units[u]
	recs := t.claimRun(un.items[len(un.items)-1].ev, t.cfg.run)
	t.note("claimed %v", recs)
	un.asked, un.cont = true, t.admitAll(recs)
	t.advance(u)
	return true
}

// advance is the end of a round of deliverRuns and endRound: once the
// DONE of u's event is written (and ContinueRuns answered), the run goes
// on if it is stored, and gives back the rest otherwise.
func (t *step) advance(u int) {
	un := &t.node().units[u]
	if !un.flushed || (un.more && !un.asked && int(un.next) == len(un.items)) {
		return
	}
	switch {
	case !un.doneOK:
		t.giveBack(un)
		t.release(un.cont)
		t.removeUnit(u)
	case int(un.next) < len(un.items):
		un.phase = idle
	case len(un.cont) > 0:
		cont := un.cont
		un.cont, un.asked = nil, false
		rest, back := t.holdRun(cont)
		t.release(back)
		if len(rest) == 0 {
			t.removeUnit(u)
			return
		}
		un = &t.node().units[u]
		un.items = append(un.items, rest...)
		un.more = len(back) == 0 && t.continues(len(cont))
		un.phase = idle
	default:
		t.removeUnit(u)
	}
}
