package protomodel

import (
	"fmt"
	"slices"
	"strings"
)

// The sizes the state's arrays are made for.
const (
	maxEvents = 4
	maxNodes  = 3
)

// event is one event of the table, in insertion order (its index is its
// Seq): key is its ordering key (0: none, 1, 2, …); a poison event ends
// the process of whoever delivers it.
type event struct {
	key    int8
	poison bool
}

// mutant brings back one earlier bug (see mutants).
type mutant uint8

// The mutants; the zero mutant is the engine as it is.
const (
	// countAtEnd counts the attempt of a taken-over event when its
	// listener returns instead of before it starts (CountAttempt).
	countAtEnd mutant = iota + 1
	// renewAnyOwner renews the claims of the ids a heartbeat sends
	// without checking that they are still its own.
	renewAnyOwner
	// unfencedDone writes DONE without checking the owner.
	unfencedDone
	// recoverNonHeads lets the recovery of expired claims keep ordered
	// events that are not the head of their key (no headsOnly).
	recoverNonHeads
	// runNoWait starts the next event of a run once the one before it
	// succeeded, without waiting for its DONE to be stored.
	runNoWait
	// leaseEarly takes a claim over one tick before its lease ran out.
	leaseEarly
	// renewMarksAll marks every hold a heartbeat sent renewed, also those
	// whose rows were taken over meanwhile.
	renewMarksAll
)

var mutantNames = [...]string{"faithful", "countAtEnd", "renewAnyOwner", "unfencedDone", "recoverNonHeads", "runNoWait", "leaseEarly", "renewMarksAll"}

// String returns the mutant's name in the test names and logs.
func (m mutant) String() string { return mutantNames[m] }

// config is one size of the model.
type config struct {
	events []event
	nodes  int
	// lease and timeout (ListenerTimeout) are in ticks of the clock.
	lease, timeout uint8
	maxAttempts    uint8
	run            int  // Config.OrderedRun
	deadSkips      bool // DeadSkipsKey (else DeadBlocksKey)
	// The faults that may happen: process crashes (a poison event's are
	// not counted), listener failures, outages (a heartbeat, or the write
	// of a DONE, that fails: the database cannot be reached) and hangs (a
	// listener that outlives its ListenerTimeout).
	crashes, failures, outages, hangs uint8
	// retryDelay is a retry's backoff, in ticks.
	retryDelay uint8
	mutant     mutant
}

func (c config) String() string {
	var ev []string
	for i, e := range c.events {
		s := fmt.Sprintf("e%d", i)
		if e.key > 0 {
			s += fmt.Sprintf("/k%d", e.key)
		}
		if e.poison {
			s += "/poison"
		}
		ev = append(ev, s)
	}
	policy := "DeadBlocksKey"
	if c.deadSkips {
		policy = "DeadSkipsKey"
	}
	return fmt.Sprintf("events=[%s] nodes=%d lease=%d timeout=%d maxAttempts=%d run=%d %s crashes=%d failures=%d outages=%d hangs=%d mutant=%s",
		strings.Join(ev, " "), c.nodes, c.lease, c.timeout, c.maxAttempts, c.run, policy, c.crashes, c.failures, c.outages, c.hangs, c.mutant)
}

// status is a row's status: NEW and RETRY are one (pending).
type status uint8

const (
	pending status = iota
	done
	dead
)

// lastErr is what a row's last_error says, as far as the protocol reads it.
type lastErr uint8

const (
	errNone     lastErr = iota
	errExpired          // ErrClaimExpired: taken over
	errInFlight         // ErrInFlight: CountAttempt, the delivery started
	errFailed           // a listener's failure
)

// Owners: a row is locked by nobody, by the current process of a node
// (1 + its index), or by a process that died (all alike: they write
// nothing any more).
const (
	noOwner   uint8 = 0
	deadOwner uint8 = 255
)

// row is an event's row in the table.
type row struct {
	status   status
	attempts uint8
	last     lastErr
	owner    uint8
	lockAge  uint8 // ticks since locked_at, capped at the lease
	delay    uint8 // ticks until available_at
	// The ghosts: what the invariants read, no column of the table.
	succeeded bool  // a delivery of it succeeded
	starts    uint8 // its listener's starts (capped)
	ownAge    uint8 // ticks since its owner claimed or renewed it itself, capped at the lease
}

// phase is where a worker's run is.
type phase uint8

const (
	idle    phase = iota // its next event is to start
	running              // the listener of items[next-1] runs
	acking               // items[next-1] succeeded, its DONE is not written yet
)

// item is one event of a run a node holds: the hold (claims.hold) and the
// record as the claim read it.
type item struct {
	ev       int8
	age      uint8 // ticks since the hold's last renewal, capped at the lease
	suspect  bool  // taken over (takenOver): the attempt is counted before it starts
	attempts uint8 // as claimed
	current  bool  // still held (holds.m points to it)
	// deadlined: its hold has the deadline of its run's last start (the
	// unit's runAge tells how far it is): past it, the hold is not
	// renewed, and a claim that returns the event replaces it.
	deadlined bool
}

// unit is a run one worker delivers (dispatcher.deliverRuns; a single
// event is a run of one): its events, the next to start, and what it
// waits for.
type unit struct {
	items   []item
	next    uint8
	phase   phase
	started bool   // a listener of it started: the holds' deadline is set
	runAge  uint8  // ticks since that start, capped at the timeout
	charged bool   // the attempt of the running event was counted at its start
	flushed bool   // the DONE of items[next-1] was written …
	doneOK  bool   // … and stored under this owner (hold.done)
	more    bool   // a full run: the events after it are asked for (RunContinuer)
	asked   bool   // ContinueRuns ran …
	cont    []int8 // … and claimed these, not held yet
}

