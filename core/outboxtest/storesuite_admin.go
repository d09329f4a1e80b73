package outboxtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// The store suite's cases of the operator's calls: get, list, count, replay,
// delete, statistics, purging, and their tenant scope.

func storeReplay(t *testing.T, f Fixture) {
	ctx := context.Background()
	dead, pending := event(t), event(t)
	insert(t, f, t0, ownerA, dead, pending)
	if _, err := f.Store.MarkDead(ctx, outbox.Outcome{Owner: ownerA, ID: dead.ID(), At: t0, Error: "poison", CountAttempt: true}); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour).In(zoneWest)
	n, err := f.Store.Replay(ctx, []string{dead.ID(), pending.ID(), "no-such-id"}, now)
	if err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v; want 1 (only the DEAD row)", n, err)
	}
	r := get(t, f, dead.ID())
	wantState(t, r, outbox.StatusNew, 0, "")
	wantTime(t, "available at", r.AvailableAt, now)
	wantTime(t, "done at", r.DoneAt, time.Time{})
	if r.LastError != "poison" {
		t.Errorf("replay dropped the last error: %q", r.LastError)
	}
	wantState(t, get(t, f, pending.ID()), outbox.StatusNew, 0, ownerA)
	if n, err := f.Store.Replay(ctx, []string{dead.ID()}, now); err != nil || n != 0 {
		t.Fatalf("second Replay = %d, %v; want 0", n, err)
	}
	got := claim(t, f, outbox.ClaimRequest{Owner: ownerB, Now: now, Lease: 2 * time.Hour, Limit: 10})
	if len(got) != 1 || got[0].ID != dead.ID() {
		t.Fatalf("replayed row not claimable: %v", recIDs(got))
	}
}

func storeDelete(t *testing.T, f Fixture) {
	ctx := context.Background()
	dead, pending := event(t), event(t)
	insert(t, f, t0, ownerA, dead, pending)
	if _, err := f.Store.MarkDead(ctx, outbox.Outcome{Owner: ownerA, ID: dead.ID(), At: t0, Error: "poison", CountAttempt: true}); err != nil {
		t.Fatal(err)
	}
	n, err := f.Store.Delete(ctx, []string{dead.ID(), pending.ID(), "no-such-id"})
	if err != nil || n != 1 {
		t.Fatalf("Delete = %d, %v; want 1 (only the DEAD row)", n, err)
	}
	if _, err := f.Store.Get(ctx, dead.ID()); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("deleted row still there: %v", err)
	}
	wantState(t, get(t, f, pending.ID()), outbox.StatusNew, 0, ownerA)
	if n, err := f.Store.Delete(ctx, []string{dead.ID()}); err != nil || n != 0 {
		t.Fatalf("second Delete = %d, %v; want 0", n, err)
	}
}

