package outboxkafka_test

import (
	"context"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/relay"
	"github.com/go-outbox/outbox/core/relay/relaytest"
	outboxkafka "github.com/go-outbox/outbox/sinks/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkRelay: the sink, and an outbox Client relaying through it, next
// to a raw loop producing the same records with the same client
// (idempotent, acks=all) and collecting the outcomes asynchronously
// (go test -run '^$' -bench . ./...). The cluster is kfake, in process.
func BenchmarkRelay(b *testing.B) {
	c := startCluster(b)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.ProducerLinger(0))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	relaytest.RunBench(b, relaytest.Bench{
		NewSink: func(b *testing.B) (outbox.Listener, relay.Topic) {
			tp := newTopics(b, c)
			return newSink(b, outboxkafka.Config{Client: cl, Topic: tp.topic}), tp.topic
		},
		Raw: func(b *testing.B, events []outbox.Envelope, topic relay.Topic) error {
			errs := make(chan error, 1)
			for _, e := range events {
				r, err := outboxkafka.Record(e, topic, nil)
				if err != nil {
					return err
				}
				cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
					if err != nil {
						select {
						case errs <- err:
						default:
						}
					}
				})
			}
			if err := cl.Flush(context.Background()); err != nil {
				return err
			}
			select {
			case err := <-errs:
				return err
			default:
				return nil
			}
		},
	})
}
