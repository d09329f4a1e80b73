package outboxamqp_test

import (
	"context"
	"log"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
	"github.com/go-outbox/outbox/core/relay"
	outboxamqp "github.com/go-outbox/outbox/sinks/amqp"
)

// Example relays every event of a Client to the exchange "orders" with
// routing keys orders.<event type>; the exchange and a queue bound for the
// keys must exist. In production the Store and TxContext come from
// outboxsql or an adapter.
func Example() {
	ctx := context.Background()
	store := outboxmem.New()
	client, err := outbox.New(outbox.Config{Store: store, TxContext: store})
	if err != nil {
		log.Fatal(err)
	}

	sink, err := outboxamqp.New(outboxamqp.Config{
		URL:        "amqp://guest:guest@127.0.0.1:5672/",
		Exchange:   "orders",
		RoutingKey: relay.Prefixed("orders."),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close() // after client.Close: the sink's connection goes last
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
