// Package protomodel is an explicit-state model of the claim protocol of
// package outbox: the outbox table's rows as the SQL stores change them,
// and the claims, holds, workers, acknowledgements and heartbeats of a few
// processes sharing the table, on a logical clock with leases. Its tests
// explore every interleaving of the model's actions for small sizes and
// check the protocol's invariants at every state: no event DONE without a
// delivery that succeeded, every event can still end; the events of an
// ordering key start one after the other, each once the one before it is
// DONE; fenced updates; a poison event ends DEAD after MaxAttempts; a
// renewed claim is never taken over.
//
// Each action mirrors one function of the engine (see docs/design.md,
// "The protocol model"), and switches (mutants) bring back earlier bugs,
// so that the tests show each of them caught by an invariant. The
// package is a test tool: nothing outside its tests uses it.
package protomodel
