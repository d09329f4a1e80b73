package outbox

import (
	"context"
	"runtime"
	"strings"
	"testing"
)

// goexits reports whether e is one of the events whose listener calls
// runtime.Goexit in TestGoexitIsAFailedAttempt.
func goexits(e Envelope) bool { _, ok := e.Header("goexit"); return ok }

// goexitBatch is a BatchListener that calls runtime.Goexit in HandleBatch
// when the batch holds an event that goexits.
type goexitBatch struct{}

func (goexitBatch) Handle(_ context.Context, e Envelope) error {
	if goexits(e) {
		runtime.Goexit()
	}
	return nil
}

func (goexitBatch) HandleBatch(_ context.Context, events []Envelope) []error {
	for _, e := range events {
		if goexits(e) {
			runtime.Goexit()
		}
	}
	return make([]error, len(events))
}

// A listener (or a subscriber, a batch listener, an interceptor) that
// calls runtime.Goexit fails its attempt with ErrGoexit, as one that
// panics does, and the worker that ran it is replaced: with two workers
// and five Goexits, every later event is still delivered.
func TestGoexitIsAFailedAttempt(t *testing.T) {
	single := func(_ context.Context, e Envelope) error {
		if goexits(e) {
			runtime.Goexit()
		}
		return nil
	}
	aroundGoexits := Interceptor{Around: func(ctx context.Context, e Envelope, next func(context.Context) error) error {
		if goexits(e) {
			runtime.Goexit()
		}
		return next(ctx)
	}}
	beforeGoexits := Interceptor{Before: func(_ context.Context, e Envelope) error {
		if goexits(e) {
			runtime.Goexit()
		}
		return nil
	}}
	tests := []struct {
		name  string
		route func(h *harness) error
		mut   func(*Config)
		// path: "hot" writes the events, "cold" queues them as a poller
		// does, "suspect" as taken over twice (the suspect lane).
		path string
		// batchMates: an event batched with one that goexits may fail
		// with it.
		batchMates bool
		wantDead   bool
	}{
		{name: "listener, hot path", path: "hot", route: func(h *harness) error { return h.reg.Handle(EventName("E"), single) }},
		{name: "listener, cold path", path: "cold", route: func(h *harness) error { return h.reg.Handle(EventName("E"), single) }},
		{name: "listener, suspect lane", path: "suspect", wantDead: true, route: func(h *harness) error { return h.reg.Handle(EventName("E"), single) }},
		{name: "around interceptor", path: "hot", mut: func(c *Config) { c.Interceptors = []Interceptor{aroundGoexits} },
			route: func(h *harness) error { return h.reg.Handle(EventName("E"), single) }},
		{name: "subscriber", path: "cold", route: func(h *harness) error {
			if err := h.reg.Subscribe("ok", EventName("E"), ListenerFunc(func(context.Context, Envelope) error { return nil })); err != nil {
				return err
			}
			return h.reg.Subscribe("exits", EventName("E"), ListenerFunc(single))
		}},
		{name: "batch listener", path: "cold", batchMates: true, route: func(h *harness) error {
			return h.reg.Register(GlobalAggregate, EventName("E"), goexitBatch{})
		}},
		{name: "batch listener, before hook", path: "cold", mut: func(c *Config) { c.Interceptors = []Interceptor{beforeGoexits} },
			route: func(h *harness) error { return h.reg.Register(GlobalAggregate, EventName("E"), goexitBatch{}) }},
		{name: "batch listener, around interceptor", path: "cold", batchMates: true, mut: func(c *Config) { c.Interceptors = []Interceptor{aroundGoexits} },
			route: func(h *harness) error { return h.reg.Register(GlobalAggregate, EventName("E"), goexitBatch{}) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.mut)
			if err := tc.route(h); err != nil {
				t.Fatal(err)
			}
			h.start(t)
			feed := func(events []Envelope) {
				if tc.path == "hot" {
					for _, e := range events {
						h.commit(t, e)
					}
					return
				}
				for _, e := range events {
					r := Record{ID: e.ID(), Envelope: e, Status: StatusNew, LockedBy: h.d.Owner(), LockedAt: h.clk.Now()}
					if tc.path == "suspect" {
						r.Attempts, r.LastError = 2, ErrClaimExpired.Error()
					}
					h.st.put(r)
					if !h.d.enqueueClaimed([]Record{r}, nil) {
						t.Fatal("enqueueClaimed refused")
					}
				}
			}
			// ended waits until e's outcome is stored and returns its
			// record; an event given back unstarted (its batch ended in a
			// Goexit before it began) is queued again, as a poller would.
			ended := func(e Envelope, ok func(Record) bool) Record {
				t.Helper()
				var r Record
				waitFor(t, "event "+e.ID()+" to end", func() bool {
					r = h.st.get(e.ID())
					if r.Status == StatusNew && r.LockedBy == "" && tc.path != "hot" {
						feed([]Envelope{e})
					}
					return r.LockedBy == "" && ok(r)
				})
				return r
			}
			var first []Envelope
			for i := range 20 {
				opts := []EnvelopeOption{WithJSON([]byte(`{}`))}
				if i%4 == 1 {
					opts = append(opts, WithHeader("goexit", "1"))
				}
				first = append(first, MustEnvelope(EventName("E"), opts...))
			}
			feed(first)
			wantFailed := StatusRetry
			if tc.wantDead {
				wantFailed = StatusDead
			}
			for _, e := range first {
				if !goexits(e) {
					continue
				}
				r := ended(e, func(r Record) bool { return r.Status == wantFailed })
				if !strings.Contains(r.LastError, "runtime.Goexit") {
					t.Errorf("%s: last error %q; want it to say the listener called runtime.Goexit", e.ID(), r.LastError)
				}
			}
			for _, e := range first {
				if goexits(e) {
					continue
				}
				ended(e, func(r Record) bool { return r.Status == StatusDone || tc.batchMates && r.Status == wantFailed })
			}
			// No worker was lost: 20 more events are all delivered.
			var later []Envelope
			for range 20 {
				later = append(later, evt("E"))
			}
			feed(later)
			for _, e := range later {
				ended(e, func(r Record) bool { return r.Status == StatusDone })
			}
			if n := h.d.claims.held.len(); n != 0 {
				t.Errorf("%d events still held after every outcome was stored", n)
			}
		})
	}
}
