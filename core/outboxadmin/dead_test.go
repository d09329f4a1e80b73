package outboxadmin_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxadmin"
	"github.com/go-outbox/outbox/core/outboxadmin/outboxadmintest"
	"github.com/go-outbox/outbox/core/outboxmem"
)

// fixture is an in-memory outbox with a Client that writes and delivers
// nothing: the tests drive the events' states.
type fixture struct {
	store  *outboxmem.Store
	client *outbox.Client
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	store := outboxmem.New()
	client, err := outbox.New(outbox.Config{Store: store, TxContext: store, Mode: outbox.ModeWriterOnly})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	return fixture{store: store, client: client}
}

// seed writes one event per status, in this order: NEW, RETRY, DONE, and
// dead DEAD events.
func (f fixture) seed(t *testing.T, dead int) (pending, retry, done string, deadIDs []string) {
	t.Helper()
	now := time.Now().UTC()
	ev := func(status outbox.Status, i int) outboxadmintest.Event {
		return outboxadmintest.Event{
			Envelope: outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithJSON(fmt.Appendf(nil, `{"n":%d}`, i))),
			Status:   status, At: now.Add(-time.Minute), Error: "boom",
		}
	}
	events := []outboxadmintest.Event{ev(outbox.StatusNew, 0), ev(outbox.StatusRetry, 1), ev(outbox.StatusDone, 2)}
	for i := range dead {
		events = append(events, ev(outbox.StatusDead, 3+i))
	}
	ids := outboxadmintest.Seed(t, f.client, f.store, f.store, events...)
	return ids[0], ids[1], ids[2], ids[3:]
}

func TestCheckDead(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	pending, retry, done, dead := f.seed(t, 3)
	const unknown = "01J00000000000000000000000"
	for _, tc := range []struct {
		name string
		ids  []string
		want *outboxadmin.NotDeadError // nil: every id is DEAD
		msg  string
	}{
		{"every id DEAD", dead, nil, ""},
		{"no ids", nil, nil, ""},
		{"one DONE", []string{dead[0], done, dead[1]}, &outboxadmin.NotDeadError{ID: done, Found: true, Status: outbox.StatusDone, Where: "source orders"},
			"event " + done + " is DONE, not DEAD; nothing changed"},
		{"unknown first, then others", []string{dead[0], unknown, pending, dead[2], retry}, &outboxadmin.NotDeadError{ID: unknown, Others: 2, Where: "source orders"},
			"no event with id " + unknown + " in source orders (and 2 more of the ids are not DEAD events); nothing changed"},
		{"pending first", []string{pending, unknown}, &outboxadmin.NotDeadError{ID: pending, Found: true, Status: outbox.StatusNew, Others: 1, Where: "source orders"},
			"event " + pending + " is NEW, not DEAD (and 1 more of the ids are not DEAD events); nothing changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := outboxadmintest.Snapshot(t, f.store)
			err := outboxadmin.CheckDead(ctx, f.client, "source orders", tc.ids)
			outboxadmintest.WantUnchanged(t, f.store, before)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("CheckDead: %v, want nil", err)
				}
				return
			}
			var nd *outboxadmin.NotDeadError
			if !errors.As(err, &nd) || *nd != *tc.want {
				t.Fatalf("CheckDead: %#v, want %#v", err, tc.want)
			}
			if err.Error() != tc.msg || !errors.Is(err, outbox.ErrNotFound) {
				t.Errorf("error %q (is ErrNotFound: %v), want %q", err, errors.Is(err, outbox.ErrNotFound), tc.msg)
			}
		})
	}
}

// TestCheckDeadManyIDs: a list longer than one query names checks every
// id, in every batch.
func TestCheckDeadManyIDs(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	_, _, done, dead := f.seed(t, 1201)
	if err := outboxadmin.CheckDead(ctx, f.client, "outbox", dead); err != nil {
		t.Fatalf("1201 DEAD events: %v", err)
	}
	ids := slices.Insert(slices.Clone(dead), 1100, done, "nope")
	var nd *outboxadmin.NotDeadError
	if err := outboxadmin.CheckDead(ctx, f.client, "outbox", ids); !errors.As(err, &nd) || nd.ID != done || nd.Others != 1 {
		t.Fatalf("a DONE and an unknown id in the third batch: %v", err)
	}
}

