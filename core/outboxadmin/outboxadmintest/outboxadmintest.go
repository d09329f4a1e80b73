package outboxadmintest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// TxRunner runs fn in a transaction whose context the outbox's TxContext
// knows; outboxsql.TxManager and outboxmem.Store are ones.
type TxRunner interface {
	InTx(ctx context.Context, fn func(ctx context.Context) error) error
}

// Write writes events through client in one transaction of tx, fails t on
// an error, and returns their ids.
func Write(t testing.TB, client *outbox.Client, tx TxRunner, events ...outbox.Envelope) []string {
	t.Helper()
	var ids []string
	err := tx.InTx(context.Background(), func(ctx context.Context) error {
		var err error
		ids, err = client.Write(ctx, events...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// Event is one event for Seed and the state to leave it in.
type Event struct {
	Envelope outbox.Envelope
	// Status is the state: NEW (the zero value), RETRY, DONE or DEAD.
	Status outbox.Status
	// At is when a DONE or DEAD event completed, or when a RETRY event is
	// due again.
	At time.Time
	// Error is the last error of a RETRY or DEAD event.
	Error string
}

// seedOwner is the claim owner Seed drives its events as.
const seedOwner = "outboxadmintest"

// Seed writes the envelopes of events through client in one transaction of
// tx, claims them from store (the Client's; they must be the only due events
// there) and drives each to its Status with the Store, as a dispatcher
// would: a NEW event is released, a DONE one marked done at At, a RETRY or
// DEAD one marked with Error at At, its attempt counted. It fails t on an
// error and returns the ids, in the order of events.
func Seed(t testing.TB, client *outbox.Client, store outbox.Store, tx TxRunner, events ...Event) []string {
	t.Helper()
	ctx := context.Background()
	envs := make([]outbox.Envelope, len(events))
	for i, e := range events {
		envs[i] = e.Envelope
	}
	ids := Write(t, client, tx, envs...)
	claimed, err := store.Claim(ctx, outbox.ClaimRequest{Owner: seedOwner, Now: time.Now().UTC().Add(time.Second), Lease: time.Hour, Limit: len(ids) + 1})
	if err != nil {
		t.Fatalf("outboxadmintest: claim: %v", err)
	}
	if got := recordIDs(claimed); !sameIDs(got, ids) {
		t.Fatalf("outboxadmintest: claimed %q, want exactly the seeded %q: the store had other due events", got, ids)
	}
	var release []string
	for i, e := range events {
		if e.Status == outbox.StatusNew {
			release = append(release, ids[i])
		}
	}
	if len(release) > 0 {
		if n, err := store.Release(ctx, seedOwner, release); err != nil || n != int64(len(release)) {
			t.Fatalf("outboxadmintest: release %d events: %d, %v", len(release), n, err)
		}
	}
	for i, e := range events {
		var ok bool
		var err error
		o := outbox.Outcome{Owner: seedOwner, ID: ids[i], At: e.At, Error: e.Error, CountAttempt: true}
		switch e.Status {
		case outbox.StatusNew:
			continue
		case outbox.StatusDone:
			var n int64
			n, err = store.MarkDone(ctx, seedOwner, []string{ids[i]}, e.At)
			ok = n == 1
		case outbox.StatusRetry:
			ok, err = store.MarkRetry(ctx, o)
		case outbox.StatusDead:
			ok, err = store.MarkDead(ctx, o)
		default:
			t.Fatalf("outboxadmintest: event %d: cannot drive an event to status %s", i, e.Status)
		}
		if err != nil || !ok {
			t.Fatalf("outboxadmintest: mark event %s %s: %v, %v", ids[i], e.Status, ok, err)
		}
	}
	return ids
}

func recordIDs(recs []outbox.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

func sameIDs(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// Snapshot describes every event of store (up to 10,000) with its delivery
// state, one line each by id, for WantUnchanged.
func Snapshot(t testing.TB, store outbox.Store) []string {
	t.Helper()
	recs, err := store.List(context.Background(), outbox.Query{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprintf("%s %s attempts=%d available=%d done=%d locked=%q", r.ID, r.Status, r.Attempts,
			r.AvailableAt.UnixMicro(), r.DoneAt.UnixMicro(), r.LockedBy)
	}
	return out
}

// WantUnchanged fails t unless store's events are as Snapshot found them
// before: a refused or failed change left everything alone.
func WantUnchanged(t testing.TB, store outbox.Store, before []string) {
	t.Helper()
	if after := Snapshot(t, store); !slices.Equal(before, after) {
		t.Fatalf("the table changed:\nbefore %q\nafter  %q", before, after)
	}
}

// Statuses returns the status of each id in store, "gone" for an event that
// does not exist (deleted or purged).
func Statuses(t testing.TB, store outbox.Store, ids ...string) []string {
	t.Helper()
	out := make([]string, len(ids))
	for i, id := range ids {
		r, err := store.Get(context.Background(), id)
		switch {
		case err == nil:
			out[i] = r.Status.String()
		case errors.Is(err, outbox.ErrNotFound):
			out[i] = "gone"
		default:
			t.Fatal(err)
		}
	}
	return out
}
