package outboxhttp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxadmin"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
)

// withPrincipal makes the handler's principal the X-Test-User header.
func withPrincipal(cfg *Config) {
	cfg.Principal = func(r *http.Request) string { return r.Header.Get("X-Test-User") }
}

// Pauses through the API: stored with the principal as their author,
// listed, in the health of the source, removed by resume, and audited.
func TestPausesAPI(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		t.Parallel()
		e := newEnv(t, b, withPrincipal)
		e.req("POST", "/api/orders/actions/pause", `{"scope": "OrderPlaced"}`).wantError(t, 400, codeBadRequest, "no reason")
		e.req("POST", "/api/orders/actions/pause", `{"reason": "x"}`).wantError(t, 400, codeBadRequest, "no scope")
		e.req("POST", "/api/orders/actions/pause", `{"scope": " padded", "reason": "x"}`).wantError(t, 400, codeBadRequest, "scope")
		e.req("POST", "/api/orders/actions/pause", `{"scope": "A", "reason": "x", "extra": 1}`).wantError(t, 400, codeBadRequest, "unknown field")
		e.req("GET", "/api/orders/actions/pause", "").wantError(t, 405, codeMethodNotAllowed)
		e.req("POST", "/api/orders/actions/resume", `{"scope": "OrderPlaced"}`).wantError(t, 404, codeNotFound, `"OrderPlaced" is not paused`)

		var ch pauseChangeJSON
		e.req("POST", "/api/orders/actions/pause", `{"scope": "OrderPlaced", "reason": "<script>alert(1)</script>"}`, "X-Test-User", "alice").want(t, 200, &ch)
		if ch.Paused != "OrderPlaced" {
			t.Fatalf("pause: %+v", ch)
		}
		var ps pausesJSON
		e.req("GET", "/api/orders/pauses", "").want(t, 200, &ps)
		if len(ps.Pauses) != 1 || ps.Pauses[0].By != "alice" || ps.Pauses[0].Reason != "<script>alert(1)</script>" || ps.Pauses[0].Scope != "OrderPlaced" {
			t.Fatalf("pauses: %+v", ps.Pauses)
		}
		var hl healthJSON
		e.req("GET", "/api/orders/health", "").want(t, 200, &hl)
		if hl.Source != "orders" || len(hl.Paused) != 1 || hl.Paused[0].Scope != "OrderPlaced" || hl.Started {
			t.Errorf("health: %+v, want the pause, not started", hl)
		}
		e.req("POST", "/api/orders/actions/resume", `{"scope": "OrderPlaced"}`, "X-Test-User", "bob").want(t, 200, &ch)
		e.req("GET", "/api/orders/pauses", "").want(t, 200, &ps)
		if len(ps.Pauses) != 0 {
			t.Fatalf("pauses after resume: %+v", ps.Pauses)
		}

		var au auditJSON
		e.req("GET", "/api/orders/audit?limit=1", "").want(t, 200, &au)
		if len(au.Entries) != 1 || au.Entries[0].Action != "resume" || au.Entries[0].Actor != "bob" || au.NextBefore == 0 {
			t.Fatalf("audit page 1: %+v", au)
		}
		before := au.NextBefore
		au = auditJSON{}
		e.req("GET", "/api/orders/audit?before="+itoa(before), "").want(t, 200, &au)
		if len(au.Entries) != 1 || au.Entries[0].Action != "pause" || au.Entries[0].Actor != "alice" || au.NextBefore != 0 {
			t.Fatalf("audit page 2: %+v", au)
		}
		e.req("GET", "/api/orders/audit?limit=0", "").wantError(t, 400, codeBadRequest, "limit")
		e.req("GET", "/api/orders/audit?before=x", "").wantError(t, 400, codeBadRequest, "before")
	})
}

// Without Authorize, pausing and the actions are refused; reads work.
func TestControlReadOnly(t *testing.T) {
	e := newEnv(t, sqlite(t), func(c *Config) { c.Authorize = nil })
	s := e.seed()
	before := e.snapshot()
	for _, path := range []string{"actions/pause", "actions/resume", "actions/force-dead", "actions/delete", "actions/skip-head"} {
		e.req("POST", "/api/orders/"+path, `{"scope": "A", "reason": "x", "ids": ["`+s.pending[0]+`"]}`).wantError(t, 403, codeReadOnly)
	}
	e.req("GET", "/api/orders/pauses", "").want(t, 200, nil)
	e.wantUnchanged(before)
}

