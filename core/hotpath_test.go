package outbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestHotPathClosedBetweenInsertAndCommit: rows the writer inserted claimed
// by a dispatcher that closed before the transaction committed are
// released at commit, so that any poller takes them at once rather than
// after the lease.
func TestHotPathClosedBetweenInsertAndCommit(t *testing.T) {
	for _, releaseFails := range []bool{false, true} {
		h := newHarness(t, nil)
		_ = h.reg.Handle(EventName("E"), func(context.Context, Envelope) error { return nil })
		h.start(t)
		if releaseFails {
			h.st.setFail("Release", errors.New("db down"))
		}
		ctx, tx := withTx(context.Background())
		ids, err := h.w.Write(ctx, evt("E"), evt("E"))
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if r := h.st.get(id); r.LockedBy != h.d.Owner() {
				t.Fatalf("row %s locked by %q, want the running dispatcher", id, r.LockedBy)
			}
		}
		if err := h.d.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := h.st.callCount("Release"); n != 0 {
			t.Fatalf("Close released %d times with nothing queued", n)
		}
		tx.Commit()
		if n := h.st.callCount("Release"); n != 1 {
			t.Fatalf("releaseFails=%v: Release called %d times at commit, want once for the batch", releaseFails, n)
		}
		if n := h.metrics.get("HotDropped"); n != 2 {
			t.Errorf("HotDropped = %d, want 2", n)
		}
		for _, id := range ids {
			r := h.st.get(id)
			if releaseFails {
				if r.LockedBy != h.d.Owner() {
					t.Errorf("row %s = %+v, want still claimed (the release failed)", id, r)
				}
				continue
			}
			if r.Status != StatusNew || r.LockedBy != "" {
				t.Errorf("row %s = %+v, want NEW and unclaimed", id, r)
			}
		}
		if releaseFails && !strings.Contains(h.log.String(), "could not release committed events for the poller") {
			t.Errorf("failed release not logged:\n%s", h.log.String())
		}
	}
}

// TestHotPathSkipsRolledBackSavepoint: events written in a savepoint that
// is rolled back never reach the hot path, while the outer transaction's
// events do.
func TestHotPathSkipsRolledBackSavepoint(t *testing.T) {
	h := newHarness(t, nil)
	delivered := make(chan string, 4)
	_ = h.reg.Handle(EventName("E"), func(_ context.Context, e Envelope) error { delivered <- e.ID(); return nil })
	h.start(t)
	ctx, tx := withTx(context.Background())
	tx.Savepoint("sp")
	gone, err := h.w.Write(ctx, evt("E"))
	if err != nil {
		t.Fatal(err)
	}
	tx.RollbackTo("sp")
	tx.Release("sp")
	kept, err := h.w.Write(ctx, evt("E"))
	if err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	select {
	case id := <-delivered:
		if id != kept[0] {
			t.Fatalf("delivered %s, want %s", id, kept[0])
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the committed event was not delivered")
	}
	h.waitStatus(t, kept[0], StatusDone)
	if r := h.st.get(gone[0]); r.ID != "" {
		t.Errorf("rolled back row still stored: %+v", r)
	}
	if n := h.metrics.get("HotEnqueued"); n != 1 {
		t.Errorf("HotEnqueued = %d, want only the committed event", n)
	}
}
