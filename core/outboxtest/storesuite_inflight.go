package outboxtest

import (
	"context"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// storeTakeOverKeepsInFlight: a take-over tells the rows whose delivery
// had started (CountAttempt recorded ErrInFlight) from those it had not:
// the first keep ErrInFlight, the others get ErrClaimExpired. Nothing else
// marks a row: a claimed row that was never counted is not in flight.
func storeTakeOverKeepsInFlight(t *testing.T, f Fixture) {
	ctx := context.Background()
	started, queued := event(t), event(t)
	insert(t, f, t0, "", started, queued)
	if got := claim(t, f, outbox.ClaimRequest{Owner: ownerA, Now: t0, Lease: lease, Limit: 2}); len(got) != 2 {
		t.Fatalf("A claimed %d rows, want 2", len(got))
	}
	// B takes both over; it starts one of them (counting its attempt) and
	// stops before it stores any outcome.
	atB := t0.Add(lease)
	if got := claim(t, f, outbox.ClaimRequest{Owner: ownerB, Now: atB, Lease: lease, Limit: 2}); len(got) != 2 {
		t.Fatalf("B took over %d rows, want 2", len(got))
	}
	if ok, err := f.Store.CountAttempt(ctx, ownerB, started.ID()); err != nil || !ok {
		t.Fatalf("CountAttempt by B = %v, %v; want true", ok, err)
	}
	// C takes both over from B.
	got := claim(t, f, outbox.ClaimRequest{Owner: "owner-c", Now: atB.Add(lease + time.Second), Lease: lease, Limit: 2})
	if len(got) != 2 {
		t.Fatalf("C took over %d rows, want 2", len(got))
	}
	want := map[string]string{started.ID(): outbox.ErrInFlight.Error(), queued.ID(): outbox.ErrClaimExpired.Error()}
	for _, r := range got {
		if r.LastError != want[r.ID] || r.LockedBy != "owner-c" {
			t.Errorf("C's take-over of %s: last error %q, owner %q; want %q, owner-c", r.ID, r.LastError, r.LockedBy, want[r.ID])
		}
		if stored := get(t, f, r.ID); stored.LastError != want[r.ID] {
			t.Errorf("stored %s: last error %q; want %q", r.ID, stored.LastError, want[r.ID])
		}
	}
	// A stored failure replaces the mark: the row is no longer in flight.
	if ok, err := f.Store.MarkRetry(ctx, outbox.Outcome{Owner: "owner-c", ID: started.ID(), At: atB, Error: "failed", CountAttempt: true}); err != nil || !ok {
		t.Fatalf("MarkRetry by C = %v, %v", ok, err)
	}
	if r := get(t, f, started.ID()); r.LastError != "failed" || r.Attempts != 2 {
		t.Errorf("after C's failure: %q, %d attempts; want \"failed\", 2", r.LastError, r.Attempts)
	}
}
