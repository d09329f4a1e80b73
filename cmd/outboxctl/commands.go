package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

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

// tenantFilter is the value of --tenant: the events of one tenant, or,
// when the flag is not given, of every tenant.
type tenantFilter struct {
	id  string
	set bool // the flag was given, perhaps with an empty value
}

func (f *tenantFilter) String() string {
	if f == nil {
		return ""
	}
	return f.id
}

func (f *tenantFilter) Set(v string) error {
	f.id, f.set = v, true
	return nil
}

// tenantFlag registers --tenant on fs: only the events of one tenant.
func tenantFlag(fs *flag.FlagSet, tenant *tenantFilter) {
	fs.Var(tenant, "tenant", "only events of this tenant (leave it out for every tenant)")
}

// checkTenant fails unless --tenant was left out (every tenant) or names
// a tenant id an event can carry. An empty or blank value is refused: a
// filter given empty is a mistake (an unset variable, say), never "every
// tenant".
func checkTenant(name string, tenant tenantFilter) error {
	switch {
	case !tenant.set:
		return nil
	case tenant.id == "":
		return usageErr("%s: --tenant is empty: name a tenant, or leave --tenant out for the events of every tenant", name)
	case strings.TrimSpace(tenant.id) == "":
		return usageErr("%s: --tenant %q is blank: name a tenant, or leave --tenant out for the events of every tenant", name, tenant.id)
	case len(tenant.id) > outbox.MaxTenantIDLen:
		return usageErr("%s: --tenant: longer than a tenant id can be (%d characters)", name, outbox.MaxTenantIDLen)
	case !utf8.ValidString(tenant.id) || strings.ContainsRune(tenant.id, 0):
		return usageErr("%s: --tenant %q is not a tenant id an event can carry (not UTF-8, or a NUL)", name, tenant.id)
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
	var tf tenantFilter
	tenantFlag(fs, &tf)
	pos, err := c.parse(fs, "stats", args)
	if err != nil {
		return err
	}
	if err := noArgs("stats", pos); err != nil {
		return err
	}
	if err := checkTenant("stats", tf); err != nil {
		return err
	}
	tenant := tf.id
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
	ps, err := s.client.Pauses(c.ctx)
	if err != nil && !errors.Is(err, outbox.ErrUnsupported) {
		return err
	}
	c.pausesNow = outboxadmin.NewPauses(ps)
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
	eventType, aggregate string
	tenant               tenantFilter
	olderThan            durationFlag
}

func (f *deadFilter) register(fs *flag.FlagSet) {
	fs.StringVar(&f.eventType, "type", "", "only events of this event type")
	fs.StringVar(&f.aggregate, "aggregate", "", "only events of this aggregate type")
	tenantFlag(fs, &f.tenant)
	fs.Var(&f.olderThan, "older-than", "only events DEAD for longer than this (24h, 7d, 1d12h)")
}

func (f *deadFilter) query() outbox.Query {
	return outbox.Query{EventType: f.eventType, AggregateType: f.aggregate, TenantID: f.tenant.id}
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

// match returns the test of the filter's age: whether a DEAD event went
// DEAD before cutoff (every event when cutoff is zero). Query has no time
// filter: the age filter is applied to each page read.
func match(cutoff time.Time) func(outbox.Record) bool {
	return func(r outbox.Record) bool { return cutoff.IsZero() || deadAt(r).Before(cutoff) }
}

// deadPages pages through the DEAD events that q selects (by type,
// aggregate and tenant in SQL, from q.AfterID on, by id), c.pageSize at a
// time, and calls fn with those of each page that keep accepts, until fn
// returns true or no event is left. Only one page is held at a time, so
// memory does not grow with the table.
func (c *cli) deadPages(q outbox.Query, keep func(outbox.Record) bool, fn func(recs []outbox.Record) (stop bool, err error)) error {
	dead := c.sess.client.Dead()
	for {
		q.Limit = c.pageSize
		page, err := dead.List(c.ctx, q)
		if err != nil {
			return err
		}
		full := len(page) == c.pageSize
		if full {
			q.AfterID = page[len(page)-1].ID
		}
		stop, err := fn(slices.DeleteFunc(page, func(r outbox.Record) bool { return !keep(r) }))
		if err != nil || stop || !full {
			return err
		}
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
	out := c.newDeadList()
	more := false
	err = c.deadPages(q, match(f.cutoff(c.now())), func(recs []outbox.Record) (bool, error) {
		for _, r := range recs {
			if *limit > 0 && out.n == *limit {
				more = true
				return true, nil
			}
			out.add(r)
		}
		c.progress("listed %s DEAD events", thousands(int64(out.n)))
		return false, out.flush()
	})
	c.progressEnd()
	if err != nil {
		return err
	}
	return out.end(more)
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
	var tenant tenantFilter
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
	if err := outboxadmin.CheckDeadOf(c.ctx, s.client, s.store.Table(), tenant.id, ids); err != nil {
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
	dryRun := fs.Bool("dry-run", false, "count what would be replayed, per event type and tenant; change nothing")
	var pace rateFlag
	fs.Var(&pace, "rate", "replay at most this many events a second: 100/s, 600/m, 5000/h")
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
	// First the count, for the prompt, and the bounds of what it counted:
	// the greatest id, and the latest time an event went DEAD.
	matches := match(f.cutoff(c.now()))
	var (
		count    int64
		lastID   string
		lastDead time.Time
		plan     outboxadmin.ReplayPlan
	)
	err = c.deadPages(f.query(), matches, func(recs []outbox.Record) (bool, error) {
		for _, r := range recs {
			count++
			lastID = max(lastID, r.ID)
			if d := deadAt(r); d.After(lastDead) {
				lastDead = d
			}
			if *dryRun {
				plan.Add(r)
			}
		}
		c.progress("counted %s DEAD events", thousands(count))
		return false, nil
	})
	c.progressEnd()
	if err != nil {
		return err
	}
	if *dryRun {
		return c.printPlan(s.store.Table(), f.describe(), plan.Done())
	}
	out := c.newChange("replayed")
	if count == 0 {
		return out.end(0, 0)
	}
	what := fmt.Sprintf("replay %s DEAD %s of %s%s", thousands(count), plural(count, "event"), s.store.Table(), f.describe())
	if pace.set() {
		what += " at " + pace.raw
	}
	if err := c.confirm(what); err != nil {
		return err
	}
	// Then the replay, page by page, of the events counted and confirmed:
	// one that goes DEAD meanwhile is later than the count's bounds and
	// is left alone. With --rate, a page goes in chunks, paced.
	counted := func(r outbox.Record) bool { return matches(r) && r.ID <= lastID && !deadAt(r).After(lastDead) }
	p := newPacer(pace, c.pageSize)
	var submitted, replayed int64
	defer func() { c.recordReplay(f, replayed) }()
	err = c.deadPages(f.query(), counted, func(recs []outbox.Record) (bool, error) {
		ids := make([]string, len(recs))
		for i, r := range recs {
			ids[i] = r.ID
			out.add(r.ID)
		}
		for _, chunk := range p.chunks(ids) {
			if err := p.wait(c.ctx, len(chunk)); err != nil {
				return true, err
			}
			n, err := s.store.Replay(c.ctx, chunk, c.now())
			submitted, replayed = submitted+int64(len(chunk)), replayed+n
			if err != nil {
				return true, err
			}
			if sp := p.speed(submitted, count); sp != "" {
				c.progress("replayed %s of %s DEAD events, %s", thousands(replayed), thousands(count), sp)
			} else {
				c.progress("replayed %s of %s DEAD events", thousands(replayed), thousands(count))
			}
		}
		return false, nil
	})
	c.progressEnd()
	if err != nil {
		return fmt.Errorf("replayed %d DEAD events, then: %w", replayed, err)
	}
	if p != nil && !c.g.json {
		d := p.elapsed()
		c.printf(c.stdout, "paced at %s: %s %s in %s (%s/s)\n", pace.raw, thousands(submitted), plural(submitted, "event"), formatAge(d),
			formatRate(float64(submitted)/max(d.Seconds(), 1e-3)))
	}
	return out.end(replayed, submitted)
}

// recordReplay records a replay of dead replay-all in the audit trail, one
// entry for the whole run (the store's replays record none), if the
// table's database keeps one and any event was replayed.
func (c *cli) recordReplay(f deadFilter, n int64) {
	ctl, ok := any(c.sess.store).(outbox.Controls)
	if !ok || n == 0 {
		return
	}
	target := outbox.QueryTarget(outbox.Query{Statuses: []outbox.Status{outbox.StatusDead}, EventType: f.eventType, AggregateType: f.aggregate, TenantID: f.tenant.id})
	if f.olderThan.set {
		target += " older-than=" + f.olderThan.String()
	}
	e := outbox.AuditEntry{At: c.now(), Actor: outbox.ActorOf(c.ctx), Action: "replay", Target: target, Count: n}
	if _, err := ctl.AppendAudit(context.WithoutCancel(c.ctx), e); err != nil {
		c.printf(c.stderr, "outboxctl: warning: the replay was not recorded in the audit trail: %s\n", oneLine(err.Error()))
	}
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
	if f.tenant.id != "" {
		parts = append(parts, "tenant "+f.tenant.id)
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
	var tf tenantFilter
	tenantFlag(fs, &tf)
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
	if err := checkTenant("purge", tf); err != nil {
		return err
	}
	tenant := tf.id
	s, err := c.open(false)
	if err != nil {
		return err
	}
	before := c.now().Add(-olderThan.d)
	// The count first: it finds a missing table before the prompt, says in
	// the prompt how many events go, and none needs no confirmation.
	// (Events completed meanwhile can make the purge delete a few more.)
	matching, err := s.store.CountPurgeable(c.ctx, outbox.PurgeRequest{Status: st, Before: before, TenantID: tenant})
	if err != nil {
		return err
	}
	var total int64
	if matching > 0 {
		n := matching
		if *limit > 0 {
			n = min(n, int64(*limit))
		}
		what := fmt.Sprintf("delete %s %s %s%s of %s completed before %s for good", thousands(n), st, plural(n, "event"), ofTenant(tenant),
			s.store.Table(), before.Format(time.RFC3339))
		if *limit > 0 && matching > n {
			what += fmt.Sprintf(" (--limit %d of the %s that match)", *limit, thousands(matching))
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