// seedStatuses inserts events of two aggregates and two types and moves
// them to every status; it returns the ids per status.
func seedStatuses(t *testing.T, f Fixture) map[outbox.Status][]string {
	byStatus := map[outbox.Status][]string{}
	for i := range 24 {
		agg := outbox.AggregateName([]string{"Order", "User"}[i%2])
		typ := outbox.EventName([]string{"Created", "Deleted", "Created"}[i%3])
		e, err := outbox.NewEnvelope(typ, outbox.WithJSON([]byte(`{}`)), outbox.WithAggregate(agg, fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		insert(t, f, t0.Add(time.Duration(i)*time.Second), ownerA, e)
		st := outbox.Status(i % 4)
		moveTo(t, f, e.ID(), st)
		byStatus[st] = append(byStatus[st], e.ID())
	}
	return byStatus
}

// moveTo moves id, inserted claimed by ownerA, to status st: it stays NEW,
// or goes DONE, RETRY (due at t0) or DEAD with one attempt.
func moveTo(t *testing.T, f Fixture, id string, st outbox.Status) {
	t.Helper()
	ctx := context.Background()
	var (
		ok  bool
		err error
	)
	switch st {
	case outbox.StatusNew:
		ok = true
	case outbox.StatusDone:
		var n int64
		n, err = f.Store.MarkDone(ctx, ownerA, []string{id}, t0)
		ok = n == 1
	case outbox.StatusRetry:
		ok, err = f.Store.MarkRetry(ctx, outbox.Outcome{Owner: ownerA, ID: id, At: t0, Error: "x", CountAttempt: true})
	case outbox.StatusDead:
		ok, err = f.Store.MarkDead(ctx, outbox.Outcome{Owner: ownerA, ID: id, At: t0, Error: "x", CountAttempt: true})
	}
	if err != nil || !ok {
		t.Fatalf("move to %v: %v, %v", st, ok, err)
	}
}

func storeListCount(t *testing.T, f Fixture) {
	byStatus := seedStatuses(t, f)
	for _, tc := range []struct {
		q    outbox.Query
		want int
	}{
		{outbox.Query{}, 24},
		{outbox.Query{Statuses: []outbox.Status{outbox.StatusDead}}, 6},
		{outbox.Query{Statuses: []outbox.Status{outbox.StatusNew, outbox.StatusRetry}}, 12},
		{outbox.Query{Statuses: []outbox.Status{outbox.StatusDone, outbox.StatusDone, outbox.StatusDead, outbox.StatusNew, outbox.StatusRetry}}, 24},
		{outbox.Query{Statuses: []outbox.Status{outbox.Status(9)}}, 0},
		{outbox.Query{AggregateType: "Order"}, 12},
		{outbox.Query{EventType: "Deleted"}, 8},
		{outbox.Query{AggregateType: "User", EventType: "Created"}, 8},
		{outbox.Query{AggregateType: "Order", Statuses: []outbox.Status{outbox.StatusNew}}, 6},
		{outbox.Query{AggregateType: "Nobody"}, 0},
	} {
		if n := countRows(t, f, tc.q); n != int64(tc.want) {
			t.Errorf("Count(%+v) = %d, want %d", tc.q, n, tc.want)
		}
		recs := listAll(t, f, tc.q)
		if len(recs) != tc.want {
			t.Errorf("List(%+v) paged = %d records, want %d", tc.q, len(recs), tc.want)
		}
		got := recIDs(recs)
		if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Errorf("List(%+v) pages are not in strict id order: %v", tc.q, got)
		}
		for _, r := range recs {
			if tc.q.AggregateType != "" && r.Envelope.AggregateType() != tc.q.AggregateType ||
				tc.q.EventType != "" && r.Envelope.Type() != tc.q.EventType ||
				len(tc.q.Statuses) > 0 && !slices.Contains(tc.q.Statuses, r.Status) {
				t.Errorf("List(%+v) returned %s (%s %s %v)", tc.q, r.ID, r.Envelope.AggregateType(), r.Envelope.Type(), r.Status)
			}
		}
	}
	dead := listAll(t, f, outbox.Query{Statuses: []outbox.Status{outbox.StatusDead}})
	want := slices.Clone(byStatus[outbox.StatusDead])
	slices.Sort(want)
	if got := recIDs(dead); !slices.Equal(got, want) {
		t.Errorf("dead events %v, want %v", got, want)
	}
	// Keyset: AfterID is exclusive; Count honours it too.
	all := recIDs(listAll(t, f, outbox.Query{}))
	recs, err := f.Store.List(context.Background(), outbox.Query{AfterID: all[9], Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got := recIDs(recs); !slices.Equal(got, all[10:15]) {
		t.Errorf("List after %s = %v, want %v", all[9], got, all[10:15])
	}
	if n := countRows(t, f, outbox.Query{AfterID: all[9], Limit: 5}); n != 14 {
		t.Errorf("Count after the 10th id = %d, want 14 (Limit ignored)", n)
	}
	// Default limit.
	insert(t, f, t0, "", events(t, 100)...)
	recs, err = f.Store.List(context.Background(), outbox.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 100 {
		t.Errorf("List without a limit returned %d records, want the default 100", len(recs))
	}
}

// tenants are the tenants of seedTenants: two named ones (one the
// other's prefix) and none.
var tenants = []string{"acme", "acme-eu", ""}

// seedTenants inserts 36 events, a third of each tenant of tenants, and
// moves them to every status (event i: tenant i%3, status i%4); it
// returns the ids per tenant and status, in id order.
func seedTenants(t *testing.T, f Fixture) map[string]map[outbox.Status][]string {
	out := map[string]map[outbox.Status][]string{}
	for i := range 36 {
		tenant := tenants[i%3]
		e := event(t, outbox.WithTenant(tenant))
		insert(t, f, t0.Add(time.Duration(i)*time.Second), ownerA, e)
		st := outbox.Status(i % 4)
		moveTo(t, f, e.ID(), st)
		if out[tenant] == nil {
			out[tenant] = map[outbox.Status][]string{}
		}
		out[tenant][st] = append(out[tenant][st], e.ID())
	}
	for _, byStatus := range out {
		for _, ids := range byStatus {
			slices.Sort(ids)
		}
	}
	return out
}

// storeTenantScope: Query.TenantID selects one tenant's events (exactly:
// not another tenant whose name it starts, not in another case) in List,
// with keyset paging within the tenant, and in Count; "" selects every
// tenant's and those without one.
func storeTenantScope(t *testing.T, f Fixture) {
	seeded := seedTenants(t, f)
	want := func(tenant string, statuses ...outbox.Status) []string {
		var ids []string
		for tn, byStatus := range seeded {
			if tenant != "" && tn != tenant {
				continue
			}
			for st, got := range byStatus {
				if len(statuses) == 0 || slices.Contains(statuses, st) {
					ids = append(ids, got...)
				}
			}
		}
		slices.Sort(ids)
		return ids
	}
	dead, pending := []outbox.Status{outbox.StatusDead}, []outbox.Status{outbox.StatusNew, outbox.StatusRetry}
	for _, tc := range []struct {
		q    outbox.Query
		want []string
	}{
		{outbox.Query{}, want("")},
		{outbox.Query{TenantID: "acme"}, want("acme")},
		{outbox.Query{TenantID: "acme-eu"}, want("acme-eu")},
		{outbox.Query{TenantID: "acme", Statuses: dead}, want("acme", dead...)},
		{outbox.Query{TenantID: "acme-eu", Statuses: pending}, want("acme-eu", pending...)},
		{outbox.Query{Statuses: dead}, want("", dead...)},
		{outbox.Query{TenantID: "ACME"}, nil},
		{outbox.Query{TenantID: "acm"}, nil},
		{outbox.Query{TenantID: "acme", EventType: "Other"}, nil},
		{outbox.Query{TenantID: "acme", IDs: append(want("acme-eu")[:2:2], want("acme")[:3]...)}, want("acme")[:3]},
	} {
		if n := countRows(t, f, tc.q); n != int64(len(tc.want)) {
			t.Errorf("Count(%+v) = %d, want %d", tc.q, n, len(tc.want))
		}
		if got := recIDs(listAll(t, f, tc.q)); !slices.Equal(got, tc.want) {
			t.Errorf("List(%+v) paged = %v, want %v", tc.q, got, tc.want)
		}
	}
	for _, r := range listAll(t, f, outbox.Query{TenantID: "acme-eu"}) {
		if r.Envelope.TenantID() != "acme-eu" {
			t.Errorf("List of tenant acme-eu returned %s of tenant %q", r.ID, r.Envelope.TenantID())
		}
	}
	// Keyset paging within a tenant and a status: each page starts after
	// the previous page's last id and holds only the tenant's events.
	acmeDone := want("acme", outbox.StatusDone)
	q := outbox.Query{TenantID: "acme", Statuses: []outbox.Status{outbox.StatusDone}, AfterID: acmeDone[0], Limit: 2}
	recs, err := f.Store.List(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if got := recIDs(recs); !slices.Equal(got, acmeDone[1:3]) {
		t.Errorf("List(%+v) = %v, want %v", q, got, acmeDone[1:3])
	}
	if n := countRows(t, f, q); n != int64(len(acmeDone)-1) {
		t.Errorf("Count(%+v) = %d, want %d (after the first id, Limit ignored)", q, n, len(acmeDone)-1)
	}
}

// storeTenantExact: a tenant id, an event type and an aggregate type are
// compared exactly, trailing spaces included (MySQL's PAD SPACE collations compare "acme " equal to
// "acme"): Query.TenantID and PurgeRequest.TenantID select the events of
// that id alone, never those of an id that differs by trailing or leading
// spaces, nor the events without a tenant for a tenant of spaces.
func storeTenantExact(t *testing.T, f Fixture) {
	ctx := context.Background()
	names := []string{"acme", "acme ", "acme  ", " acme", " ", "  ", ""}
	byTenant := map[string][]string{}
	for i, tenant := range names {
		for j := range 2 {
			e := Stored(t, event(t, outbox.WithAggregate(outbox.AggregateName("Order"), "o-1")), tenant, nil)
			insert(t, f, t0.Add(time.Duration(2*i+j)*time.Second), ownerA, e)
			moveTo(t, f, e.ID(), outbox.StatusDone)
			byTenant[tenant] = append(byTenant[tenant], e.ID())
		}
		slices.Sort(byTenant[tenant])
	}
	done := []outbox.Status{outbox.StatusDone}
	for _, tenant := range names[:len(names)-1] {
		for _, q := range []outbox.Query{{TenantID: tenant}, {TenantID: tenant, Statuses: done}} {
			if got := recIDs(listAll(t, f, q)); !slices.Equal(got, byTenant[tenant]) {
				t.Errorf("List(tenant %q) = %v, want %v (its own events only)", tenant, got, byTenant[tenant])
			}
			if n := countRows(t, f, q); n != int64(len(byTenant[tenant])) {
				t.Errorf("Count(tenant %q) = %d, want %d", tenant, n, len(byTenant[tenant]))
			}
		}
	}
	// The type filters are exact too: a type that differs by trailing
	// spaces selects nothing.
	for _, q := range []outbox.Query{{EventType: string(evtTest) + " "}, {EventType: string(evtTest) + "  "}, {AggregateType: "Order "}} {
		if got := recIDs(listAll(t, f, q)); len(got) != 0 {
			t.Errorf("List(%+v) = %v, want none", q, got)
		}
		if n := countRows(t, f, q); n != 0 {
			t.Errorf("Count(%+v) = %d, want 0", q, n)
		}
	}
	if f.Purger == nil {
		return
	}
	// Purge the tenants with spaces first: each deletes its own two events.
	for _, tenant := range []string{"acme ", " ", "acme  ", " acme", "  ", "acme"} {
		n, err := f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDone, Before: t0.Add(time.Hour), Limit: 100, TenantID: tenant})
		if err != nil || n != 2 {
			t.Errorf("Purge(DONE of tenant %q) = %d, %v; want its 2 events", tenant, n, err)
		}
	}
	if got := recIDs(listAll(t, f, outbox.Query{})); !slices.Equal(got, byTenant[""]) {
		t.Errorf("after purging every tenant, the table holds %v, want the events without a tenant %v", got, byTenant[""])
	}
}

// storePurgeByTenant: PurgeRequest.TenantID deletes only that tenant's
// old terminal events; without it a purge deletes every tenant's.
func storePurgeByTenant(t *testing.T, f Fixture) {
	if f.Purger == nil {
		t.Skip("the fixture has no Purger")
	}
	ctx := context.Background()
	seeded := seedTenants(t, f) // DONE and DEAD at t0
	cutoff := t0.Add(time.Hour)
	n, err := f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDone, Before: cutoff, Limit: 2, TenantID: "acme"})
	if err != nil || n != 2 {
		t.Fatalf("Purge(DONE of acme, limit 2) = %d, %v; want 2", n, err)
	}
	n, err = f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDone, Before: cutoff, Limit: 100, TenantID: "acme"})
	if want := len(seeded["acme"][outbox.StatusDone]) - 2; err != nil || n != int64(want) {
		t.Fatalf("Purge(DONE of acme) = %d, %v; want %d", n, err, want)
	}
	if n, err := f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDead, Before: t0, Limit: 100, TenantID: "acme"}); err != nil || n != 0 {
		t.Fatalf("Purge(DEAD of acme before they ended) = %d, %v; want 0", n, err)
	}
	if n, err := f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDone, Before: cutoff, Limit: 100, TenantID: "ACME"}); err != nil || n != 0 {
		t.Fatalf("Purge(DONE of ACME) = %d, %v; want 0", n, err)
	}
	for _, tenant := range []string{"acme", "acme-eu"} {
		byStatus := seeded[tenant]
		wantDone := len(byStatus[outbox.StatusDone])
		if tenant == "acme" {
			wantDone = 0
		}
		if got := countRows(t, f, outbox.Query{TenantID: tenant, Statuses: []outbox.Status{outbox.StatusDone}}); got != int64(wantDone) {
			t.Errorf("DONE events of %q after the purge of acme: %d, want %d", tenant, got, wantDone)
		}
		if got := countRows(t, f, outbox.Query{TenantID: tenant, Statuses: []outbox.Status{outbox.StatusDead}}); got != int64(len(byStatus[outbox.StatusDead])) {
			t.Errorf("DEAD events of %q after a purge of DONE events: %d, want %d", tenant, got, len(byStatus[outbox.StatusDead]))
		}
	}
	rest := len(seeded["acme-eu"][outbox.StatusDone]) + len(seeded[""][outbox.StatusDone])
	n, err = f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDone, Before: cutoff, Limit: 100})
	if err != nil || n != int64(rest) {
		t.Fatalf("Purge(DONE of every tenant) = %d, %v; want %d", n, err, rest)
	}
}

