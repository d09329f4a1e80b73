package main

import (
	"flag"
	"fmt"
	"strings"
	"unicode/utf8"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxadmin"
)

// checkActor checks --as: who the audit trail names for this run's
// actions (without it, the operating system's user).
func checkActor(as string) error {
	switch {
	case as == "":
		return nil
	case strings.TrimSpace(as) == "":
		return usageErr("--as %q is blank: name who acts, or leave --as out for the operating system's user", as)
	case len(as) > outbox.MaxActorLen:
		return usageErr("--as: longer than %d bytes", outbox.MaxActorLen)
	case !utf8.ValidString(as) || strings.ContainsFunc(as, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return usageErr("--as %q: want printable UTF-8 text", as)
	}
	return nil
}

// reasonFlag registers --reason on fs.
func reasonFlag(fs *flag.FlagSet, what string) *string {
	return fs.String("reason", "", "why: stored in the audit trail"+what)
}

// checkReason fails when a required --reason is missing or blank, or any
// --reason is longer than the audit trail keeps.
func checkReason(name, reason string, required bool) error {
	switch {
	case required && strings.TrimSpace(reason) == "":
		return usageErr("%s: missing --reason: say why, for the audit trail (see `outboxctl %s -h`)", name, name)
	case len(reason) > outbox.MaxReasonLen:
		return usageErr("%s: --reason: longer than %d bytes", name, outbox.MaxReasonLen)
	}
	return nil
}

// oneScope parses the scope of pause and resume: an event type, or * for
// every type.
func oneScope(name string, pos []string) (string, error) {
	switch {
	case len(pos) == 0:
		return "", usageErr("%s: missing event type (or * for every type; see `outboxctl %s -h`)", name, name)
	case len(pos) > 1:
		return "", usageErr("%s takes one event type (or *), got %d (see `outboxctl %s -h`)", name, len(pos), name)
	}
	return pos[0], nil
}

// scopeName is how messages name a pause's scope.
func scopeName(scope string) string {
	if scope == outbox.PauseAll {
		return "every event type"
	}
	return "event type " + printable(scope)
}

func (c *cli) pause(args []string) error {
	fs := c.flagSet("pause", false)
	reason := reasonFlag(fs, " (required)")
	pos, err := c.parse(fs, "pause", args)
	if err != nil {
		return err
	}
	scope, err := oneScope("pause", pos)
	if err != nil {
		return err
	}
	if err := checkReason("pause", *reason, true); err != nil {
		return err
	}
	s, err := c.open(false)
	if err != nil {
		return err
	}
	if err := s.client.Pause(c.ctx, scope, *reason); err != nil {
		return err
	}
	return c.printPauseChange("paused", scope)
}

func (c *cli) resume(args []string) error {
	fs := c.flagSet("resume", false)
	pos, err := c.parse(fs, "resume", args)
	if err != nil {
		return err
	}
	scope, err := oneScope("resume", pos)
	if err != nil {
		return err
	}
	s, err := c.open(false)
	if err != nil {
		return err
	}
	if err := s.client.Resume(c.ctx, scope); err != nil {
		if isNotFound(err) {
			return notFoundErr("%s is not paused (`outboxctl pauses` lists the pauses)", scopeName(scope))
		}
		return err
	}
	return c.printPauseChange("resumed", scope)
}

func (c *cli) pauses(args []string) error {
	fs := c.flagSet("pauses", false)
	pos, err := c.parse(fs, "pauses", args)
	if err != nil {
		return err
	}
	if err := noArgs("pauses", pos); err != nil {
		return err
	}
	s, err := c.open(false)
	if err != nil {
		return err
	}
	ps, err := s.client.Pauses(c.ctx)
	if err != nil {
		return err
	}
	return c.printPauses(outboxadmin.NewPauses(ps))
}

func (c *cli) audit(args []string) error {
	fs := c.flagSet("audit", false)
	limit := fs.Int("limit", 20, "list at most this many entries (1 to 1000)")
	before := fs.Int64("before", 0, "list entries with ids below this one (the next page)")
	pos, err := c.parse(fs, "audit", args)
	if err != nil {
		return err
	}
	if err := noArgs("audit", pos); err != nil {
		return err
	}
	if *limit < 1 || *limit > 1000 {
		return usageErr("audit: --limit must be from 1 to 1000, got %d", *limit)
	}
	if *before < 0 {
		return usageErr("audit: --before must not be negative, got %d", *before)
	}
	s, err := c.open(false)
	if err != nil {
		return err
	}
	es, err := s.client.Audit(c.ctx, outbox.AuditQuery{BeforeID: *before, Limit: *limit + 1})
	if err != nil {
		return err
	}
	var next int64
	if len(es) > *limit {
		es = es[:*limit]
		next = es[len(es)-1].ID
	}
	return c.printAudit(outboxadmin.NewAudit(es), next)
}

// pendingIDs parses the arguments of an operator action on events in any
// status (force-dead, delete, skip-head): ids, --reason, and the
// confirmation flags; it opens the database and returns the events found,
// failing with exit code 3 if an id names none.
func (c *cli) pendingIDs(name string, args []string, reasonRequired bool) (*session, []outbox.Record, string, error) {
	fs := c.flagSet(name, true)
	what := ""
	if reasonRequired {
		what = " (required)"
	}
	reason := reasonFlag(fs, what)
	pos, err := c.parse(fs, name, args)
	if err != nil {
		return nil, nil, "", err
	}
	ids, err := someIDs(name, pos)
	if err != nil {
		return nil, nil, "", err
	}
	if name == "skip-head" && len(ids) > 1 {
		return nil, nil, "", usageErr("skip-head takes one event id, got %d (see `outboxctl skip-head -h`)", len(ids))
	}
	if err := checkReason(name, *reason, reasonRequired); err != nil {
		return nil, nil, "", err
	}
	s, err := c.open(false)
	if err != nil {
		return nil, nil, "", err
	}
	recs, err := c.findAll(ids)
	if err != nil {
		return nil, nil, "", err
	}
	return s, recs, *reason, nil
}

// findAll returns the events ids name, in their order, or fails with exit
// code 3 naming the first id that names none.
func (c *cli) findAll(ids []string) ([]outbox.Record, error) {
	found := make(map[string]outbox.Record, len(ids))
	for start := 0; start < len(ids); start += c.pageSize {
		batch := ids[start:min(start+c.pageSize, len(ids))]
		recs, err := c.sess.store.List(c.ctx, outbox.Query{IDs: batch, Limit: len(batch)})
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			found[r.ID] = r
		}
	}
	out := make([]outbox.Record, 0, len(ids))
	for _, id := range ids {
		r, ok := found[id]
		if !ok {
			return nil, notFoundErr("no event with id %s in %s; nothing changed", printable(id), c.sess.store.Table())
		}
		out = append(out, r)
	}
	return out, nil
}

