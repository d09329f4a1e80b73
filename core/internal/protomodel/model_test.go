package protomodel

import (
	"os"
	"testing"
	"time"
)

// The sizes every `go test` explores: two events of one ordering key,
// and an ordered event beside a poison one, under one crash, one outage
// and (the first) one hang.
func ciSizes() []config {
	keys, poisoned := ordering(), poison()
	keys.failures, poisoned.failures = 0, 0
	return []config{keys, poisoned}
}

// ordering is two events of one key, two processes, runs of two, one
// fault of each kind.
func ordering() config {
	return config{
		events:      []event{{key: 1}, {key: 1}},
		nodes:       2,
		lease:       2,
		timeout:     3,
		maxAttempts: 2,
		run:         2,
		crashes:     1,
		failures:    1,
		outages:     1,
		hangs:       1,
		retryDelay:  1,
	}
}

// poison is an unordered event whose listener ends its process beside an
// ordered one (no hangs: fullSizes adds them).
func poison() config {
	c := ordering()
	c.events = []event{{key: 1}, {poison: true}}
	c.hangs = 0
	return c
}

// fullSizes are the sizes of `make model` (OUTBOX_MODEL_FULL=1): the CI
// sizes, and with a listener failure too, the poison event with a hang,
// DeadSkipsKey, three processes, two keys, a key of three events, and
// two keys beside a poison event.
func fullSizes() []config {
	hung := poison()
	hung.hangs = 1
	skips := ordering()
	skips.deadSkips = true
	three := ordering()
	three.nodes = 3
	keys := ordering()
	keys.events = []event{{key: 1}, {key: 1}, {key: 2}}
	keys.hangs = 0
	long := ordering()
	long.events = []event{{key: 1}, {key: 1}, {key: 1}}
	mixed := ordering()
	mixed.events = []event{{key: 1}, {key: 2}, {poison: true}}
	mixed.failures, mixed.hangs = 0, 0
	return append(ciSizes(), ordering(), poison(), hung, skips, three, keys, long, mixed)
}

func full() bool { return os.Getenv("OUTBOX_MODEL_FULL") != "" }

// TestProtocol explores every state of the CI sizes (and, with
// OUTBOX_MODEL_FULL set, the full sizes) and checks every invariant; a
// violation fails it with the trace that leads to it.
func TestProtocol(t *testing.T) {
	sizes := ciSizes()
	if full() {
		sizes = fullSizes()
	}
	var states int
	var took time.Duration
	for _, cfg := range sizes {
		res := explore(cfg, "", 0)
		states, took = states+res.states, took+res.elapsed
		t.Logf("%s: %d states, %d transitions, depth %d, %s", cfg, res.states, res.edges, res.depth, res.elapsed.Round(time.Millisecond))
		if res.bad != nil {
			t.Fatalf("%s violated: %s\n%s", res.bad.invariant, res.bad.detail, formatTrace(res.trace))
		}
	}
	t.Logf("%d sizes, %d states in all, %s", len(sizes), states, took.Round(time.Millisecond))
}

// TestMutants checks that each earlier bug, brought back, is caught by
// the invariant named, with a trace.
func TestMutants(t *testing.T) {
	for _, tc := range []struct {
		mutant    mutant
		invariant string
	}{
		{countAtEnd, "PoisonDead"},
		{renewMarksAll, "ExclusiveStart"},
		{renewAnyOwner, "Fenced"},
		{unfencedDone, "Fenced"},
		{recoverNonHeads, "KeyOrder"},
		{runNoWait, "KeyOrder"},
		{leaseEarly, "RenewedNotTakenOver"},
	} {
		t.Run(tc.mutant.String(), func(t *testing.T) {
			cfg := ordering()
			if tc.invariant == "PoisonDead" {
				cfg = poison()
			}
			cfg.mutant = tc.mutant
			res := explore(cfg, tc.invariant, 0)
			if res.bad == nil {
				t.Fatalf("%s: not caught by %s (%d states)", cfg, tc.invariant, res.states)
			}
			t.Logf("caught by %s after %d states, a trace of %d steps: %s", res.bad.invariant, res.states, len(res.trace)-1, res.bad.detail)
			if os.Getenv("OUTBOX_MODEL_TRACE") != "" {
				t.Log("\n" + formatTrace(res.trace))
			}
		})
	}
}