func storeStats(t *testing.T, f Fixture) {
	ctx := context.Background()
	st, err := f.Store.Stats(ctx, t0)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, n := range st.ByStatus {
		total += n
	}
	if total != 0 || !st.OldestPending.IsZero() {
		t.Fatalf("stats of an empty table: %+v", st)
	}
	seedStatuses(t, f) // pending rows created at t0+0s (NEW) and t0+2s (RETRY) first
	// NEW rows are due at their creation, t0+0s, 4s, … 20s; RETRY rows at t0.
	for _, tc := range []struct {
		now time.Time
		due int64
	}{{t0.Add(-time.Second), 0}, {t0, 7}, {t0.Add(10 * time.Second).In(zoneEast), 9}, {t0.Add(time.Hour), 12}} {
		st, err = f.Store.Stats(ctx, tc.now)
		if err != nil {
			t.Fatal(err)
		}
		for s := outbox.StatusNew; s <= outbox.StatusDead; s++ {
			// An estimate of DONE rows (DoneEstimated) is at least
			// within the rows the table ever held.
			if n := st.ByStatus[s]; n != 6 && (s != outbox.StatusDone || !st.DoneEstimated || n < 0 || n > 24) {
				t.Errorf("ByStatus[%v] = %d (estimated: %v), want 6", s, n, st.DoneEstimated)
			}
		}
		if st.Due != tc.due {
			t.Errorf("due at %v = %d, want %d", tc.now, st.Due, tc.due)
		}
		wantTime(t, "oldest pending", st.OldestPending, t0)
	}
}