// node is one process.
type node struct {
	up    bool
	units []unit
}

// state is the whole system at one moment.
type state struct {
	rows                              [maxEvents]row
	nodes                             [maxNodes]node
	crashes, failures, outages, hangs uint8 // the faults left
}

func (s *state) clone() *state {
	c := *s
	for i := range c.nodes {
		n := &c.nodes[i]
		n.units = slices.Clone(n.units)
		for j := range n.units {
			n.units[j].items = slices.Clone(n.units[j].items)
			n.units[j].cont = slices.Clone(n.units[j].cont)
		}
	}
	return &c
}

// key returns the canonical encoding of s: a node's runs in any order are
// the same state, and so are two states that differ by a renaming of the
// nodes (the least encoding over the nodes' orders is the key). What no
// action reads any more is left out: the hold age of an event that
// started, or that was let go.
func (s *state) key(cfg *config) string {
	best := ""
	for _, perm := range perms[cfg.nodes] {
		if k := s.keyAs(cfg, perm); best == "" || k < best {
			best = k
		}
	}
	return best
}

// perms are the orders of 1, 2 and 3 nodes.
var perms = [...][][]int{1: {{0}}, 2: {{0, 1}, {1, 0}}, 3: {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}}

// keyAs is the encoding of s with node perm[i] in place i.
func (s *state) keyAs(cfg *config, perm []int) string {
	var inv [maxNodes]uint8
	for i, n := range perm {
		inv[n] = uint8(i)
	}
	b := make([]byte, 0, 64)
	for i := range cfg.events {
		r := s.rows[i]
		owner := r.owner
		if owner != noOwner && owner != deadOwner {
			owner = inv[owner-1] + 1
		}
		b = append(b, byte(r.status), r.attempts, byte(r.last), owner, r.lockAge, r.delay, b2(r.succeeded), r.starts, r.ownAge)
	}
	b = append(b, s.crashes, s.failures, s.outages, s.hangs)
	for _, n := range perm {
		nd := s.nodes[n]
		b = append(b, '|', b2(nd.up))
		us := make([]string, len(nd.units))
		for j, u := range nd.units {
			ub := []byte{u.next, byte(u.phase), b2(u.started), u.runAge, b2(u.charged), b2(u.flushed), b2(u.doneOK), b2(u.more), b2(u.asked)}
			for x, it := range u.items {
				age := it.age
				if x < int(u.next) || !it.current {
					age = 0
				}
				ub = append(ub, byte(it.ev), age, b2(it.suspect), it.attempts, b2(it.current), b2(it.deadlined))
			}
			ub = append(ub, ';')
			for _, e := range u.cont {
				ub = append(ub, byte(e))
			}
			us[j] = string(ub)
		}
		slices.Sort(us)
		for _, u := range us {
			b = append(b, '[')
			b = append(b, u...)
			b = append(b, ']')
		}
	}
	return string(b)
}

func b2(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// render renders s for a trace, one row and one node per line.
func (s *state) render(cfg *config) string {
	var b strings.Builder
	for i := range cfg.events {
		r := s.rows[i]
		fmt.Fprintf(&b, "    e%d: %s attempts=%d last=%s owner=%s lockAge=%d", i, [...]string{"PENDING", "DONE", "DEAD"}[r.status],
			r.attempts, [...]string{"-", "ClaimExpired", "InFlight", "failed"}[r.last], ownerName(r.owner), r.lockAge)
		if r.delay > 0 {
			fmt.Fprintf(&b, " due-in=%d", r.delay)
		}
		b.WriteString("\n")
	}
	for i := range cfg.nodes {
		n := s.nodes[i]
		fmt.Fprintf(&b, "    n%d: ", i)
		if !n.up {
			b.WriteString("down\n")
			continue
		}
		if len(n.units) == 0 {
			b.WriteString("idle")
		}
		for _, u := range n.units {
			b.WriteString("[")
			for j, it := range u.items {
				if j > 0 {
					b.WriteString(" ")
				}
				mark := ""
				switch {
				case j == int(u.next)-1 && u.phase == running:
					mark = "▶"
				case j == int(u.next)-1 && u.phase == acking:
					mark = "✓"
				case j < int(u.next):
					mark = "·"
				}
				fmt.Fprintf(&b, "%se%d(age=%d", mark, it.ev, it.age)
				if it.suspect {
					b.WriteString(",taken-over")
				}
				if !it.current {
					b.WriteString(",let-go")
				}
				b.WriteString(")")
			}
			if u.started {
				fmt.Fprintf(&b, " running-for=%d", u.runAge)
			}
			if len(u.cont) > 0 {
				fmt.Fprintf(&b, " continued=%v", u.cont)
			}
			b.WriteString("] ")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "    faults left: crashes=%d failures=%d outages=%d hangs=%d\n", s.crashes, s.failures, s.outages, s.hangs)
	return b.String()
}

func ownerName(o uint8) string {
	switch o {
	case noOwner:
		return "-"
	case deadOwner:
		return "dead-process"
	}
	return fmt.Sprintf("n%d", o-1)
}

// initial returns the state in which every event is written, pending,
// unclaimed and due, and every node is up with nothing held.
func initial(cfg *config) *state {
	s := &state{crashes: cfg.crashes, failures: cfg.failures, outages: cfg.outages, hangs: cfg.hangs}
	for i := range cfg.nodes {
		s.nodes[i].up = true
	}
	return s
}
