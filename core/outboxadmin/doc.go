// Package outboxadmin is what the outbox's operator tools share — the
// command line (cmd/outboxctl) and the admin HTTP handler (outboxhttp) —
// so that both show an event the same way and change dead letters by the
// same rules:
//
//   - [Event] and [Stats] are the JSON views of an [outbox.Record] and of
//     [outbox.Stats], with stable field names (snake_case, UTC times, empty
//     fields left out). [EventOptions] adds an event's headers and payload,
//     or its payload's size.
//   - [CheckDead] refuses a list of ids unless every one is a DEAD event,
//     with a *[NotDeadError] (wrapping [outbox.ErrNotFound]) that names the
//     first that is not; [ReplayIDs] then replays exactly those events.
//
// It builds on the public API of the core only ([outbox.Client.Get],
// [outbox.Client.Dead], [outbox.DeadEvents]) and works with every Store.
// Package outboxadmintest puts events into chosen states for the tests of such
// tools.
//
// # Quick start
//
//	// GET …/events/{id}: one event with its headers and payload.
//	rec, err := client.Get(ctx, id)
//	if err != nil {
//		return err // wraps outbox.ErrNotFound for an unknown id
//	}
//	json.NewEncoder(w).Encode(outboxadmin.NewEvent(rec, outboxadmin.EventOptions{Payload: true}))
//
//	// POST …/dead/replay {"ids": […]}: all of them DEAD, or nothing changes.
//	if err := outboxadmin.CheckDead(ctx, client, "source orders", ids); err != nil {
//		return err // a *outboxadmin.NotDeadError, or the store's error
//	}
//	n, err := outboxadmin.ReplayIDs(ctx, client.Dead(), ids)
package outboxadmin
