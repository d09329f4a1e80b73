package outboxkafka_test

import (
	"context"
	"log"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
	"github.com/go-outbox/outbox/core/relay"
	outboxkafka "github.com/go-outbox/outbox/sinks/kafka"
)

// Example relays every event of a Client to the Kafka topics
// orders.<event type>, keyed by ordering key; the topics must exist. In
// production the Store and TxContext come from outboxsql or an adapter.
func Example() {
	ctx := context.Background()
	store := outboxmem.New()
	client, err := outbox.New(outbox.Config{Store: store, TxContext: store})
	if err != nil {
		log.Fatal(err)
	}

	sink, err := outboxkafka.New(outboxkafka.Config{
		Brokers: []string{"127.0.0.1:9092"},
		Topic:   relay.Prefixed("orders."),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close() // after client.Close: the sink's client goes last
	if err := client.HandleAll(sink); err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)

	err = store.InTx(ctx, func(ctx context.Context) error {
		_, err := client.Write(ctx, outbox.MustEnvelope(outbox.EventName("OrderPlaced"),
			outbox.WithAggregate(outbox.AggregateName("Order"), "o-1"),
			outbox.WithJSON([]byte(`{"total":1200}`))))
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}
