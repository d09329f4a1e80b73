package outboxamqp_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/relay"
	"github.com/go-outbox/outbox/core/relay/relaytest"
	outboxamqp "github.com/go-outbox/outbox/sinks/amqp"
	amqp "github.com/rabbitmq/amqp091-go"
)

// BenchmarkRelay: the sink, and an outbox Client relaying through it, next
// to a raw loop publishing the same messages on a channel of the same
// connection, mandatory and persistent, with confirmations collected
// asynchronously (go test -run '^$' -bench . ./...).
func BenchmarkRelay(b *testing.B) {
	_, conn := broker(b)
	relaytest.RunBench(b, relaytest.Bench{
		NewSink: func(b *testing.B) (outbox.Listener, relay.Topic) {
			tp := newTopology(b, conn)
			return newSink(b, outboxamqp.Config{Conn: conn, Exchange: tp.name, RoutingKey: tp.key}), tp.key
		},
		Raw: func(b *testing.B, events []outbox.Envelope, topic relay.Topic) error {
			ch, err := conn.Channel()
			if err != nil {
				return err
			}
			defer ch.Close()
			if err := ch.Confirm(false); err != nil {
				return err
			}
			confirms := ch.NotifyPublish(make(chan amqp.Confirmation, len(events)))
			returns := ch.NotifyReturn(make(chan amqp.Return, len(events)))
			exchange := topicExchange(topic, events[0])
			for _, e := range events {
				m, err := relay.AMQP.Message(e, topic, nil)
				if err != nil {
					return err
				}
				msg := amqp.Publishing{MessageId: m.ID, DeliveryMode: amqp.Persistent, ContentType: m.Headers[relay.HeaderContentType],
					Type: e.Type(), Timestamp: e.OccurredAt(), Headers: make(amqp.Table, len(m.Headers)), Body: m.Payload}
				for k, v := range m.Headers {
					msg.Headers[k] = v
				}
				if err := ch.PublishWithContext(context.Background(), exchange, m.Topic, true, false, msg); err != nil {
					return err
				}
			}
			timeout := time.After(time.Minute)
			for range events {
				select {
				case c := <-confirms:
					if !c.Ack {
						return fmt.Errorf("nack %d", c.DeliveryTag)
					}
				case r := <-returns:
					return fmt.Errorf("returned: %s", r.ReplyText)
				case <-timeout:
					return context.DeadlineExceeded
				}
			}
			return nil
		},
	})
}

// topicExchange returns the exchange of a test topology from its routing
// keys, "<exchange>.<type>".
func topicExchange(topic relay.Topic, e outbox.Envelope) string {
	key, _ := topic(e)
	return key[:len(key)-len(e.Type())-1]
}
