// Package outboxadmintest puts events into chosen delivery states for the tests
// of operator tools (outboxctl, outboxhttp, the outboxadmin views): a test
// writes its events through an [outbox.Client] and drives each to NEW, RETRY,
// DONE or DEAD at a chosen time, as a dispatcher would, then checks what the
// tool shows and what a refused change left alone. It works with every Store;
// the tests bring their own (an outboxsql Store on each backend of
// outboxsqltest, or outboxmem).
//
//	ids := outboxadmintest.Seed(t, client, store, txm,
//		outboxadmintest.Event{Envelope: placed},                                      // stays NEW
//		outboxadmintest.Event{Envelope: shipped, Status: outbox.StatusDone, At: hourAgo},
//		outboxadmintest.Event{Envelope: invoice, Status: outbox.StatusDead, At: hourAgo, Error: "smtp 550"},
//	)
//	before := outboxadmintest.Snapshot(t, store)
//	// … a change the tool must refuse …
//	outboxadmintest.WantUnchanged(t, store, before)
package outboxadmintest