// force-dead, delete and skip-head through the API, with their refusals;
// each change is audited with the principal and the reason.
func TestActionsAPI(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		t.Parallel()
		e := newEnv(t, b, withPrincipal)
		s := e.seed()
		before := e.snapshot()
		e.req("POST", "/api/orders/actions/force-dead", `{"ids": ["`+s.pending[0]+`"]}`).wantError(t, 400, codeBadRequest, "no reason")
		e.req("POST", "/api/orders/actions/force-dead", `{"ids": [], "reason": "x"}`).wantError(t, 400, codeBadRequest, "no ids")
		e.req("POST", "/api/orders/actions/skip-head", `{"ids": ["a", "b"], "reason": "x"}`).wantError(t, 400, codeBadRequest, "skip-head takes one id")
		e.req("POST", "/api/orders/actions/skip-head", `{"ids": ["`+s.placed+`"], "reason": "x"}`).wantError(t, 404, codeNotFound, "no pending event")
		e.req("POST", "/api/orders/actions/delete", `{"ids": ["a"], "reason": "`+strings.Repeat("x", outbox.MaxReasonLen+1)+`"}`).wantError(t, 400, codeBadRequest, "reason")
		var act actionJSON
		e.req("POST", "/api/orders/actions/force-dead", `{"ids": ["`+s.done[0]+`"], "reason": "x"}`).want(t, 200, &act)
		if act.Changed != 0 {
			t.Errorf("force-dead of a DONE event: %+v, want nothing changed", act)
		}
		e.wantUnchanged(before)

		e.req("POST", "/api/orders/actions/force-dead", `{"ids": ["`+s.pending[0]+`", "`+s.retry+`"], "reason": "poison"}`, "X-Test-User", "carol").want(t, 200, &act)
		if act.Action != "force-dead" || act.Changed != 2 {
			t.Fatalf("force-dead: %+v", act)
		}
		e.req("POST", "/api/orders/actions/skip-head", `{"ids": ["`+s.pending[1]+`"], "reason": "stale"}`, "X-Test-User", "carol").want(t, 200, &act)
		e.req("POST", "/api/orders/actions/delete", `{"ids": ["`+s.done[0]+`", "`+s.invoice+`"]}`, "X-Test-User", "carol").want(t, 200, &act)
		if act.Changed != 2 {
			t.Fatalf("delete: %+v", act)
		}
		if got := e.statuses(s.pending[0], s.retry, s.pending[1], s.done[0], s.invoice); !slices.Equal(got, []string{"DEAD", "DEAD", "DONE", "gone", "gone"}) {
			t.Fatalf("statuses after the actions: %q", got)
		}
		var au auditJSON
		e.req("GET", "/api/orders/audit", "").want(t, 200, &au)
		var got []string
		for _, a := range au.Entries {
			got = append(got, a.Actor+" "+a.Action+" "+itoa(a.Count))
		}
		if want := []string{"carol delete 2", "carol skip-head 1", "carol force-dead 2"}; !slices.Equal(got, want) {
			t.Errorf("audit: %q, want %q", got, want)
		}
	})
}

