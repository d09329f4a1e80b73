package outboxhttp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// ReadyConfig sets the thresholds of the readiness probe (see NewProbes).
// A zero field leaves its check out; ReadyConfig{} is ready once the
// Client started and its database answers. Validate checks it.
type ReadyConfig struct {
	// MaxPollAge fails readiness when the poller's last successful claim
	// is older than this, or there was none yet: a poller stuck on its
	// database, or a Client without one (outbox.ModeWriterOnly — leave
	// it zero there). Give it several poll intervals.
	MaxPollAge time.Duration
	// MaxOldestPending fails readiness when the oldest pending (NEW or
	// RETRY) event is older than this: a backlog nothing drains.
	MaxOldestPending time.Duration
	// MaxDead fails readiness when more than MaxDead events are DEAD.
	MaxDead int64
	// RequireNoOpenBreaker fails readiness while the circuit breaker of a
	// route is open or half-open.
	RequireNoOpenBreaker bool
	// Timeout bounds the reading of the database of one readiness probe
	// (default 5s): a database slower than this fails it.
	Timeout time.Duration
	// Logger gets the probe's database errors, whose text is never in an
	// answer (default slog.Default()).
	Logger *slog.Logger
}

// DefaultReadyTimeout is ReadyConfig.Timeout's default.
const DefaultReadyTimeout = 5 * time.Second

// Validate checks c: no threshold may be negative. Errors wrap
// outbox.ErrInvalidConfig.
func (c ReadyConfig) Validate() error {
	switch {
	case c.MaxPollAge < 0:
		return configErr("ReadyConfig.MaxPollAge %v is negative (0 leaves the check out)", c.MaxPollAge)
	case c.MaxOldestPending < 0:
		return configErr("ReadyConfig.MaxOldestPending %v is negative (0 leaves the check out)", c.MaxOldestPending)
	case c.MaxDead < 0:
		return configErr("ReadyConfig.MaxDead %d is negative (0 leaves the check out)", c.MaxDead)
	case c.Timeout < 0:
		return configErr("ReadyConfig.Timeout %v is negative (0: %v)", c.Timeout, DefaultReadyTimeout)
	}
	return nil
}

// Probes serves a Client's liveness and readiness probes, for a
// kubelet or a load balancer: Liveness at /healthz, Readiness at /readyz,
// say. Neither has an authorizer or a Host check — probes come from the
// node, not from loopback — and neither answers with event data: only
// whether the Client runs, which checks failed, counts and ages, never an
// event, an event type or a database error's text. Mount them on the
// service's port apart from the admin Handler.
type Probes struct {
	client *outbox.Client
	cfg    ReadyConfig
}

// NewProbes validates cfg and returns the probes of client.
func NewProbes(client *outbox.Client, cfg ReadyConfig) (*Probes, error) {
	if client == nil {
		return nil, configErr("NewProbes: nil Client")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultReadyTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Probes{client: client, cfg: cfg}, nil
}

// ProbeCheck is one check of a probe's answer.
type ProbeCheck struct {
	// Name is "started", "database", "poll_age", "oldest_pending",
	// "dead" or "breakers".
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Message says what was found, and the threshold when it failed.
	Message string `json:"message"`
}

// ProbeAnswer is the JSON body of a probe's answer: 200 when OK, 503
// with the failed checks otherwise.
type ProbeAnswer struct {
	OK     bool         `json:"ok"`
	Checks []ProbeCheck `json:"checks"`
}

// Liveness answers 200 while the Client is started (Start ran and Close
// did not), 503 otherwise. It does not read the database: a database
// outage is for readiness, not a reason to restart the process. Before
// Start, it fails too: give the kubelet a startup probe or an initial
// delay.
func (p *Probes) Liveness() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.answer(w, r, []ProbeCheck{p.started(p.client.Started())})
	})
}

func (p *Probes) started(ok bool) ProbeCheck {
	if ok {
		return ProbeCheck{Name: "started", OK: true, Message: "the Client is started"}
	}
	return ProbeCheck{Name: "started", Message: "the Client is not started, or closed"}
}

// Readiness answers 200 when every check of the ReadyConfig passes, 503
// with the failed ones otherwise: the Client is started, its database
// answers within Timeout, and the poll age, the oldest pending event, the
// DEAD count and the breakers are within their thresholds.
func (p *Probes) Readiness() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), p.cfg.Timeout)
		defer cancel()
		h, err := p.client.Health(ctx)
		checks := []ProbeCheck{p.started(h.Started)}
		if err != nil {
			p.cfg.Logger.WarnContext(r.Context(), "outboxhttp: the readiness probe could not read the outbox's database", "err", err)
			checks = append(checks, ProbeCheck{Name: "database", Message: "the outbox's database could not be read; the server's log has the error"})
			p.answer(w, r, checks)
			return
		}
		checks = append(checks, ProbeCheck{Name: "database", OK: true, Message: "the outbox's database answers"})
		c := p.cfg
		if c.MaxPollAge > 0 {
			switch {
			case h.LastPoll.IsZero():
				checks = append(checks, ProbeCheck{Name: "poll_age", Message: "no successful poll yet"})
			default:
				checks = append(checks, limitCheck("poll_age", "the last successful poll", h.LastPollAge, c.MaxPollAge))
			}
		}
		if c.MaxOldestPending > 0 {
			checks = append(checks, limitCheck("oldest_pending", "the oldest pending event", h.OldestPendingAge, c.MaxOldestPending))
		}
		if c.MaxDead > 0 {
			ck := ProbeCheck{Name: "dead", OK: h.Dead <= c.MaxDead, Message: fmt.Sprintf("%d DEAD events", h.Dead)}
			if !ck.OK {
				ck.Message += fmt.Sprintf(", more than MaxDead %d", c.MaxDead)
			}
			checks = append(checks, ck)
		}
		if c.RequireNoOpenBreaker {
			open := 0
			for _, rt := range h.Routes {
				if rt.Breaker != "" && rt.Breaker != outbox.BreakerClosed {
					open++
				}
			}
			checks = append(checks, ProbeCheck{Name: "breakers", OK: open == 0, Message: fmt.Sprintf("%d routes with an open or half-open circuit breaker", open)})
		}
		p.answer(w, r, checks)
	})
}

// limitCheck checks an age against its threshold.
func limitCheck(name, what string, age, limit time.Duration) ProbeCheck {
	ck := ProbeCheck{Name: name, OK: age <= limit, Message: fmt.Sprintf("%s is %s old", what, age.Round(time.Millisecond))}
	if !ck.OK {
		ck.Message += fmt.Sprintf(", older than %s", limit)
	}
	return ck
}

// answer writes the checks: 200 if all passed, 503 otherwise. HEAD gets
// the status only; a method other than GET or HEAD, 405.
func (p *Probes) answer(w http.ResponseWriter, r *http.Request, checks []ProbeCheck) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	out := ProbeAnswer{OK: true, Checks: checks}
	for _, c := range checks {
		out.OK = out.OK && c.OK
	}
	status := http.StatusOK
	if !out.OK {
		status = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	b, _ := json.MarshalIndent(out, "", "  ") // plain structs of strings and booleans always encode
	_, _ = w.Write(append(b, '\n'))
}
