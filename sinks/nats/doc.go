// Package outboxnats relays outbox events to NATS JetStream.
//
// A [Sink] is an [outbox.Listener] (and an [outbox.BatchListener], which takes the
// events queued together in one call): register it with [outbox.Client.HandleAll] and every
// event of the Client (that no specific route takes) is published to a
// JetStream subject as the message package relay describes: the payload
// byte for byte, the event's metadata and headers (traceparent included)
// as NATS headers, and the event id as Nats-Msg-Id. The sink owns
// JetStream's Nats- namespace: an event's own header in it (Nats-Rollup,
// Nats-Expected-*, …), or in the library's Outbox- namespace, is dropped,
// never read by JetStream as a control header.
//
//	sink, err := outboxnats.New(outboxnats.Config{
//		URL:     "nats://127.0.0.1:4222",
//		Subject: relay.Prefixed("orders."), // orders.OrderPlaced, …
//	})
//	if err != nil {
//		return err
//	}
//	defer sink.Close()
//	_ = client.HandleAll(sink) // client is your *outbox.Client
//	_ = client.Start(ctx)
//
// A stream must capture the subjects (here "orders.>"); the sink does not
// create streams. [Sink.Handle] returns nil only once the stream has
// acknowledged the message, so an event is DONE only when JetStream stores it:
//
//   - a redelivery of an event (the outbox delivers at least once) inside
//     the stream's duplicate window (Duplicates, 2 minutes by default) is
//     acknowledged and dropped by the server: consumers see it once;
//   - while the connection is away, Handle fails at once and the outbox
//     retries with backoff; nothing is lost;
//   - a subject no stream captures is an error for that event naming the
//     subject; it is retried and ends DEAD after [outbox.Config.MaxAttempts],
//     where [outbox.Client.Dead] can replay it once the stream exists;
//   - each publish waits at most [Config.PublishTimeout] for the
//     acknowledgement.
//
// A Sink is also an outbox.BatchListener: the Client hands it the events queued
// together ([outbox.Config.ListenerBatchSize]), and [Sink.HandleBatch]
// publishes them asynchronously and waits for each one's acknowledgement, with
// a result per event; Handle publishes and waits for one event.
package outboxnats