// A replay's dry run counts per event type and tenant and changes nothing.
func TestReplayDryRunAPI(t *testing.T) {
	e := newEnv(t, sqlite(t), nil)
	e.seed()
	before := e.snapshot()
	var plan planJSON
	e.req("POST", "/api/orders/dead/replay", `{"all": true, "dry_run": true}`).want(t, 200, &plan)
	if !plan.DryRun || plan.Events != 4 || !slices.Equal(plan.Types, []outboxadmin.Count{{Name: "OrderPlaced", Events: 2}, {Name: "InvoiceSent", Events: 1}, {Name: "OrderCancelled", Events: 1}}) ||
		!slices.Equal(plan.Tenants, []outboxadmin.Count{{Name: "", Events: 3}, {Name: "acme", Events: 1}}) {
		t.Errorf("dry run: %+v", plan)
	}
	e.req("POST", "/api/orders/dead/replay", `{"all": true, "dry_run": true, "tenant": "acme"}`).want(t, 200, &plan)
	if plan.Events != 1 {
		t.Errorf("dry run of tenant acme: %+v", plan)
	}
	e.req("POST", "/api/orders/dead/replay", `{"ids": ["x"], "dry_run": true}`).wantError(t, 400, codeBadRequest, "dry_run")
	e.wantUnchanged(before)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// failedChecks returns the names of the failed checks of a probe's answer.
func failedChecks(a ProbeAnswer) []string {
	var out []string
	for _, c := range a.Checks {
		if !c.OK {
			out = append(out, c.Name)
		}
	}
	return out
}

// Liveness follows Start and Close; readiness fails with the checks
// that fail, in a JSON body without event data.
func TestProbes(t *testing.T) {
	b := sqlite(t)
	logger, _ := outboxtest.NewLogBuffer()
	cfg := ReadyConfig{MaxDead: 3, MaxOldestPending: time.Hour, Logger: logger}
	e := newEnv(t, b, nil)
	client, err := outbox.New(outbox.Config{Store: e.store, TxContext: e.txm, Mode: outbox.ModePollerOnly, PollInterval: 20 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Handle(outbox.EventName("Nothing"), func(context.Context, outbox.Envelope) error { return nil }); err != nil {
		t.Fatal(err)
	}
	p, err := NewProbes(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/healthz", p.Liveness())
	mux.Handle("/readyz", p.Readiness())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	var a ProbeAnswer
	do(t, srv.URL, "GET", "/healthz", "").want(t, 503, &a)
	if got := failedChecks(a); !slices.Equal(got, []string{"started"}) {
		t.Errorf("liveness before Start: failed %q", got)
	}
	do(t, srv.URL, "GET", "/readyz", "").want(t, 503, &a)
	if got := failedChecks(a); !slices.Equal(got, []string{"started"}) {
		t.Errorf("readiness before Start: failed %q", got)
	}
	if err := client.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	do(t, srv.URL, "GET", "/healthz", "").want(t, 200, &a)
	do(t, srv.URL, "GET", "/readyz", "").want(t, 200, &a)
	if !a.OK || len(a.Checks) != 4 {
		t.Errorf("readiness: %+v, want 4 checks passed", a)
	}
	if r := do(t, srv.URL, "POST", "/readyz", "{}"); r.status != 405 {
		t.Errorf("POST /readyz: %d, want 405", r.status)
	}

	e.seed() // 4 DEAD: more than MaxDead
	r := do(t, srv.URL, "GET", "/readyz", "").want(t, 503, &a)
	if got := failedChecks(a); !slices.Equal(got, []string{"dead"}) {
		t.Errorf("readiness with 4 DEAD: failed %q, want dead", got)
	}
	for _, leak := range []string{"OrderPlaced", "acme", "boom", e.store.Table()} {
		if strings.Contains(string(r.body), leak) {
			t.Errorf("readiness answer names %q: %s", leak, r.body)
		}
	}
	if err := client.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	do(t, srv.URL, "GET", "/healthz", "").want(t, 503, &a)

	// A database that cannot be read fails readiness, not liveness, and the
	// answer does not repeat the error.
	_ = e.db.Close()
	do(t, srv.URL, "GET", "/readyz", "").want(t, 503, &a)
	if got := failedChecks(a); !slices.Equal(got, []string{"started", "database"}) {
		t.Errorf("readiness with the database closed: failed %q", got)
	}
}

// Every ReadyConfig threshold is checked in one place.
func TestReadyConfigValidate(t *testing.T) {
	for _, c := range []ReadyConfig{{MaxPollAge: -1}, {MaxOldestPending: -time.Second}, {MaxDead: -1}, {Timeout: -1}} {
		if err := c.Validate(); !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidConfig", c, err)
		}
	}
	if err := (ReadyConfig{MaxPollAge: time.Minute, MaxDead: 10, RequireNoOpenBreaker: true}).Validate(); err != nil {
		t.Errorf("Validate of a sound config: %v", err)
	}
	if _, err := NewProbes(nil, ReadyConfig{}); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Errorf("NewProbes(nil): %v", err)
	}
}