// TestCheckDeadOf: limited to a tenant, a DEAD event of another tenant
// (or of none) is refused as well.
func TestCheckDeadOf(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	ev := func(tenant string, status outbox.Status) outboxadmintest.Event {
		return outboxadmintest.Event{Envelope: outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithJSON([]byte(`{}`)), outbox.WithTenant(tenant)),
			Status: status, At: time.Now().UTC(), Error: "boom"}
	}
	seeded := outboxadmintest.Seed(t, f.client, f.store, f.store, ev("acme", outbox.StatusDead), ev("acme", outbox.StatusDead),
		ev("globex", outbox.StatusDead), ev("", outbox.StatusDead), ev("acme", outbox.StatusDone))
	ids, none, done := seeded[:3], seeded[3:4], seeded[4]
	if err := outboxadmin.CheckDeadOf(ctx, f.client, "outbox", "acme", ids[:2]); err != nil {
		t.Fatalf("the DEAD events of acme: %v", err)
	}
	if err := outboxadmin.CheckDeadOf(ctx, f.client, "outbox", "", append(ids, none...)); err != nil {
		t.Fatalf("DEAD events of any tenant: %v", err)
	}
	for _, tc := range []struct {
		ids  []string
		want outboxadmin.NotDeadError
		msg  string
	}{
		{[]string{ids[0], ids[2]}, outboxadmin.NotDeadError{ID: ids[2], Found: true, Status: outbox.StatusDead, Where: "outbox", Tenant: "acme"},
			"event " + ids[2] + " is not an event of tenant acme; nothing changed"},
		{[]string{none[0], done, ids[1]}, outboxadmin.NotDeadError{ID: none[0], Found: true, Status: outbox.StatusDead, Others: 1, Where: "outbox", Tenant: "acme"},
			"event " + none[0] + " is not an event of tenant acme (and 1 more of the ids are not DEAD events); nothing changed"},
	} {
		err := outboxadmin.CheckDeadOf(ctx, f.client, "outbox", "acme", tc.ids)
		var nd *outboxadmin.NotDeadError
		if !errors.As(err, &nd) || *nd != tc.want || err.Error() != tc.msg {
			t.Errorf("CheckDeadOf(acme, %v) = %v, want %q", tc.ids, err, tc.msg)
		}
	}
}

func TestWhyNotDead(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	_, retry, _, _ := f.seed(t, 0)
	err := outboxadmin.WhyNotDead(ctx, f.client, "outbox", retry)
	if want := "event " + retry + " is RETRY, not DEAD; nothing changed"; err == nil || err.Error() != want {
		t.Errorf("WhyNotDead of a RETRY event: %v, want %q", err, want)
	}
	err = outboxadmin.WhyNotDead(ctx, f.client, "", "nope")
	if want := "no event with id nope; nothing changed"; err == nil || err.Error() != want || !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("WhyNotDead of an unknown id: %v, want %q", err, want)
	}
	// The store's own errors come back as they are.
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := outboxadmin.WhyNotDead(canceled, f.client, "outbox", retry); !errors.Is(err, context.Canceled) {
		t.Errorf("WhyNotDead with a cancelled context: %v, want context.Canceled", err)
	}
}

// TestReplayIDs replays exactly the DEAD events named, across batches, and
// passes over ids that are not DEAD.
func TestReplayIDs(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	pending, retry, done, dead := f.seed(t, 1203)
	keep := []string{dead[0], dead[700], dead[1202]} // not named: they stay DEAD
	var named []string
	for _, id := range dead {
		if !slices.Contains(keep, id) {
			named = append(named, id)
		}
	}
	ids := append([]string{pending, retry, "nope"}, named...)
	ids = append(ids, done, named[3]) // a duplicate counts once
	n, err := outboxadmin.ReplayIDs(ctx, f.client.Dead(), ids)
	if err != nil || n != int64(len(named)) {
		t.Fatalf("ReplayIDs: %d, %v; want %d", n, err, len(named))
	}
	if got := outboxadmintest.Statuses(t, f.store, pending, retry, done, "nope"); !slices.Equal(got, []string{"NEW", "RETRY", "DONE", "gone"}) {
		t.Errorf("statuses of the events that were not DEAD: %q", got)
	}
	if got := outboxadmintest.Statuses(t, f.store, keep...); !slices.Equal(got, []string{"DEAD", "DEAD", "DEAD"}) {
		t.Errorf("statuses of the DEAD events not named: %q", got)
	}
	for i, st := range outboxadmintest.Statuses(t, f.store, named...) {
		if st != "NEW" {
			t.Fatalf("replayed event %s is %s, want NEW", named[i], st)
		}
	}
	rec, err := f.store.Get(ctx, named[0])
	if err != nil || rec.Attempts != 0 || !rec.DoneAt.IsZero() {
		t.Errorf("a replayed event: %+v, %v; want zero attempts and no done time", rec, err)
	}
	if n, err := outboxadmin.ReplayIDs(ctx, f.client.Dead(), nil); n != 0 || err != nil {
		t.Errorf("ReplayIDs of no ids: %d, %v", n, err)
	}
}
