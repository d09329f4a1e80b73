// Package relaytest is the test suite every broker sink (sinks/nats,
// sinks/amqp, sinks/kafka) runs, and helpers for tests that need a broker.
// It depends on the standard library and the outbox core only.
//
// A sink's test provides one factory returning a [Fixture]: the sink, the
// topic mapping it was built with, a way to read back what the broker
// stored, and, where the test owns the broker, a way to take it away and
// bring it back:
//
//	func TestSuite(t *testing.T) {
//		relaytest.Run(t, func(t *testing.T) relaytest.Fixture {
//			sink, read := newSinkOnFreshStream(t)
//			return relaytest.Fixture{Sink: sink, Broker: relay.NATS, Topic: topic, Read: read, Dedupes: true}
//		})
//	}
//
// The suite checks that every event becomes exactly the message
// [relay.Broker.Message] describes (topic, key, headers, payload byte for byte,
// the event id as the broker's message id), that a redelivery is dropped
// by a deduplicating broker and carries the same id otherwise, that an
// event the broker refuses is an error for that event only and never DONE,
// also in a batch (a sink that is an [outbox.BatchListener]: the other
// events of the batch are delivered), that hostile event data (tenant ids
// that are not one topic part, headers in the reserved namespaces) fails
// its own event or is left out and steers nothing, that a cancelled
// context is honoured, and, with [Fixture.Down] and [Fixture.Up], that a
// broker outage is an error (never a hang) and that the outbox relays
// every event once the broker is back.
//
// A test that needs a broker it cannot reach calls [Unavailable], which skips
// the test, or fails it when OUTBOX_TEST_REQUIRE_BROKERS=1 (as CI sets it).
// [Proxy] is a TCP proxy a test puts between a sink and a shared broker to
// cut the connection without stopping the broker.
package relaytest
