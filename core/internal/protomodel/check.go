package protomodel

import (
	"fmt"
	"strings"
	"time"
)

// invariants checked at every state (the others are checked on the
// actions that could break them: KeyOrder, ExclusiveStart, Fenced,
// RenewedNotTakenOver; and Progress over the whole graph).
func stateInvariants(cfg *config, s *state) *violation {
	for e, ev := range cfg.events {
		r := s.rows[e]
		if r.status == done && !r.succeeded {
			return &violation{"DoneDelivered", fmt.Sprintf("e%d is DONE but no delivery of it succeeded", e)}
		}
		if ev.poison {
			switch {
			case r.status == done:
				return &violation{"PoisonDead", fmt.Sprintf("poison e%d is DONE", e)}
			case r.attempts > cfg.maxAttempts:
				return &violation{"PoisonDead", fmt.Sprintf("poison e%d has %d attempts (MaxAttempts %d)", e, r.attempts, cfg.maxAttempts)}
			case int(r.starts) > int(cfg.maxAttempts)+1:
				return &violation{"PoisonDead", fmt.Sprintf("poison e%d started %d times, ending its process each time (MaxAttempts %d)", e, r.starts, cfg.maxAttempts)}
			}
		}
	}
	// OneAtATime: the deliveries within their ListenerTimeout whose node
	// holds the event's claim, per event and per key.
	perEvent := map[int8]int{}
	perKey := map[int8]int{}
	for n := range cfg.nodes {
		nd := s.nodes[n]
		if !nd.up {
			continue
		}
		for _, u := range nd.units {
			if u.phase != running || u.runAge >= cfg.timeout {
				continue
			}
			e := u.items[u.next-1].ev
			if r := s.rows[e]; r.status != pending || r.owner != uint8(n+1) {
				continue
			}
			perEvent[e]++
			if k := cfg.events[e].key; k != 0 {
				perKey[k]++
				if perKey[k] > 1 {
					return &violation{"OneAtATime", fmt.Sprintf("two deliveries of key k%d at once", k)}
				}
			}
			if perEvent[e] > 1 {
				return &violation{"OneAtATime", fmt.Sprintf("two deliveries of e%d at once", e)}
			}
		}
	}
	return nil
}

// ended reports whether every event of s has ended: DONE, DEAD, or, under
// DeadBlocksKey, behind a DEAD event of its key (it waits for an
// operator).
func ended(cfg *config, s *state) bool {
	for e := range cfg.events {
		if s.rows[e].status != pending {
			continue
		}
		blocked := false
		for j := range e {
			if k := cfg.events[e].key; k != 0 && cfg.events[j].key == k && s.rows[j].status == dead && !cfg.deadSkips {
				blocked = true
			}
		}
		if !blocked {
			return false
		}
	}
	return true
}

// result is what an exploration found.
type result struct {
	states  int
	edges   int
	depth   int
	elapsed time.Duration
	bad     *violation
	trace   []string // the actions and states from the initial state to the violation
}

// explore visits every state reachable from the initial one, breadth
// first, checking the invariants, and stops at the first violation.
// With target set it ignores the violations of other invariants (a
// mutant's run). With limit > 0 it gives up after that many states.
func explore(cfg config, target string, limit int) result {
	began := time.Now()
	index := map[string]int32{}
	var keys []string
	var parent []int32
	var calmNext []int32 // the calm schedule's next state, -1: none
	add := func(s *state, from int32) (int32, bool) {
		k := s.key(&cfg)
		if i, ok := index[k]; ok {
			return i, false
		}
		i := int32(len(keys))
		index[k] = i
		keys = append(keys, k)
		parent = append(parent, from)
		calmNext = append(calmNext, -1)
		return i, true
	}
	res := result{}
	counts := func(v *violation) bool { return v != nil && (target == "" || v.invariant == target) }
	init := initial(&cfg)
	first, _ := add(init, -1)
	if v := stateInvariants(&cfg, init); counts(v) {
		res.bad = v
	}
	frontier := []*state{init}
	ids := []int32{first}
	for depth := 0; len(frontier) > 0 && res.bad == nil; depth++ {
		res.depth = depth
		var next []*state
		var nextIDs []int32
		for fi, s := range frontier {
			from := ids[fi]
			best := kind(255)
			successors(&cfg, s, func(sc succ) {
				if res.bad != nil {
					return
				}
				res.edges++
				to, fresh := add(sc.next, from)
				if sc.kind.calm() && sc.kind < best && to != from {
					best, calmNext[from] = sc.kind, to
				}
				if counts(sc.bad) {
					res.bad = sc.bad
					res.trace = traceTo(&cfg, keys, parent, to)
					return
				}
				if !fresh {
					return
				}
				if v := stateInvariants(&cfg, sc.next); counts(v) {
					res.bad = v
					res.trace = traceTo(&cfg, keys, parent, to)
					return
				}
				next = append(next, sc.next)
				nextIDs = append(nextIDs, to)
			})
			if res.bad != nil {
				break
			}
		}
		frontier, ids = next, nextIDs
		if limit > 0 && len(keys) > limit {
			res.bad = &violation{"Size", fmt.Sprintf("more than %d states", limit)}
			break
		}
	}
	res.states = len(keys)
	if res.bad == nil && (target == "" || target == "Progress") {
		res.bad, res.trace = progress(&cfg, keys, parent, calmNext)
	}
	res.elapsed = time.Since(began)
	return res
}

