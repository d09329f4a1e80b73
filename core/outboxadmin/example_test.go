package outboxadmin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxadmin"
	"github.com/go-outbox/outbox/core/outboxmem"
)

// An event as an operator tool prints it: with its headers and payload
// (the JSON document itself, not a string holding it).
func ExampleNewEvent() {
	env, err := outbox.RestoreEnvelope(outbox.EnvelopeFields{ // as a Store reads it back
		ID: "01JQ3ZQ6M8X4K2V9B7N5T1R0AA", Type: "InvoiceSent", AggregateType: "Invoice", AggregateID: "inv-7",
		OccurredAt: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC),
		Headers:    map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		Payload:    `{"invoice":"inv-7","to":"billing@example.com"}`, Kind: outbox.PayloadJSON,
	})
	if err != nil {
		panic(err)
	}
	rec := outbox.Record{ID: env.ID(), Envelope: env, Status: outbox.StatusDead, Attempts: 10,
		CreatedAt: env.OccurredAt(), DoneAt: env.OccurredAt().Add(4 * time.Minute), LastError: "smtp 550: mailbox unavailable"}

	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(outboxadmin.NewEvent(rec, outboxadmin.EventOptions{Payload: true, PayloadSize: true}))
	// Output:
	// {
	//   "id": "01JQ3ZQ6M8X4K2V9B7N5T1R0AA",
	//   "type": "InvoiceSent",
	//   "aggregate_type": "Invoice",
	//   "aggregate_id": "inv-7",
	//   "schema_version": 1,
	//   "status": "DEAD",
	//   "attempts": 10,
	//   "occurred_at": "2026-03-01T09:00:00Z",
	//   "created_at": "2026-03-01T09:00:00Z",
	//   "done_at": "2026-03-01T09:04:00Z",
	//   "last_error": "smtp 550: mailbox unavailable",
	//   "headers": {
	//     "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	//   },
	//   "payload_kind": "json",
	//   "payload_size": 46,
	//   "payload": {
	//     "invoice": "inv-7",
	//     "to": "billing@example.com"
	//   }
	// }
}

// A replay of the ids an operator named: all of them DEAD, or nothing
// changes and the error says which is not.
func ExampleCheckDead() {
	ctx := context.Background()
	store := outboxmem.New()
	client, err := outbox.New(outbox.Config{Store: store, TxContext: store, Mode: outbox.ModeWriterOnly})
	if err != nil {
		panic(err)
	}
	defer client.Close(ctx)
	dead, pending := deadAndPending(ctx, client, store)

	replay := func(ids ...string) {
		if err := outboxadmin.CheckDead(ctx, client, "source orders", ids); err != nil {
			fmt.Println("refused:", err)
			return
		}
		n, err := outboxadmin.ReplayIDs(ctx, client.Dead(), ids)
		fmt.Println("replayed:", n, err)
	}
	replay(dead, pending)
	replay(dead, "01JQ3ZQ6M8X4K2V9B7N5T1R0ZZ")
	replay(dead)
	// Output:
	// refused: event 01JQ3ZQ6M8X4K2V9B7N5T1R0AB is NEW, not DEAD; nothing changed
	// refused: no event with id 01JQ3ZQ6M8X4K2V9B7N5T1R0ZZ in source orders; nothing changed
	// replayed: 1 <nil>
}

// deadAndPending writes two events and moves the first to DEAD, as a
// dispatcher does after its last failed attempt.
func deadAndPending(ctx context.Context, client *outbox.Client, store *outboxmem.Store) (dead, pending string) {
	ev := func(id string) outbox.Envelope {
		return outbox.MustEnvelope(outbox.EventName("InvoiceSent"), outbox.WithID(id), outbox.WithJSON([]byte(`{}`)))
	}
	err := store.InTx(ctx, func(ctx context.Context) error {
		_, err := client.Write(ctx, ev("01JQ3ZQ6M8X4K2V9B7N5T1R0AA"), ev("01JQ3ZQ6M8X4K2V9B7N5T1R0AB"))
		return err
	})
	if err != nil {
		panic(err)
	}
	now := time.Now()
	if _, err := store.Claim(ctx, outbox.ClaimRequest{Owner: "worker", Now: now, Lease: time.Minute, Limit: 1}); err != nil {
		panic(err)
	}
	if _, err := store.MarkDead(ctx, outbox.Outcome{Owner: "worker", ID: "01JQ3ZQ6M8X4K2V9B7N5T1R0AA", At: now, Error: "smtp 550"}); err != nil {
		panic(err)
	}
	return "01JQ3ZQ6M8X4K2V9B7N5T1R0AA", "01JQ3ZQ6M8X4K2V9B7N5T1R0AB"
}
