package outbox

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// TestRenewTakenOver: a heartbeat counts as renewed only the queued
// events whose claims are still this owner's. A queued event whose claim
// lapsed (the heartbeats failed for a lease) and was taken over elsewhere
// is let go at its start even when a later heartbeat succeeds for the
// other events: it is not delivered beside its new owner. The protocol
// model (core/internal/protomodel, mutant renewMarksAll) found it.
func TestRenewTakenOver(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var now atomic.Int64
	at := func(t time.Time) { now.Store(t.UnixNano()) }
	at(start)
	clock := ClockFunc(func() time.Time { return time.Unix(0, now.Load()).UTC() })
	store := newMemStore()
	c := newClaims((Config{Store: store, TxContext: fakeTxContext{}, Owner: "A", Clock: clock, Logger: slog.New(slog.DiscardHandler)}).WithDefaults(), 0)
	held := func(e Envelope, owner string, when time.Time) *hold {
		store.put(Record{ID: e.ID(), Envelope: e, Status: StatusNew, LockedBy: owner, LockedAt: when})
		return c.hold(e, when, nil)
	}
	takeOver := func(e Envelope, when time.Time) {
		store.put(Record{ID: e.ID(), Envelope: e, Status: StatusNew, LockedBy: "B", LockedAt: when, LastError: ErrClaimExpired.Error()})
	}

	lost, kept := evt("Lost"), evt("Kept")
	hdLost, hdKept := held(lost, "A", start), held(kept, "A", start)
	// A lease passes without a heartbeat; B takes the first event over.
	later := start.Add(c.lease + time.Second)
	at(later)
	takeOver(lost, later)
	c.renew(context.Background(), time.Second)
	if got := store.get(kept.ID()); !got.LockedAt.Equal(later) {
		t.Fatalf("the claim still held was not renewed: locked at %v", got.LockedAt)
	}
	if c.expired(hdKept, kept) {
		t.Error("the event whose claim was renewed is let go as expired")
	}
	if !c.expired(hdLost, lost) {
		t.Error("the event taken over by B counts as renewed: it would be delivered beside B")
	}

	// If the rows cannot be read, no queued event counts as renewed.
	lost, kept = evt("Lost"), evt("Kept")
	hdLost, hdKept = held(lost, "A", later), held(kept, "A", later)
	last := later.Add(c.lease + time.Second)
	at(last)
	takeOver(lost, last)
	store.setFail("List", errors.New("connection reset"))
	c.renew(context.Background(), time.Second)
	if !c.expired(hdKept, kept) || !c.expired(hdLost, lost) {
		t.Error("with the rows unread, a queued event counts as renewed")
	}
}
