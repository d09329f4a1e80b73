package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/relay"
	outboxnats "github.com/go-outbox/outbox/sinks/nats"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// -relay nats: a nats-server with JetStream of the run's own, on a free
// loopback port with its file store in a temp directory. The run's stream
// (named after the run) captures the subjects "<run>.>", with a duplicate
// window that drops a re-published event (the sink's Nats-Msg-Id is the
// event id); a durable pull consumer with explicit acknowledgements, which
// every worker consumes from, redelivers a message unacknowledged after
// natsAckWait (its worker killed, or its apply failed). The fault
// SIGKILLs the server and starts it again on the same port and store.

func init() {
	relayBrokers["nats"] = relayBroker{start: startNATS, dial: dialNATS}
}

const (
	// natsConsumer is the durable consumer of the run's stream.
	natsConsumer = "appliers"
	// natsAckWait is how long a delivered message may stay unacknowledged
	// before it is delivered again.
	natsAckWait = 2 * time.Second
	// natsDupeWindow is the stream's duplicate window.
	natsDupeWindow = 2 * time.Minute
	// natsReconnectWait is the workers' pause between reconnects.
	natsReconnectWait = 100 * time.Millisecond
	// natsPullBatch bounds the messages a worker holds unacknowledged,
	// so that they are applied well within natsAckWait.
	natsPullBatch = 32
	// natsReadyWait bounds the wait for a started server's stream.
	natsReadyWait = 30 * time.Second
)

// natsSubjects is the subject prefix of run's messages.
func natsSubjects(run string) string { return run + "." }

// natsServer is the coordinator's side of -relay nats.
type natsServer struct {
	daemon
	bin, dir, run string
	port          int
}

var _ brokerServer = (*natsServer)(nil)

// natsServerPath returns the path of nats-server: on PATH, else in
// /usr/sbin (Debian's package).
func natsServerPath() (string, error) {
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p, nil
	}
	if p := "/usr/sbin/nats-server"; isExec(p) {
		return p, nil
	}
	return "", errors.New("nats-server not found on PATH or in /usr/sbin")
}

// startNATS starts the server and creates the run's stream and consumer.
// On error everything it started is removed.
func startNATS(ctx context.Context, run string) (_ brokerServer, err error) {
	bin, err := natsServerPath()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "outbox-torture-nats-")
	if err != nil {
		return nil, err
	}
	s := &natsServer{daemon: daemon{name: "nats-server", log: filepath.Join(dir, "nats-server.log")}, bin: bin, dir: dir, run: run}
	defer func() {
		if err != nil {
			_ = s.close(ctx)
		}
	}()
	if s.port, err = freePort(); err != nil {
		return nil, err
	}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	nc, js, err := s.connect()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: run, Subjects: []string{natsSubjects(run) + ">"}, Storage: jetstream.FileStorage, Duplicates: natsDupeWindow,
	}); err != nil {
		return nil, fmt.Errorf("create stream %s: %w", run, err)
	}
	if _, err := js.CreateConsumer(ctx, run, jetstream.ConsumerConfig{
		Durable: natsConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: natsAckWait, DeliverPolicy: jetstream.DeliverAllPolicy,
	}); err != nil {
		return nil, fmt.Errorf("create consumer %s on %s: %w", natsConsumer, run, err)
	}
	return s, nil
}

func (s *natsServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// connect opens a connection to the server that does not reconnect.
func (s *natsServer) connect() (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(s.url(), nats.Name("outbox-torture coordinator"), nats.NoReconnect(), nats.Timeout(time.Second))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// start starts nats-server on the run's port and store, and waits until
// it accepts connections and JetStream answers (the run's stream, once it
// exists: recovered from the store after a fault).
func (s *natsServer) start(ctx context.Context) error {
	cmd := exec.Command(s.bin, "-js", "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-sd", filepath.Join(s.dir, "store"), "-l", s.log)
	return s.startDaemon(ctx, cmd, natsReadyWait, s.ready)
}

// ready returns nil once the server takes a connection and JetStream
// answers for the run's stream (for its account, before the stream
// exists).
func (s *natsServer) ready(ctx context.Context) error {
	nc, js, err := s.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = js.Stream(ctx, s.run)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.AccountInfo(ctx)
	}
	return err
}

// fault kills the server and starts it again on the same port and store:
// JetStream recovers the stream, its messages and the consumer's state.
func (s *natsServer) fault(ctx context.Context) (string, error) {
	start := time.Now()
	s.kill()
	if err := s.start(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("nats-server SIGKILLed and restarted, ready again after %s", time.Since(start).Round(time.Millisecond)), nil
}

// close kills the server and removes its directory: store and log.
func (s *natsServer) close(context.Context) error {
	s.kill()
	return os.RemoveAll(s.dir)
}

// natsClient is a worker's side of -relay nats: one connection that
// reconnects forever, for the sink and the consumer.
type natsClient struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	s   *outboxnats.Sink
	run string
}

var _ brokerClient = (*natsClient)(nil)

// dialNATS connects to the server at url; the connection is made even
// while the server is away (a fault), and comes up when it is back.
func dialNATS(_ context.Context, url, run string, _ int) (brokerClient, error) {
	nc, err := nats.Connect(url, nats.Name("outbox-torture worker"), nats.MaxReconnects(-1), nats.ReconnectWait(natsReconnectWait),
		nats.RetryOnFailedConnect(true), nats.Timeout(time.Second))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	s, err := outboxnats.New(outboxnats.Config{Conn: nc, Subject: relay.Prefixed(natsSubjects(run))})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &natsClient{nc: nc, js: js, s: s, run: run}, nil
}

func (c *natsClient) sink() outbox.Listener { return c.s }

// consume applies the messages of the run's durable consumer, a few at
// once, until ctx ends. The client pulls again after a reconnect; should
// its pull end for good (the consumer not found while the server starts),
// it looks the consumer up again.
func (c *natsClient) consume(ctx context.Context, apply func(ctx context.Context, eventID string, payload []byte) error) error {
	pool := newApplyPool(ctx)
	defer pool.wait()
	handle := func(m jetstream.Msg) {
		ok := pool.run(ctx, func() {
			if err := apply(ctx, m.Headers().Get(relay.HeaderEventID), m.Data()); err != nil {
				_ = m.NakWithDelay(natsReconnectWait)
				return
			}
			_ = m.Ack()
		})
		if !ok {
			_ = m.Nak()
		}
	}
	for ctx.Err() == nil {
		cons, err := c.js.Consumer(ctx, c.run, natsConsumer)
		if err != nil {
			sleep(ctx, natsReconnectWait)
			continue
		}
		cc, err := cons.Consume(handle, jetstream.PullMaxMessages(natsPullBatch))
		if err != nil {
			sleep(ctx, natsReconnectWait)
			continue
		}
		select {
		case <-ctx.Done():
			cc.Stop()
		case <-cc.Closed():
		}
	}
	return nil
}

// close closes the sink and the connection.
func (c *natsClient) close() error {
	err := c.s.Close()
	c.nc.Close()
	return err
}