func storePurge(t *testing.T, f Fixture) {
	if f.Purger == nil {
		t.Skip("the fixture has no Purger")
	}
	ctx := context.Background()
	cutoff := t0.Add(24 * time.Hour)
	old := t0
	oldDone, oldDead, recentDone, doneLate := event(t), event(t), event(t), event(t)
	oldNew, oldRetry, oldClaimed := event(t), event(t), event(t)
	insert(t, f, old, ownerA, oldDone, oldDead, doneLate, oldNew, oldRetry, oldClaimed)
	insert(t, f, cutoff.Add(-time.Minute), ownerA, recentDone)
	mustDone := func(id string, at time.Time) {
		if n, err := f.Store.MarkDone(ctx, ownerA, []string{id}, at); err != nil || n != 1 {
			t.Fatalf("MarkDone = %d, %v", n, err)
		}
	}
	mustDone(oldDone.ID(), old)
	mustDone(recentDone.ID(), cutoff) // done exactly at the cutoff: kept
	mustDone(doneLate.ID(), cutoff.Add(time.Hour))
	if ok, err := f.Store.MarkDead(ctx, outbox.Outcome{Owner: ownerA, ID: oldDead.ID(), At: old.Add(time.Second), Error: "x", CountAttempt: true}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, err := f.Store.MarkRetry(ctx, outbox.Outcome{Owner: ownerA, ID: oldRetry.ID(), At: old, Error: "x", CountAttempt: true}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if n, err := f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDone, Before: cutoff, Limit: 0}); err != nil || n != 0 {
		t.Fatalf("Purge with limit 0 = %d, %v; want 0", n, err)
	}
	if _, err := f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusNew, Before: cutoff, Limit: 10}); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("Purge of NEW events = %v, want ErrInvalidConfig", err)
	}
	n, err := f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDone, Before: cutoff.In(zoneWest), Limit: 1})
	if err != nil || n != 1 {
		t.Fatalf("Purge(DONE, limit 1) = %d, %v; want 1", n, err)
	}
	if n, err := f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDone, Before: cutoff, Limit: 10}); err != nil || n != 0 {
		t.Fatalf("second Purge of DONE = %d, %v; want 0 (the old DEAD row is not DONE)", n, err)
	}
	if got := get(t, f, oldDead.ID()); got.Status != outbox.StatusDead {
		t.Fatalf("the DEAD row: %+v, want it kept by a purge of DONE events", got)
	}
	n, err = f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDead, Before: cutoff, Limit: 10})
	if err != nil || n != 1 {
		t.Fatalf("Purge(DEAD) = %d, %v; want 1 (the old DEAD row)", n, err)
	}
	if n, err := f.Purger.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusDead, Before: cutoff, Limit: 10}); err != nil || n != 0 {
		t.Fatalf("second Purge of DEAD = %d, %v; want 0", n, err)
	}
	got := recIDs(listAll(t, f, outbox.Query{}))
	want := ids([]outbox.Envelope{recentDone, doneLate, oldNew, oldRetry, oldClaimed})
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("rows after purge %v, want %v", got, want)
	}
}

