package outboxnats_test

import (
	"context"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/relay"
	"github.com/go-outbox/outbox/core/relay/relaytest"
	outboxnats "github.com/go-outbox/outbox/sinks/nats"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkRelay: the sink, and an outbox Client relaying through it, next
// to a raw loop publishing the same messages on the same connection with
// asynchronous acknowledgements (go test -run '^$' -bench . ./...).
func BenchmarkRelay(b *testing.B) {
	srv := startServer(b)
	nc := connect(b, srv)
	relaytest.RunBench(b, relaytest.Bench{
		NewSink: func(b *testing.B) (outbox.Listener, relay.Topic) {
			st := newStream(b, nc)
			sink, err := outboxnats.New(outboxnats.Config{Conn: nc, Subject: st.topic})
			if err != nil {
				b.Fatal(err)
			}
			return sink, st.topic
		},
		Raw: func(b *testing.B, events []outbox.Envelope, topic relay.Topic) error {
			js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
			if err != nil {
				return err
			}
			futures := make([]jetstream.PubAckFuture, 0, len(events))
			for _, e := range events {
				m, err := relay.NATS.Message(e, topic, nil)
				if err != nil {
					return err
				}
				msg := &nats.Msg{Subject: m.Topic, Data: m.Payload, Header: make(nats.Header, len(m.Headers)+1)}
				for k, v := range m.Headers {
					msg.Header[k] = []string{v}
				}
				f, err := js.PublishMsgAsync(msg, jetstream.WithMsgID(m.ID))
				if err != nil {
					return err
				}
				futures = append(futures, f)
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				return context.DeadlineExceeded
			}
			for _, f := range futures {
				select {
				case err := <-f.Err():
					return err
				default:
				}
			}
			return nil
		},
	})
}
