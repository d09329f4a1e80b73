package main

import (
	"context"

	outbox "github.com/go-outbox/outbox/core"
)

// A -relay run delivers every event through a real broker to a consumer
// that applies it through the inbox, while the broker fails. A broker has
// two sides: the coordinator's (brokerServer: it starts the server, or what
// stands between the workers and it, injects the fault and removes what it
// made) and each worker's (brokerClient: the relay's sink and the
// consumer).

// brokerServer is the coordinator's side of a -relay run's broker.
type brokerServer interface {
	// url is what the workers connect to (their -broker-url).
	url() string
	// fault injects the broker's fault once (the server killed and
	// restarted, or every connection cut) and returns once the broker
	// accepts connections again, with what it did, for the log.
	fault(ctx context.Context) (string, error)
	// close stops what the run started and deletes what it created: the
	// server, its files, its streams, topics or queues.
	close(ctx context.Context) error
}

// brokerAuditor is a brokerServer that can say, at the end of a run,
// where it has the messages of events it acknowledged that no consumer
// applied: not at all (the broker lost them), or where the consumers never
// came (they stood still), or behind what they acknowledged (they skipped
// them).
type brokerAuditor interface {
	// audit describes where the broker has the messages of the events
	// with ids, for the run's error.
	audit(ctx context.Context, ids map[string]bool) (string, error)
}

// brokerClient is a worker's side of a -relay run's broker. It survives
// the broker's faults on its own: the sink's publishes fail while the
// broker is away (the outbox delivers the event again), and the consumer
// reconnects and goes on.
type brokerClient interface {
	// sink is the outbox.Listener that publishes an event: it returns nil
	// only once the broker has it.
	sink() outbox.Listener
	// consume hands the messages of the run, from any worker's sink, to
	// apply, and acknowledges a message only after apply returned nil for
	// it (otherwise the broker delivers it again). Several workers consume
	// at once and share the messages. It returns when ctx ends.
	consume(ctx context.Context, apply func(ctx context.Context, eventID string, payload []byte) error) error
	// close closes the sink and the consumer's connections.
	close() error
}

// relayBroker is one broker a -relay run can use.
type relayBroker struct {
	// start starts the broker's server for the run named run (the
	// coordinator's side).
	start func(ctx context.Context, run string) (brokerServer, error)
	// dial connects worker number worker (its -worker-id, which a
	// restarted worker keeps) to the server at url, for the run named run.
	dial func(ctx context.Context, url, run string, worker int) (brokerClient, error)
}

// relayBrokers are the brokers of -relay, by name.
var relayBrokers = map[string]relayBroker{}
