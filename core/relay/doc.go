// Package relay holds what every broker sink shares: the message an event
// becomes ([Message]: topic, key, headers, payload) and the header names that
// carry the envelope's metadata. A sink (sinks/nats, sinks/amqp, sinks/kafka)
// is an [outbox.Listener] that publishes that message and returns only once the
// broker has acknowledged it, so an event is DONE only when the broker has it;
// register one with [outbox.Client.HandleAll] to relay every event.
//
// Each sink builds its messages through its Broker (NATS, AMQP, Kafka),
// which treats event data as data: an envelope header in the broker's
// control namespace or in the library's "Outbox-" namespace is dropped
// (Broker.Reserved), a topic outside the broker's syntax and a tenant id
// that is not one topic part (PerTenant, CheckPart) fail that event alone
// with ErrInvalidMessage.
//
// Redeliveries are expected (the outbox delivers at least once): every
// message carries the event id ([HeaderEventID], and the broker's own
// message-id field where it has one) so brokers and consumers can drop
// duplicates. Anyone who may publish on the broker can forge an event id;
// with a signing key the sinks sign every message (Sign, HeaderSignature)
// and a consumer that verifies (Verify, the inbox's VerifyKeys) refuses a
// forged message, which then cannot suppress the real one.
package relay
