package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxadmin"
)

// pageSize is how many events one List reads while outboxctl pages
// through a table (keyset paging on the event id).
const pageSize = 500

// purgeBatch is how many events one DELETE of `purge` removes at most.
const purgeBatch = 500

func noArgs(name string, pos []string) error {
	if len(pos) > 0 {
		return usageErr("%s takes no arguments, got %q (see `outboxctl %s -h`)", name, strings.Join(pos, " "), name)
	}
	return nil
}

func oneID(name string, pos []string) (string, error) {
	switch {
	case len(pos) == 0:
		return "", usageErr("%s: missing event id (see `outboxctl %s -h`)", name, name)
	case len(pos) > 1:
		return "", usageErr("%s takes one event id, got %d (see `outboxctl %s -h`)", name, len(pos), name)
	case pos[0] == "":
		return "", usageErr("%s: empty event id", name)
	}
	return pos[0], nil
}

func someIDs(name string, pos []string) ([]string, error) {
	if len(pos) == 0 {
		return nil, usageErr("%s: missing event ids (see `outboxctl %s -h`)", name, name)
	}
	ids := make([]string, 0, len(pos))
	seen := make(map[string]bool, len(pos))
	for _, id := range pos {
		if id == "" {
			return nil, usageErr("%s: empty event id", name)
		}
		if !seen[id] { // the first of duplicates, in the given order
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// tenantFlag registers --tenant on fs: only the events of one tenant.
func tenantFlag(fs *flag.FlagSet, tenant *string) {
	fs.StringVar(tenant, "tenant", "", "only events of this tenant")
}

// checkTenant fails unless tenant is "" (every tenant) or a tenant id an
// event can carry.
func checkTenant(name, tenant string) error {
	if len(tenant) > outbox.MaxTenantIDLen {
		return usageErr("%s: --tenant: longer than a tenant id can be (%d characters)", name, outbox.MaxTenantIDLen)
	}
	return nil
}

// ofTenant is " of tenant T" for a tenant, "" for every tenant.
func ofTenant(tenant string) string {
	if tenant == "" {
		return ""
	}
	return " of tenant " + tenant
}

func (c *cli) migrate(args []string) error {
	fs := c.flagSet("migrate", false)
	apply := fs.Bool("apply", false, "create the table and its indexes")
	pos, err := c.parse(fs, "migrate", args)
	if err != nil {
		return err
	}
	if err := noArgs("migrate", pos); err != nil {
		return err
	}
	if !*apply {
		// Printing needs the dialect only: no connection.
		t, err := c.target()
		if err != nil {
			return err
		}
		db, store, err := c.storeOn(t)
		if err != nil {
			return err
		}
		defer db.Close()
		return c.printMigrate(t.dialect.Name(), store.Table(), store.Schema(), false)
	}
	s, err := c.open(true)
	if err != nil {
		return err
	}
	if err := s.store.Migrate(c.ctx); err != nil {
		return err
	}
	return c.printMigrate(s.t.dialect.Name(), s.store.Table(), s.store.Schema(), true)
}

func (c *cli) stats(args []string) error {
	fs := c.flagSet("stats", false)
	var tenant string
	tenantFlag(fs, &tenant)
	pos, err := c.parse(fs, "stats", args)
	if err != nil {
		return err
	}
	if err := noArgs("stats", pos); err != nil {
		return err
	}
	if err := checkTenant("stats", tenant); err != nil {
		return err
	}
	s, err := c.open(false)
	if err != nil {
		return err
	}
	if tenant != "" {
		// Counts of one tenant, one indexed count per status.
		st := outbox.Stats{ByStatus: map[outbox.Status]int64{}}
		for _, status := range outboxadmin.Statuses() {
			n, err := s.store.Count(c.ctx, outbox.Query{Statuses: []outbox.Status{status}, TenantID: tenant})
			if err != nil {
				return err
			}
			st.ByStatus[status] = n
		}
		return c.printStats(s.store.Table(), tenant, st)
	}
	st, err := s.client.Stats(c.ctx)
	if err != nil {
		return err
	}
	return c.printStats(s.store.Table(), "", st)
}

func (c *cli) get(args []string) error {
	fs := c.flagSet("get", false)
	pos, err := c.parse(fs, "get", args)
	if err != nil {
		return err
	}
	id, err := oneID("get", pos)
	if err != nil {
		return err
	}
	rec, err := c.lookup(id)
	if err != nil {
		return err
	}
	return c.printEvent(rec)
}

// lookup opens the database and returns event id in any status.
func (c *cli) lookup(id string) (outbox.Record, error) {
	s, err := c.open(false)
	if err != nil {
		return outbox.Record{}, err
	}
	rec, err := s.client.Get(c.ctx, id)
	if err != nil {
		if isNotFound(err) {
			return rec, notFoundErr("no event with id %s in %s", id, s.store.Table())
		}
		return rec, err
	}
	return rec, nil
}

// deadFilter is the filter of `dead list` and `dead replay-all`.
type deadFilter struct {
	eventType, aggregate, tenant string
	olderThan                    durationFlag
}

func (f *deadFilter) register(fs *flag.FlagSet) {
	fs.StringVar(&f.eventType, "type", "", "only events of this event type")
	fs.StringVar(&f.aggregate, "aggregate", "", "only events of this aggregate type")
	tenantFlag(fs, &f.tenant)
	fs.Var(&f.olderThan, "older-than", "only events DEAD for longer than this (24h, 7d, 1d12h)")
}

func (f *deadFilter) query() outbox.Query {
	return outbox.Query{EventType: f.eventType, AggregateType: f.aggregate, TenantID: f.tenant}
}

// cutoff is the time before which matching events went DEAD; zero when
// there is no age filter.
func (f *deadFilter) cutoff(now time.Time) time.Time {
	if !f.olderThan.set {
		return time.Time{}
	}
	return now.Add(-f.olderThan.d)
}

// deadAt is when rec went DEAD (its creation time if the row has no
// completion time).
func deadAt(rec outbox.Record) time.Time {
	if !rec.DoneAt.IsZero() {
		return rec.DoneAt
	}
	return rec.CreatedAt
}

// collectDead returns the DEAD events matching q (by type and aggregate in
// SQL) that went DEAD before cutoff (unless zero), by id, at most limit of
// them (0: all), and whether more match. Query has no time filter: the
// age filter pages through the DEAD events and is applied here.
func (c *cli) collectDead(q outbox.Query, cutoff time.Time, limit int) ([]outbox.Record, bool, error) {
	dead := c.sess.client.Dead()
	var recs []outbox.Record
	for {
		q.Limit = c.pageSize
		page, err := dead.List(c.ctx, q)
		if err != nil {
			return nil, false, err
		}
		for _, r := range page {
			if !cutoff.IsZero() && !deadAt(r).Before(cutoff) {
				continue
			}
			if limit > 0 && len(recs) == limit {
				return recs, true, nil
			}
			recs = append(recs, r)
		}
		if len(page) < c.pageSize {
			return recs, false, nil
		}
		q.AfterID = page[len(page)-1].ID
	}
}

func (c *cli) deadList(args []string) error {
	fs := c.flagSet("dead list", false)
	var f deadFilter
	f.register(fs)
	limit := fs.Int("limit", 100, "list at most this many events (0: all)")
	after := fs.String("after", "", "list events with ids after this one (the next page)")
	pos, err := c.parse(fs, "dead list", args)
	if err != nil {
		return err
	}
	if err := noArgs("dead list", pos); err != nil {
		return err
	}
	if err := checkTenant("dead list", f.tenant); err != nil {
		return err
	}
	if *limit < 0 {
		return usageErr("dead list: --limit must not be negative, got %d", *limit)
	}
	if _, err := c.open(false); err != nil {
		return err
	}
	q := f.query()
	q.AfterID = *after
	recs, more, err := c.collectDead(q, f.cutoff(c.now()), *limit)
	if err != nil {
		return err
	}
	return c.printDeadList(recs, more)
}

func (c *cli) deadShow(args []string) error {
	fs := c.flagSet("dead show", false)
	pos, err := c.parse(fs, "dead show", args)
	if err != nil {
		return err
	}
	id, err := oneID("dead show", pos)
	if err != nil {
		return err
	}
	rec, err := c.lookup(id)
	if err != nil {
		return err
	}
	if rec.Status != outbox.StatusDead {
		return notFoundErr("event %s is %s, not DEAD (`outboxctl get %s` shows it)", id, rec.Status, id)
	}
	return c.printEvent(rec)
}

// deadIDs parses the arguments of command name (dead replay, dead
// delete): ids, --tenant and the confirmation flags; it opens the database
// and checks that every id is a DEAD event (of the tenant, with --tenant):
// if not, with an *outboxadmin.NotDeadError, which wraps
// outbox.ErrNotFound (exit code 3).
func (c *cli) deadIDs(name string, args []string) (*session, []string, error) {
	fs := c.flagSet(name, true)
	var tenant string
	tenantFlag(fs, &tenant)
	pos, err := c.parse(fs, name, args)
	if err != nil {
		return nil, nil, err
	}
	ids, err := someIDs(name, pos)
	if err != nil {
		return nil, nil, err
	}
	if err := checkTenant(name, tenant); err != nil {
		return nil, nil, err
	}
	s, err := c.open(false)
	if err != nil {
		return nil, nil, err
	}
	if err := outboxadmin.CheckDeadOf(c.ctx, s.client, s.store.Table(), tenant, ids); err != nil {
		return nil, nil, err
	}
	return s, ids, nil
}

func (c *cli) deadReplay(args []string) error {
	s, ids, err := c.deadIDs("dead replay", args)
	if err != nil {
		return err
	}
	if len(ids) == 1 {
		if err := s.client.Dead().Replay(c.ctx, ids[0]); err != nil {
			return err
		}
		return c.printChange("replayed", 1, ids)
	}
	if err := c.confirm(fmt.Sprintf("replay %d DEAD events of %s", len(ids), s.store.Table())); err != nil {
		return err
	}
	n, err := outboxadmin.ReplayIDs(c.ctx, s.client.Dead(), ids)
	if err != nil {
		return err
	}
	return c.printChange("replayed", n, ids)
}

func (c *cli) deadReplayAll(args []string) error {
	fs := c.flagSet("dead replay-all", true)
	var f deadFilter
	f.register(fs)
	pos, err := c.parse(fs, "dead replay-all", args)
	if err != nil {
		return err
	}
	if err := noArgs("dead replay-all", pos); err != nil {
		return err
	}
	if err := checkTenant("dead replay-all", f.tenant); err != nil {
		return err
	}
	s, err := c.open(false)
	if err != nil {
		return err
	}
	recs, _, err := c.collectDead(f.query(), f.cutoff(c.now()), 0)
	if err != nil {
		return err
	}
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	if len(ids) == 0 {
		return c.printChange("replayed", 0, ids)
	}
	if err := c.confirm(fmt.Sprintf("replay %d DEAD events of %s%s", len(ids), s.store.Table(), f.describe())); err != nil {
		return err
	}
	// Exactly the events counted and confirmed: one that goes DEAD
	// meanwhile is left alone.
	n, err := outboxadmin.ReplayIDs(c.ctx, s.client.Dead(), ids)
	if err != nil {
		return err
	}
	return c.printChange("replayed", n, ids)
}

// describe says what the filter selects, for the confirmation prompt.
func (f *deadFilter) describe() string {
	var parts []string
	if f.eventType != "" {
		parts = append(parts, "type "+f.eventType)
	}
	if f.aggregate != "" {
		parts = append(parts, "aggregate "+f.aggregate)
	}
	if f.tenant != "" {
		parts = append(parts, "tenant "+f.tenant)
	}
	if f.olderThan.set {
		parts = append(parts, "DEAD for more than "+f.olderThan.String())
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func (c *cli) deadDelete(args []string) error {
	s, ids, err := c.deadIDs("dead delete", args)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("delete %d DEAD events of %s for good", len(ids), s.store.Table())
	if len(ids) == 1 {
		what = fmt.Sprintf("delete DEAD event %s of %s for good", ids[0], s.store.Table())
	}
	if err := c.confirm(what); err != nil {
		return err
	}
	n, err := s.client.Dead().Delete(c.ctx, ids...)
	if err != nil {
		return err
	}
	return c.printChange("deleted", n, ids)
}

func (c *cli) purge(args []string) error {
	fs := c.flagSet("purge", true)
	status := fs.String("status", "", "done or dead (required)")
	var olderThan durationFlag
	fs.Var(&olderThan, "older-than", "purge events completed longer ago than this (required)")
	limit := fs.Int("limit", 0, "purge at most this many events (0: all that match)")
	var tenant string
	tenantFlag(fs, &tenant)
	pos, err := c.parse(fs, "purge", args)
	if err != nil {
		return err
	}
	if err := noArgs("purge", pos); err != nil {
		return err
	}
	var st outbox.Status
	switch strings.ToLower(*status) {
	case "done":
		st = outbox.StatusDone
	case "dead":
		st = outbox.StatusDead
	case "":
		return usageErr("purge: missing --status done|dead (see `outboxctl purge -h`)")
	default:
		return usageErr("purge: --status %q: want done or dead", *status)
	}
	if !olderThan.set {
		return usageErr("purge: missing --older-than DURATION, such as 7d (see `outboxctl purge -h`)")
	}
	if *limit < 0 {
		return usageErr("purge: --limit must not be negative, got %d", *limit)
	}
	if err := checkTenant("purge", tenant); err != nil {
		return err
	}
	s, err := c.open(false)
	if err != nil {
		return err
	}
	before := c.now().Add(-olderThan.d)
	// A cheap read first: it finds a missing table before the prompt, and
	// an empty status needs no confirmation.
	some, err := s.store.List(c.ctx, outbox.Query{Statuses: []outbox.Status{st}, TenantID: tenant, Limit: 1})
	if err != nil {
		return err
	}
	var total int64
	if len(some) > 0 {
		what := fmt.Sprintf("delete the %s events%s of %s completed before %s for good", st, ofTenant(tenant), s.store.Table(), before.Format(time.RFC3339))
		if *limit > 0 {
			what += fmt.Sprintf(" (at most %d)", *limit)
		}
		if err := c.confirm(what); err != nil {
			return err
		}
		for *limit == 0 || total < int64(*limit) {
			batch := purgeBatch
			if *limit > 0 {
				batch = min(batch, *limit-int(total))
			}
			n, err := s.store.Purge(c.ctx, outbox.PurgeRequest{Status: st, Before: before, Limit: batch, TenantID: tenant})
			total += n
			if err != nil {
				return fmt.Errorf("purged %d %s events, then: %w", total, st, err)
			}
			if n < int64(batch) {
				break
			}
		}
	}
	return c.printPurge(st, tenant, before, total)
}