// progress checks that from every state the calm schedule — no more
// crashes, failures or lost heartbeats; stopped processes restart, the
// listeners return, and time passes only when nothing else can happen —
// ends every event (see ended). Its next states are states of the graph,
// so each is followed once.
func progress(cfg *config, keys []string, parent []int32, calmNext []int32) (*violation, []string) {
	const (
		unknown = iota
		onPath
		good
	)
	mark := make([]uint8, len(keys))
	endedState := func(i int32) bool { return ended(cfg, decodeRows(cfg, keys[i])) }
	for start := range int32(len(keys)) {
		var path []int32
		i := start
		for mark[i] == unknown {
			if endedState(i) {
				mark[i] = good
				break
			}
			mark[i] = onPath
			path = append(path, i)
			if calmNext[i] < 0 {
				return &violation{"Progress", "no calm action is left and some event has not ended"}, calmTrace(cfg, keys, parent, calmNext, start)
			}
			i = calmNext[i]
		}
		if mark[i] == onPath {
			return &violation{"Progress", "the calm schedule goes round in a loop and some event never ends"}, calmTrace(cfg, keys, parent, calmNext, start)
		}
		for _, p := range path {
			mark[p] = good
		}
	}
	return nil, nil
}

// decodeRows reads back the rows of a state from its key (the rows come
// first, 9 bytes each).
func decodeRows(cfg *config, key string) *state {
	s := &state{}
	for e := range cfg.events {
		b := key[e*9:]
		s.rows[e] = row{status: status(b[0]), attempts: b[1], last: lastErr(b[2]), owner: b[3], lockAge: b[4], delay: b[5], succeeded: b[6] == 1, starts: b[7], ownAge: b[8]}
	}
	return s
}

// traceTo replays the actions from the initial state to state to and
// renders each state on the way.
func traceTo(cfg *config, keys []string, parent []int32, to int32) []string {
	var path []int32
	for i := to; i >= 0; i = parent[i] {
		path = append([]int32{i}, path...)
	}
	return replay(cfg, keys, path)
}

// calmTrace is the trace to start, then the calm schedule from it until
// it stops or loops.
func calmTrace(cfg *config, keys []string, parent []int32, calmNext []int32, start int32) []string {
	var path []int32
	for i := start; i >= 0; i = parent[i] {
		path = append([]int32{i}, path...)
	}
	seen := map[int32]bool{start: true}
	for i := calmNext[start]; i >= 0 && !seen[i]; i = calmNext[i] {
		seen[i] = true
		path = append(path, i)
	}
	return replay(cfg, keys, path)
}

// replay renders the states of path, following from each one the action
// that leads to the next.
func replay(cfg *config, keys []string, path []int32) []string {
	s := initial(cfg)
	out := []string{"initial state\n" + s.render(cfg)}
	for _, i := range path[1:] {
		var found *succ
		successors(cfg, s, func(sc succ) {
			if found == nil && sc.next.key(cfg) == keys[i] {
				found = &sc
			}
		})
		if found == nil {
			out = append(out, "(cannot replay the next step)")
			break
		}
		out = append(out, found.label+"\n"+found.next.render(cfg))
		s = found.next
	}
	return out
}

// formatTrace renders a trace, numbered.
func formatTrace(trace []string) string {
	var b strings.Builder
	for i, st := range trace {
		fmt.Fprintf(&b, "%3d. %s", i, st)
	}
	return b.String()
}