// isPending reports whether r is NEW or RETRY.
func isPending(r outbox.Record) bool {
	return r.Status == outbox.StatusNew || r.Status == outbox.StatusRetry
}

// checkPending fails with exit code 3 unless every event of recs is
// pending: force-dead and skip-head change pending events only.
func checkPending(name string, recs []outbox.Record) ([]string, error) {
	ids := make([]string, 0, len(recs))
	for _, r := range recs {
		if !isPending(r) {
			hint := ""
			if r.Status == outbox.StatusDead && name == "skip-head" {
				hint = " (a DEAD event is replayed or deleted with `outboxctl dead`)"
			}
			return nil, notFoundErr("event %s is %s, not pending (NEW or RETRY)%s; nothing changed", printable(r.ID), r.Status, hint)
		}
		ids = append(ids, r.ID)
	}
	return ids, nil
}

func (c *cli) forceDead(args []string) error {
	s, recs, reason, err := c.pendingIDs("force-dead", args, true)
	if err != nil {
		return err
	}
	ids, err := checkPending("force-dead", recs)
	if err != nil {
		return err
	}
	n := int64(len(ids))
	if err := c.confirm(fmt.Sprintf("move %s pending %s of %s to DEAD, undelivered", thousands(n), plural(n, "event"), s.store.Table())); err != nil {
		return err
	}
	moved, err := s.client.ForceDead(c.ctx, reason, ids...)
	if err != nil {
		return err
	}
	return c.printAction("force-dead", moved, ids, fmt.Sprintf("moved %d of %d %s to DEAD", moved, n, plural(n, "event")))
}

func (c *cli) deleteEvents(args []string) error {
	s, recs, reason, err := c.pendingIDs("delete", args, false)
	if err != nil {
		return err
	}
	ids := make([]string, len(recs))
	counts := map[outbox.Status]int64{}
	for i, r := range recs {
		ids[i] = r.ID
		counts[r.Status]++
	}
	var parts []string
	for _, st := range outboxadmin.Statuses() {
		if counts[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
		}
	}
	n := int64(len(ids))
	if err := c.confirm(fmt.Sprintf("delete %s %s of %s (%s) for good", thousands(n), plural(n, "event"), s.store.Table(), strings.Join(parts, ", "))); err != nil {
		return err
	}
	deleted, err := s.client.DeleteEvents(c.ctx, reason, ids...)
	if err != nil {
		return err
	}
	return c.printAction("delete", deleted, ids, fmt.Sprintf("deleted %d of %d %s", deleted, n, plural(n, "event")))
}

func (c *cli) skipHead(args []string) error {
	s, recs, reason, err := c.pendingIDs("skip-head", args, true)
	if err != nil {
		return err
	}
	ids, err := checkPending("skip-head", recs)
	if err != nil {
		return err
	}
	if err := c.confirm(fmt.Sprintf("skip pending event %s of %s: DONE, never delivered", cell(ids[0], 0), s.store.Table())); err != nil {
		return err
	}
	if err := s.client.SkipHead(c.ctx, ids[0], reason); err != nil {
		return err
	}
	return c.printAction("skip-head", 1, ids, "skipped event "+cell(ids[0], 0)+": DONE without delivery; the later events of its key go on")
}

