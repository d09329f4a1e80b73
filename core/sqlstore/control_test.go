package sqlstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// TestControlRefusesUnstorableText: a text over its column's bound, with
// invalid UTF-8 or with NUL is refused with ErrInvalidConfig before the
// database; one at its bound, of 4-byte characters, reaches it.
func TestControlRefusesUnstorableText(t *testing.T) {
	ctx := context.Background()
	for _, d := range []Dialect{SQLite, PostgreSQL, MySQL} {
		s, err := New(noDB{}, WithDialect(d))
		if err != nil {
			t.Fatal(err)
		}
		wide := func(n int) string { return strings.Repeat("😀", n/4) + strings.Repeat("x", n%4) }
		now := time.Now()
		for _, tc := range []struct {
			name string
			ok   bool
			call func() error
		}{
			{"a reason at its bound", true, func() error {
				return s.SetPause(ctx, outbox.Pause{Scope: wide(outbox.MaxEventTypeLen), By: wide(outbox.MaxActorLen), Reason: wide(outbox.MaxReasonLen), At: now})
			}},
			{"a reason over its bound", false, func() error {
				return s.SetPause(ctx, outbox.Pause{Scope: "T", Reason: wide(outbox.MaxReasonLen + 1), At: now})
			}},
			{"a scope of invalid UTF-8", false, func() error { return s.SetPause(ctx, outbox.Pause{Scope: "T\xff", At: now}) }},
			{"an actor with NUL", false, func() error { return s.SetPause(ctx, outbox.Pause{Scope: "T", By: "a\x00b", At: now}) }},
			{"an owner at its bound", true, func() error {
				return s.Beat(ctx, outbox.Node{Owner: wide(maxNodeOwnerLen), Types: []string{wide(outbox.MaxEventTypeLen)}}, now)
			}},
			{"an owner over its bound", false, func() error { return s.Beat(ctx, outbox.Node{Owner: wide(maxNodeOwnerLen + 1)}, now) }},
			{"a node's type over its bound", false, func() error {
				return s.Beat(ctx, outbox.Node{Owner: "n", Types: []string{wide(outbox.MaxEventTypeLen + 1)}}, now)
			}},
			{"an audit target over its bound", false, func() error {
				_, err := s.AppendAudit(ctx, outbox.AuditEntry{Action: "delete", Target: wide(outbox.MaxReasonLen + 1)})
				return err
			}},
		} {
			err := tc.call()
			if tc.ok && !errors.Is(err, errNoDB) {
				t.Errorf("%s, %s: %v; want it sent to the database", d.Name(), tc.name, err)
			}
			if !tc.ok && (!errors.Is(err, outbox.ErrInvalidConfig) || errors.Is(err, errNoDB)) {
				t.Errorf("%s, %s: %v; want ErrInvalidConfig before the database", d.Name(), tc.name, err)
			}
		}
	}
}

// TestControlStatements: the control tables are named after the outbox
// table (with its schema); pauses and nodes are upserted by key in each
// dialect's syntax; only MySQL asks for the audit entry's id apart.
func TestControlStatements(t *testing.T) {
	for _, tc := range []struct {
		d                 Dialect
		upsert, returning string
	}{
		{SQLite, "ON CONFLICT (scope) DO UPDATE SET paused_by = excluded.paused_by, reason = excluded.reason, paused_at = excluded.paused_at", " RETURNING id"},
		{PostgreSQL, "ON CONFLICT (scope) DO UPDATE SET paused_by = excluded.paused_by, reason = excluded.reason, paused_at = excluded.paused_at", " RETURNING id"},
		{MySQL, "ON DUPLICATE KEY UPDATE paused_by = VALUES(paused_by), reason = VALUES(reason), paused_at = VALUES(paused_at)", ""},
	} {
		s, err := New(noDB{}, WithDialect(tc.d), WithTable("app.events"))
		if err != nil {
			t.Fatal(err)
		}
		c := s.ctl
		if !strings.HasPrefix(c.setPause, "INSERT INTO app.events_pauses (") || !strings.HasSuffix(c.setPause, tc.upsert) {
			t.Errorf("%s: SetPause's statement %q", tc.d.Name(), c.setPause)
		}
		if !strings.Contains(c.beat, "INSERT INTO app.events_nodes (") {
			t.Errorf("%s: Beat's statement %q", tc.d.Name(), c.beat)
		}
		if strings.HasSuffix(c.appendAudit, " RETURNING id") != (tc.returning != "") || !strings.Contains(c.appendAudit, "app.events_audit") {
			t.Errorf("%s: AppendAudit's statement %q", tc.d.Name(), c.appendAudit)
		}
	}
}
