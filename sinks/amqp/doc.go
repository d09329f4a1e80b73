// Package outboxamqp relays outbox events to RabbitMQ (AMQP 0-9-1).
//
// A [Sink] is an [outbox.Listener] (and an [outbox.BatchListener], which takes the
// events queued together in one call): register it with [outbox.Client.HandleAll] and every
// event of the Client (that no specific route takes) is published to an
// exchange as the message package relay describes: the payload byte for
// byte, the event's metadata and headers (traceparent included) in the
// headers table, the event id as message-id, persistent delivery mode,
// and the content type of JSON payloads. The event's own headers that
// RabbitMQ reads as its own (x-…, CC, BCC) or in the library's Outbox-
// namespace are dropped, and a message RabbitMQ would refuse by closing
// the channel fails its own event before it is sent.
//
//	sink, err := outboxamqp.New(outboxamqp.Config{
//		URL:        "amqp://guest:guest@127.0.0.1:5672/",
//		Exchange:   "orders",
//		RoutingKey: relay.Prefixed("orders."), // orders.OrderPlaced, …
//	})
//	if err != nil {
//		return err
//	}
//	defer sink.Close()
//	_ = client.HandleAll(sink) // client is your *outbox.Client
//	_ = client.Start(ctx)
//
// The exchange and the queues bound to it are the application's; the sink
// declares nothing. [Sink.Handle] returns nil only once the broker has
// confirmed the message (publisher confirms) without returning it (the
// mandatory flag), so an event is DONE only when a queue has it:
//
//   - a message no queue is bound for comes back as basic.return and fails its
//     event (NO_ROUTE, naming the exchange and routing key); it is retried and
//     ends DEAD after [outbox.Config.MaxAttempts], where [outbox.Client.Dead]
//     can replay it once a queue is bound;
//   - a lost connection or a channel the broker closed (a missing exchange,
//     say) fails the publishes waiting on it with the reason; the next
//     publish opens a new channel, and redials a connection the sink
//     dialed itself ([Config.URL]);
//   - each publish waits at most [Config.PublishTimeout] for the confirmation.
//
// RabbitMQ does not deduplicate: a redelivery of an event (the outbox
// delivers at least once) is a second message with the same message-id,
// which consumers use to drop it (see the inbox).
package outboxamqp