func storeGet(t *testing.T, f Fixture) {
	ctx := context.Background()
	e := event(t, outbox.WithAggregate(outbox.AggregateName("Order"), "o-1"), outbox.WithHeader("h", "v"))
	insert(t, f, t0, ownerA, e)
	r, err := f.Store.Get(ctx, e.ID())
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if r.ID != e.ID() || r.Status != outbox.StatusNew || r.LockedBy != ownerA || r.Envelope.AggregateID() != "o-1" || r.Envelope.PayloadString() != e.PayloadString() {
		t.Fatalf("Get = %+v, want the event as inserted, claimed by %s", r, ownerA)
	}
	if h, _ := r.Envelope.Header("h"); h != "v" {
		t.Errorf("header h = %q, want v", h)
	}
	if _, err := f.Store.MarkDone(ctx, ownerA, []string{e.ID()}, t0); err != nil {
		t.Fatal(err)
	}
	if r, err := f.Store.Get(ctx, e.ID()); err != nil || r.Status != outbox.StatusDone || r.LockedBy != "" {
		t.Fatalf("Get after MarkDone = %+v, %v; want DONE and unclaimed", r, err)
	}
	if _, err := f.Store.Get(ctx, "no-such-id"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("Get of an unknown id = %v, want ErrNotFound", err)
	}
	// The id filter of List and Count.
	others := events(t, 3)
	insert(t, f, t0, "", others...)
	want := []string{others[0].ID(), others[2].ID()}
	q := outbox.Query{IDs: append(want, "no-such-id")}
	if got := recIDs(listAll(t, f, q)); !slices.Equal(got, want) {
		t.Errorf("List by ids = %v, want %v", got, want)
	}
	if n := countRows(t, f, q); n != 2 {
		t.Errorf("Count by ids = %d, want 2", n)
	}
	q.Statuses = []outbox.Status{outbox.StatusDone}
	if n := countRows(t, f, q); n != 0 {
		t.Errorf("Count by ids and DONE = %d, want 0", n)
	}
}
