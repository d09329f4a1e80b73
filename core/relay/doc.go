// Package relay holds what every broker sink shares: the message an event
// becomes ([Message]: topic, key, headers, payload) and the header names that
// carry the envelope's metadata. A sink (sinks/nats, sinks/amqp, sinks/kafka)
// is an [outbox.Listener] that publishes that message and returns only once the
// broker has acknowledged it, so an event is DONE only when the broker has it;
// register one with [outbox.Client.HandleAll] to relay every event.
//
// Redeliveries are expected (the outbox delivers at least once): every
// message carries the event id ([HeaderEventID], and the broker's own
// message-id field where it has one) so brokers and consumers can drop
// duplicates.
package relay
