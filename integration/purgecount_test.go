package integration

import (
	"context"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
)

// TestCountPurgeable: the count an operator is shown before a purge is
// what the purge then deletes, per status, tenant and cutoff, on every
// database: both read the one selection of the store.
func TestCountPurgeable(t *testing.T) {
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		ctx := context.Background()
		db := b.Open(t)
		store := b.NewStore(t, db)
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		var ids []string
		for i, tenant := range []string{"acme", "acme", "globex", "", "acme"} {
			e := outbox.MustEnvelope(outbox.EventName("E"), outbox.WithJSON([]byte(`{}`)), outbox.WithTenant(tenant))
			outboxsqltest.InsertAt(t, db, store, t0, "owner", e)
			at := t0.Add(time.Duration(i) * time.Hour)
			if i < 4 {
				if _, err := store.MarkDone(ctx, "owner", []string{e.ID()}, at); err != nil {
					t.Fatal(err)
				}
			} else if _, err := store.MarkDead(ctx, outbox.Outcome{Owner: "owner", ID: e.ID(), At: at, Error: "x"}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, e.ID())
		}
		for _, tc := range []struct {
			req  outbox.PurgeRequest
			want int64
		}{
			{outbox.PurgeRequest{Status: outbox.StatusDone, Before: t0.Add(90 * time.Minute), TenantID: "acme"}, 2}, // done at 0h and 1h
			{outbox.PurgeRequest{Status: outbox.StatusDead, Before: t0.Add(5 * time.Hour), TenantID: "globex"}, 0},
			{outbox.PurgeRequest{Status: outbox.StatusDone, Before: t0.Add(3 * time.Hour)}, 1}, // globex's, done at 2h
			{outbox.PurgeRequest{Status: outbox.StatusDone, Before: t0.Add(4 * time.Hour)}, 1}, // the one without a tenant
			{outbox.PurgeRequest{Status: outbox.StatusDead, Before: t0.Add(5 * time.Hour), TenantID: "acme"}, 1},
		} {
			req := tc.req
			n, err := store.CountPurgeable(ctx, req)
			if err != nil || n != tc.want {
				t.Fatalf("%+v: CountPurgeable = %d, %v; want %d", req, n, err, tc.want)
			}
			req.Limit = 100
			deleted, err := store.Purge(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if n != deleted {
				t.Errorf("%+v: CountPurgeable = %d, Purge deleted %d", req, n, deleted)
			}
		}
		if n, err := store.Count(ctx, outbox.Query{}); err != nil || n != 0 {
			t.Errorf("after the purges %d events are left (%v); want none of %v", n, err, ids)
		}
		if _, err := store.CountPurgeable(ctx, outbox.PurgeRequest{Status: outbox.StatusNew}); err == nil {
			t.Error("CountPurgeable of NEW events: want an error")
		}
	})
}
