// Package outboxkafka relays outbox events to Kafka, with franz-go.
//
// A [Sink] is an [outbox.Listener] (and an [outbox.BatchListener], which takes
// the events queued together in one call): register it with
// [outbox.Client.HandleAll] and every event of the Client (that no specific
// route takes) is produced as the record [Record] describes: the payload byte
// for byte as the value, the ordering key (aggregate type and id) as the key,
// the event's metadata and headers (traceparent included) as record headers,
// among them Outbox-Event-Id.
//
//	sink, err := outboxkafka.New(outboxkafka.Config{
//		Brokers: []string{"127.0.0.1:9092"},
//		Topic:   relay.Prefixed("orders."), // orders.OrderPlaced, …
//	})
//	if err != nil {
//		return err
//	}
//	defer sink.Close()
//	_ = client.HandleAll(sink) // client is your *outbox.Client
//	_ = client.Start(ctx)
//
// The producer is idempotent (acks from all in-sync replicas; its own
// retries never duplicate or reorder a record), and [Sink.Handle] returns the
// outcome of that event's record, so an event is DONE only when Kafka has
// it:
//
//   - the key keeps every event of one aggregate in one partition, in the
//     order the outbox hands them over (one at a time per aggregate with
//     the outbox's per-key ordering);
//   - a topic that does not exist is an error for that event naming the
//     topic; it is retried and ends DEAD after [outbox.Config.MaxAttempts],
//     where [outbox.Client.Dead] can replay it once the topic exists;
//   - while the brokers cannot be reached, Handle fails after
//     [Config.PublishTimeout] and the outbox retries with backoff; nothing is
//     lost.
//
// Kafka does not deduplicate what the outbox delivers twice: a redelivery
// is a second record with the same Outbox-Event-Id header, which consumers
// use to drop it (see the inbox).
package outboxkafka
