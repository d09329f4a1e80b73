package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestDecide: decide is where every outcome is made, DEAD included — the
// deliveries' and the events a claim may not start (admit).
func TestDecide(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := newClaims((Config{Store: newMemStore(), TxContext: fakeTxContext{}, MaxAttempts: 3, Clock: fixedClock(at),
		RetryPolicy: RetryPolicyFunc(func(n int) time.Duration { return time.Duration(n) * time.Minute })}).WithDefaults(), 0)
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		attempt int
		count   bool
		err     error
		want    outcome
	}{
		{"success", 1, true, nil, outcome{verdict: settleDone}},
		{"failure", 1, true, boom, outcome{verdict: settleRetry, at: at.Add(time.Minute), delay: time.Minute, attempt: 1, count: true}},
		{"failure, counted already", 2, false, boom, outcome{verdict: settleRetry, at: at.Add(2 * time.Minute), delay: 2 * time.Minute, attempt: 2}},
		{"last attempt", 3, true, boom, outcome{verdict: settleDead, at: at, attempt: 3, count: true}},
		{"retry after, last attempt", 3, true, RetryAfter(time.Second, "busy"), outcome{verdict: settleRetry, at: at.Add(time.Second), delay: time.Second, attempt: 3}},
		{"no listener", 1, true, unroutable(evt("E")), outcome{verdict: settleRetry, at: at.Add(DefaultUnroutedRetry), delay: DefaultUnroutedRetry, attempt: 1}},
		{"undecodable", 0, false, &undecodableError{err: boom}, outcome{verdict: settleDead, at: at}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := c.decide(tc.attempt, tc.count, tc.err, nil)
			got.err = nil
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("decide = %+v, want %+v", got, tc.want)
			}
		})
	}

	// A claimed record is admitted unless it cannot be decoded or its
	// attempts are spent (taken over after deliveries without an outcome).
	e := evt("E")
	for _, tc := range []struct {
		name  string
		r     Record
		admit bool
		text  string
	}{
		{"fresh", Record{ID: e.ID(), Envelope: e}, true, ""},
		{"attempts left", Record{ID: e.ID(), Envelope: e, Attempts: 2, LastError: ErrClaimExpired.Error()}, true, ""},
		{"attempts spent", Record{ID: e.ID(), Envelope: e, Attempts: 3, LastError: ErrClaimExpired.Error()}, false, ErrClaimExpired.Error() + " (3 attempts used"},
		{"undecodable", Record{ID: "x", Err: boom}, false, "decode: boom"},
	} {
		t.Run("admit "+tc.name, func(t *testing.T) {
			o, ok := c.admit(tc.r)
			if ok != tc.admit {
				t.Fatalf("admit = %v, want %v", ok, tc.admit)
			}
			if ok {
				return
			}
			if o.verdict != settleDead || o.count || o.err == nil || !strings.HasPrefix(o.err.Error(), tc.text) {
				t.Errorf("outcome = %+v (%v), want DEAD, not counted, error starting %q", o, o.err, tc.text)
			}
		})
	}
}

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

	// A started event whose row is DONE already (its ack was written)
	// costs the heartbeat a second renewal of the queued ones, no read.
	acked := evt("Acked")
	hdAcked := held(acked, "A", later)
	c.delivering(hdAcked, later.Add(time.Hour))
	store.put(Record{ID: acked.ID(), Envelope: acked, Status: StatusDone})
	lists := store.callCount("List")
	c.renew(context.Background(), time.Second)
	if c.expired(hdKept, kept) || store.callCount("List") != lists {
		t.Errorf("an acked row made the heartbeat read the rows (List calls %d → %d) or miss a queued one", lists, store.callCount("List"))
	}
	c.held.release(hdKept)

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
