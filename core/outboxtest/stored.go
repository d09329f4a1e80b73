package outboxtest

import (
	"maps"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
)

// Stored returns e as a row read back from the table may carry it: with
// the tenant id tenant and the headers extra added. NewEnvelope refuses
// some hostile values (a tenant id with white space at either end or
// control characters; headers over outbox.MaxHeaders, MaxHeaderNameLen or
// MaxHeadersSize), which a row written before those checks, or by another
// program, may still have: a sink or a store must handle such an event alone.
func Stored(t testing.TB, e outbox.Envelope, tenant string, extra map[string]string) outbox.Envelope {
	t.Helper()
	headers := e.Headers()
	maps.Copy(headers, extra)
	r, err := outbox.RestoreEnvelope(outbox.EnvelopeFields{ID: e.ID(), Type: e.Type(), AggregateType: e.AggregateType(),
		AggregateID: e.AggregateID(), TenantID: tenant, SchemaVersion: e.SchemaVersion(), OccurredAt: e.OccurredAt(),
		Headers: headers, Payload: e.PayloadString(), Kind: e.PayloadKind()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
