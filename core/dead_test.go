package outbox

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestDeadEvents(t *testing.T) {
	st, clk := newMemStore(), newStepClock()
	for i := range 5 {
		e := MustEnvelope(EventName("E"), WithID(fmt.Sprint("dead-", i)), WithJSON([]byte(`{}`)))
		st.put(Record{ID: e.ID(), Envelope: e, Status: StatusDead, Attempts: 10})
	}
	st.put(Record{ID: "done-1", Envelope: evt("E"), Status: StatusDone})
	d := newDeadEvents(st, clk)
	ctx := context.Background()

	recs, err := d.List(ctx, Query{Statuses: []Status{StatusDone}, Limit: 2})
	if err != nil || len(recs) != 2 || recs[0].ID != "dead-0" || recs[1].ID != "dead-1" {
		t.Fatalf("List = %v, %v", recs, err)
	}
	if n, err := d.Count(ctx, Query{}); err != nil || n != 5 {
		t.Errorf("Count = %d, %v; want 5", n, err)
	}

	if err := d.Replay(ctx, "dead-0"); err != nil {
		t.Fatal(err)
	}
	if r := st.get("dead-0"); r.Status != StatusNew || r.Attempts != 0 || !r.AvailableAt.Equal(clk.Now()) {
		t.Errorf("replayed row = %+v", r)
	}
	for _, id := range []string{"dead-0", "done-1", "missing"} {
		if err := d.Replay(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Replay(%s): err = %v, want ErrNotFound", id, err)
		}
	}

	n, err := d.ReplayAll(ctx, Query{Limit: 2})
	if err != nil || n != 4 {
		t.Errorf("ReplayAll = %d, %v; want 4", n, err)
	}
	if c, _ := d.Count(ctx, Query{}); c != 0 {
		t.Errorf("%d DEAD events left", c)
	}
	if r := st.get("done-1"); r.Status != StatusDone {
		t.Errorf("a DONE event was replayed: %+v", r)
	}

	st.setFail("List", errors.New("db down"))
	if _, err := d.ReplayAll(ctx, Query{}); err == nil {
		t.Error("ReplayAll hid a store error")
	}
	st.setFail("Replay", errors.New("db down"))
	if err := d.Replay(ctx, "x"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Replay store error: err = %v", err)
	}
}

// TestReplayAllOfATenant: ReplayAll with Query.TenantID replays that
// tenant's DEAD events only, page after page.
func TestReplayAllOfATenant(t *testing.T) {
	st, clk := newMemStore(), newStepClock()
	for i := range 7 {
		e := MustEnvelope(EventName("E"), WithID(fmt.Sprint("dead-", i)), WithJSON([]byte(`{}`)), WithTenant([]string{"acme", "globex"}[i%2]))
		st.put(Record{ID: e.ID(), Envelope: e, Status: StatusDead, Attempts: 10})
	}
	d := newDeadEvents(st, clk)
	ctx := context.Background()
	if n, err := d.Count(ctx, Query{TenantID: "acme"}); err != nil || n != 4 {
		t.Fatalf("Count(acme) = %d, %v; want 4", n, err)
	}
	if n, err := d.ReplayAll(ctx, Query{TenantID: "acme", Limit: 3}); err != nil || n != 4 {
		t.Fatalf("ReplayAll(acme) = %d, %v; want 4", n, err)
	}
	for i := range 7 {
		want := StatusDead
		if i%2 == 0 {
			want = StatusNew
		}
		if r := st.get(fmt.Sprint("dead-", i)); r.Status != want {
			t.Errorf("%s of %s: %v, want %v", r.ID, r.Envelope.TenantID(), r.Status, want)
		}
	}
}