// pauseChangeJSON is the output of pause and resume with --json.
type pauseChangeJSON struct {
	Paused  string `json:"paused,omitempty"`
	Resumed string `json:"resumed,omitempty"`
}

func (c *cli) printPauseChange(verb, scope string) error {
	if c.g.json {
		if verb == "paused" {
			return c.writeJSON(pauseChangeJSON{Paused: scope})
		}
		return c.writeJSON(pauseChangeJSON{Resumed: scope})
	}
	if verb == "paused" {
		c.printf(c.stdout, "paused %s: no instance on %s claims its events until `outboxctl resume %s`\n", scopeName(scope), c.sess.store.Table(), cell(scope, 0))
		return nil
	}
	c.printf(c.stdout, "resumed %s: its events are delivered again\n", scopeName(scope))
	return nil
}

// pausesJSON is the output of `pauses --json`.
type pausesJSON struct {
	Pauses []outboxadmin.Pause `json:"pauses"`
}

func (c *cli) printPauses(ps []outboxadmin.Pause) error {
	if c.g.json {
		return c.writeJSON(pausesJSON{Pauses: ps})
	}
	if len(ps) == 0 {
		c.printf(c.stdout, "nothing is paused\n")
		return nil
	}
	now := c.now()
	tw := c.table()
	c.printf(tw, "SCOPE\tBY\tSINCE\tFOR\tREASON\n")
	for _, p := range ps {
		c.printf(tw, "%s\t%s\t%s\t%s\t%s\n", cell(p.Scope, 40), cell(p.By, 30), fmtTime(p.At, timeLayout), formatAge(max(now.Sub(p.At), 0)), cell(firstLine(p.Reason), 60))
	}
	return flush(tw)
}

// auditJSON is the output of `audit --json`.
type auditJSON struct {
	Entries []outboxadmin.AuditEntry `json:"entries"`
	// NextBefore is set when more entries are older: pass it to --before.
	NextBefore int64 `json:"next_before,omitempty"`
}

func (c *cli) printAudit(es []outboxadmin.AuditEntry, next int64) error {
	if c.g.json {
		return c.writeJSON(auditJSON{Entries: es, NextBefore: next})
	}
	if len(es) == 0 {
		c.printf(c.stdout, "the audit trail is empty\n")
		return nil
	}
	tw := c.table()
	c.printf(tw, "ID\tAT\tACTOR\tACTION\tCOUNT\tTARGET\tREASON\n")
	for _, e := range es {
		c.printf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", e.ID, fmtTime(e.At, timeLayout), cell(e.Actor, 30), cell(e.Action, 20), e.Count, cell(e.Target, 60), cell(firstLine(e.Reason), 50))
	}
	if err := flush(tw); err != nil {
		return err
	}
	if next != 0 {
		c.printf(c.stdout, "\nolder entries: add --before %d for the next page\n", next)
	}
	return nil
}

// actionJSON is the output of force-dead, delete and skip-head with --json.
type actionJSON struct {
	Action  string   `json:"action"`
	Changed int64    `json:"changed"`
	IDs     []string `json:"ids"`
}

func (c *cli) printAction(action string, n int64, ids []string, text string) error {
	if c.g.json {
		return c.writeJSON(actionJSON{Action: action, Changed: n, IDs: ids})
	}
	c.printf(c.stdout, "%s\n", text)
	return nil
}

// planJSON is the output of `dead replay-all --dry-run --json`.
type planJSON struct {
	DryRun bool   `json:"dry_run"`
	Table  string `json:"table"`
	outboxadmin.ReplayPlan
}

// printPlan prints what a replay would replay: how many DEAD events, and
// how many per event type and per tenant.
func (c *cli) printPlan(table, filter string, p outboxadmin.ReplayPlan) error {
	if c.g.json {
		return c.writeJSON(planJSON{DryRun: true, Table: table, ReplayPlan: p})
	}
	c.printf(c.stdout, "dry run: would replay %s DEAD %s of %s%s; nothing changed\n", thousands(p.Events), plural(p.Events, "event"), table, filter)
	if p.Events == 0 {
		return nil
	}
	for _, part := range []struct {
		head   string
		counts []outboxadmin.Count
		other  int64
	}{{"TYPE", p.Types, p.OtherTypes}, {"TENANT", p.Tenants, p.OtherTenants}} {
		c.printf(c.stdout, "\n")
		tw := c.table()
		c.printf(tw, "%s\tEVENTS\n", part.head)
		for _, n := range part.counts {
			c.printf(tw, "%s\t%s\n", cell(n.Name, 60), thousands(n.Events))
		}
		if part.other > 0 {
			c.printf(tw, "(others)\t%s\n", thousands(part.other))
		}
		if err := flush(tw); err != nil {
			return err
		}
	}
	return nil
}
