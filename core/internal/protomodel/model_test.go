package protomodel

import (
	"os"
	"testing"
)

// The sizes every `go test` explores: two events of one ordering key
// under every kind of fault, and a poison event beside an ordered one.
func ciSizes() []config {
	return []config{ordering(), poison()}
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

// fullSizes are the sizes of `make model` (OUTBOX_MODEL_FULL=1).
func fullSizes() []config {
	skips := ordering()
	skips.deadSkips = true
	three := ordering()
	three.nodes = 3
	keys := ordering()
	keys.events = []event{{key: 1}, {key: 1}, {key: 2}}
	long := ordering()
	long.events = []event{{key: 1}, {key: 1}, {key: 1}}
	hung := poison()
	hung.hangs = 1
	return append(ciSizes(), hung, skips, three, keys, long)
}

func full() bool { return os.Getenv("OUTBOX_MODEL_FULL") != "" }

func check(t *testing.T, cfg config) {
	t.Helper()
	res := explore(cfg, "", 0)
	t.Logf("%s: %d states, %d transitions, depth %d, %s", cfg, res.states, res.edges, res.depth, res.elapsed.Round(1e6))
	if res.bad != nil {
		t.Fatalf("%s violated: %s\n%s", res.bad.invariant, res.bad.detail, formatTrace(res.trace))
	}
}

// TestProtocol explores every state of the CI size (and, with
// OUTBOX_MODEL_FULL set, the full sizes) and checks every invariant.
func TestProtocol(t *testing.T) {
	sizes := ciSizes()
	if full() {
		sizes = fullSizes()
	}
	for _, cfg := range sizes {
		check(t, cfg)
	}
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
			t.Logf("caught by %s after %d states: %s\n%s", res.bad.invariant, res.states, res.bad.detail, formatTrace(res.trace))
		})
	}
}
