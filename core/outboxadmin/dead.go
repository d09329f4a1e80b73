package outboxadmin

import (
	"context"
	"errors"
	"fmt"
	"slices"

	outbox "github.com/go-outbox/outbox/core"
)

// idBatch is how many ids one query of CheckDead or one replay of ReplayIDs
// names: a few statements for a long list, none too long for a database.
const idBatch = 500

// NotDeadError says that an event a dead-letter change names is not a DEAD
// event, so the change was refused. It wraps outbox.ErrNotFound.
type NotDeadError struct {
	// ID is the event, the first of the ids (in their order) that is not
	// DEAD.
	ID string
	// Found tells whether an event with that id exists; Status is then its
	// status.
	Found  bool
	Status outbox.Status
	// Others counts the other ids that are not DEAD events either.
	Others int
	// Where names the outbox in the message of an id that does not exist,
	// such as "source orders" ("no event with id … in source orders").
	Where string
	// Tenant is the tenant the change was limited to (CheckDeadOf): an
	// event found DEAD is of another tenant.
	Tenant string
}

// Error says which event is not DEAD and why, and that nothing changed:
// "event 01J… is DONE, not DEAD; nothing changed".
func (e *NotDeadError) Error() string {
	msg := "no event with id " + e.ID
	switch {
	case e.Found && e.Status == outbox.StatusDead && e.Tenant != "":
		msg = fmt.Sprintf("event %s is not an event of tenant %s", e.ID, e.Tenant)
	case e.Found:
		msg = fmt.Sprintf("event %s is %s, not DEAD", e.ID, e.Status)
	case e.Where != "":
		msg += " in " + e.Where
	}
	if e.Others > 0 {
		msg += fmt.Sprintf(" (and %d more of the ids are not DEAD events)", e.Others)
	}
	return msg + "; nothing changed"
}

// Unwrap returns outbox.ErrNotFound: the ids do not all name DEAD events.
func (e *NotDeadError) Unwrap() error { return outbox.ErrNotFound }

// CheckDead returns nil when every one of ids is a DEAD event of client,
// and otherwise a *NotDeadError about the first that is not, with where
// naming the outbox in its message. A tool calls it before it replays or
// deletes exactly these events, so that a mistyped or stale id refuses the
// whole change. It changes nothing; any other error is the store's.
func CheckDead(ctx context.Context, client *outbox.Client, where string, ids []string) error {
	return CheckDeadOf(ctx, client, where, "", ids)
}

// CheckDeadOf is CheckDead for a change limited to the events of tenant
// ("" for every tenant): a DEAD event of another tenant is refused too.
func CheckDeadOf(ctx context.Context, client *outbox.Client, where, tenant string, ids []string) error {
	found := make(map[string]bool, len(ids))
	dead := client.Dead()
	for batch := range slices.Chunk(ids, idBatch) {
		recs, err := dead.List(ctx, outbox.Query{IDs: batch, Limit: len(batch), TenantID: tenant})
		if err != nil {
			return err
		}
		for _, r := range recs {
			found[r.ID] = true
		}
	}
	var missing []string
	for _, id := range ids {
		if !found[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return whyNotDead(ctx, client, where, tenant, missing[0], len(missing)-1)
}

// WhyNotDead returns the *NotDeadError of id, an event that a change of
// DEAD events did not find among them (outbox.DeadEvents.Replay failed with
// outbox.ErrNotFound, Delete removed nothing): it does not exist, or it is
// in another status. where names the outbox as for CheckDead. It returns an
// error of the store as it is.
func WhyNotDead(ctx context.Context, client *outbox.Client, where, id string) error {
	return whyNotDead(ctx, client, where, "", id, 0)
}

func whyNotDead(ctx context.Context, client *outbox.Client, where, tenant, id string, others int) error {
	rec, err := client.Get(ctx, id)
	switch {
	case err == nil:
		return &NotDeadError{ID: id, Found: true, Status: rec.Status, Others: others, Where: where, Tenant: tenant}
	case errors.Is(err, outbox.ErrNotFound):
		return &NotDeadError{ID: id, Others: others, Where: where}
	}
	return err
}

// ReplayIDs makes the DEAD events among ids pending again — these and no
// other: an event that goes DEAD meanwhile and is not named stays DEAD — and
// returns how many it replayed. An id that is not a DEAD event is passed
// over (CheckDead refuses such a list first). It goes through
// outbox.DeadEvents, a few hundred ids at a time, so it returns what it
// replayed before an error too.
func ReplayIDs(ctx context.Context, dead *outbox.DeadEvents, ids []string) (int64, error) {
	var total int64
	for batch := range slices.Chunk(ids, idBatch) {
		n, err := dead.ReplayAll(ctx, outbox.Query{IDs: batch, Limit: len(batch)})
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
