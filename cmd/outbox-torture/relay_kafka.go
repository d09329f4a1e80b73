package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/relay"
	outboxkafka "github.com/go-outbox/outbox/sinks/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The broker of -relay kafka is kfake (franz-go's Kafka broker, which
// speaks the protocol and keeps its log in a directory) with one broker, in
// a child process of the harness (-role kfake), so that the fault can
// SIGKILL it.
//
// What a kill keeps: kfake writes every produced batch to its partition's
// segment and index files with write(2) before it answers the produce
// request, appends every offset commit to groups.log and every producer id
// to pids.log the same way, and writes topics.json (and meta.json at the
// first start) when they change. A SIGKILL ends the process, not the
// kernel: what was written is in the page cache and the restarted broker
// reads it back (a torn last batch is cut off at its CRC). So an
// acknowledged record (acks=all: one broker, its own write) survives the
// kill and restart without kfake.SyncWrites, which fsyncs every batch and
// only matters if the machine itself goes down; the fault does not do
// that, so the broker runs without it. What a kill loses is what kfake
// saves only when it is closed: the idempotent producers' sequence windows
// (a batch written before the kill whose acknowledgement was lost is
// accepted again when the producer retries it: a duplicate record, which
// the inbox drops, never a lost one) and the groups' members (they join
// again; their committed offsets stay).
func init() {
	relayBrokers["kafka"] = relayBroker{start: startKafka, dial: dialKafka}
}

const (
	// kafkaPartitions is the number of partitions of a run's topic.
	kafkaPartitions = 4
	// kafkaReadyWithin bounds the wait for a started broker to answer.
	kafkaReadyWithin = time.Minute
	// kafkaCommitWithin bounds the consumer's commit after a poll: one that
	// fails is left to the next commit.
	kafkaCommitWithin = 5 * time.Second
	// kafkaRetryPause is how long the consumer waits after an apply failed
	// before it fetches the record again.
	kafkaRetryPause = 100 * time.Millisecond
)

// kafkaTopic returns the topic of the run named run, which is also the
// name of its consumer group.
func kafkaTopic(run string) (string, error) {
	t := "outbox-torture." + run
	if err := relay.Kafka.CheckTopic(t); err != nil {
		return "", fmt.Errorf("run name %q: %w", run, err)
	}
	return t, nil
}

// runKfake is the -role kfake process: a one-broker kfake cluster on
// 127.0.0.1:port with its data in dir (read back if it is there), until
// its standard input ends, when it closes the cluster (which saves the rest
// of its state). The coordinator holds the other end of that pipe, so
// the broker ends with it, however it ends.
func runKfake(dir string, port int) error {
	if dir == "" || port <= 0 {
		return errors.New("-role kfake needs -kfake-dir and -kfake-port")
	}
	c, err := kfake.NewCluster(kfake.Ports(port), kfake.DataDir(dir))
	if err != nil {
		return fmt.Errorf("kfake: %w", err)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	c.Close()
	return nil
}

// kafkaServer is the coordinator's side of -relay kafka: the kfake child
// process, its directory and port, and an admin client. It is a
// brokerAuditor.
type kafkaServer struct {
	dir     string // removed by close
	port    int
	addr    string
	topic   string
	created bool        // the topic was created: the broker must list it
	cl      *kgo.Client // admin requests; nil until made in start

	daemon                // the broker's process
	stdin  io.WriteCloser // closing it ends the broker
}

// startKafka starts the broker of the run named run on a free loopback
// port with its data in a temp directory, and creates the run's topic. On
// error nothing it started is left.
func startKafka(ctx context.Context, run string) (_ brokerServer, err error) {
	topic, err := kafkaTopic(run)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "outbox-torture-kafka-")
	if err != nil {
		return nil, err
	}
	s := &kafkaServer{dir: dir, topic: topic, daemon: daemon{name: "kfake", log: filepath.Join(dir, "kfake.log")}}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.close(ctx))
		}
	}()
	if s.port, err = freePort(); err != nil {
		return nil, err
	}
	s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	if s.cl, err = kgo.NewClient(kgo.SeedBrokers(s.addr)); err != nil {
		return nil, err
	}
	if err := s.run(ctx); err != nil {
		return nil, err
	}
	resp, err := kadm.NewClient(s.cl).CreateTopic(ctx, kafkaPartitions, 1, nil, topic)
	if err = errors.Join(err, resp.Err); err != nil {
		return nil, fmt.Errorf("create topic %s: %w", topic, err)
	}
	s.created = true
	if err := s.await(ctx, kafkaReadyWithin, s.answers); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *kafkaServer) url() string { return s.addr }

// run starts the broker process on s's directory and port and waits until
// it answers (see answers), at most kafkaReadyWithin.
func (s *kafkaServer) run(ctx context.Context) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, "-role", "kfake", "-kfake-dir", filepath.Join(s.dir, "data"), "-kfake-port", strconv.Itoa(s.port))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		_ = stdin.Close()
		return err
	}
	defer logf.Close() // the broker writes to its own copy
	cmd.Stdout, cmd.Stderr = logf, logf
	s.stdin = stdin
	return s.startDaemon(ctx, cmd, kafkaReadyWithin, s.answers)
}

// answers asks the broker for the topic's metadata once, with a short
// deadline; once the topic was created, it checks that the broker lists
// it with every partition, as the restarted broker must have read it back. The request goes to the
// broker: kadm's metadata would come from the client's cache, which still
// knows the topic after the broker is gone.
func (s *kafkaServer) answers(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(s.topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil || !s.created {
		return err
	}
	switch {
	case len(resp.Topics) != 1:
		return fmt.Errorf("metadata of topic %s: %d topics in the answer", s.topic, len(resp.Topics))
	case resp.Topics[0].ErrorCode != 0:
		return fmt.Errorf("topic %s: %w", s.topic, kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	case len(resp.Topics[0].Partitions) != kafkaPartitions:
		return fmt.Errorf("topic %s has %d partitions, want %d", s.topic, len(resp.Topics[0].Partitions), kafkaPartitions)
	}
	return nil
}

// fault SIGKILLs the broker and starts it again on the same directory and
// port, and waits until it answers with the run's topic.
func (s *kafkaServer) fault(ctx context.Context) (string, error) {
	start := time.Now()
	s.kill()
	if err := s.run(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("kafka broker SIGKILLed and restarted on %s (%s)", s.addr, time.Since(start).Round(time.Millisecond)), nil
}

// audit reads the run's topic from its start to its end, and the group's
// committed offsets, and sorts the events with ids by where their records
// are: at or past their partition's committed offset (never consumed: the
// group stood still, or no member fetched them), before it (the group
// committed past them without applying them) or nowhere (the broker does
// not have them).
func (s *kafkaServer) audit(ctx context.Context, ids map[string]bool) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, kafkaReadyWithin)
	defer cancel()
	adm := kadm.NewClient(s.cl)
	ends, err := adm.ListEndOffsets(ctx, s.topic)
	if err = errors.Join(err, ends.Error()); err != nil {
		return "", fmt.Errorf("end offsets: %w", err)
	}
	committed, err := adm.FetchOffsets(ctx, s.topic) // the group is named after its topic
	if err = errors.Join(err, committed.Error()); err != nil {
		return "", fmt.Errorf("committed offsets: %w", err)
	}
	commit := func(p int32) int64 {
		if o, ok := committed.Lookup(s.topic, p); ok {
			return o.At
		}
		return 0
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.addr), kgo.ConsumeTopics(s.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	unread := map[int32]int64{} // the end of each partition not read to it yet
	var parts []string
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			unread[o.Partition] = o.Offset
		}
		parts = append(parts, fmt.Sprintf("%d: %d/%d", o.Partition, commit(o.Partition), o.Offset))
	})
	slices.Sort(parts)
	past, behind := map[string]bool{}, map[string]bool{}
	for len(unread) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return "", fmt.Errorf("read the topic: %w", ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset+1 >= unread[r.Partition] {
				delete(unread, r.Partition)
			}
			id, ok := kafkaEventID(r)
			switch {
			case !ok || !ids[id]:
			case r.Offset < commit(r.Partition):
				behind[id] = true
			default:
				past[id] = true
			}
		})
	}
	for id := range behind {
		delete(past, id)
	}
	return fmt.Sprintf("the topic has %d of them at or past their partition's committed offset (never consumed), %d before it (committed without being applied), %d not at all (acknowledged, yet not in the topic); committed/end offsets by partition: %s",
		len(past), len(behind), len(ids)-len(past)-len(behind), strings.Join(parts, ", ")), nil
}

// kill ends the broker with SIGKILL, waits until it has ended and closes
// its stdin.
func (s *kafkaServer) kill() {
	s.daemon.kill()
	if s.stdin != nil {
		_ = s.stdin.Close()
		s.stdin = nil
	}
}

// close kills the broker, closes the admin client and removes the
// directory. It may be called more than once.
func (s *kafkaServer) close(context.Context) error {
	s.kill()
	if s.cl != nil {
		s.cl.Close()
		s.cl = nil
	}
	if s.dir == "" {
		return nil
	}
	err := os.RemoveAll(s.dir)
	s.dir = ""
	return err
}

// kafkaClient is a worker's side of -relay kafka: the sink, with a client
// of its own, and the consumer's group client.
type kafkaClient struct {
	snk  *outboxkafka.Sink
	cons *kgo.Client
}

// dialKafka makes the worker's clients for the broker at url; they connect
// on first use, and again after the broker restarted.
//
// The sink's client writes idempotently with acks from all in-sync
// replicas (what outboxkafka requires) and retries a record until the
// sink's PublishTimeout gives it up: a publish during the broker's outage
// fails, and the outbox delivers its event again. Both clients look up
// the cluster's metadata again soon after an error (MetadataMinAge), so
// that they find the restarted broker without waiting the default 5 s.
//
// The consumer is a member of the run's group (named after the topic,
// shared by every worker) that commits only the records it marked
// (AutoCommitMarks): consume marks a record once apply returned nil for it
// (or it has no event id) and commits the marks after each poll; the
// client commits them again every AutoCommitInterval (after a commit
// failed: the broker away) and when the member gives up its partitions (a
// rebalance, close). Each poll blocks rebalances (BlockRebalanceOnPoll)
// until its records are applied, marked and committed, so that a worker
// commits only partitions it still owns. A record whose apply failed is fetched again: its partition is set
// back to it (SetOffsets; its later records are dropped from this poll and
// fetched again too) and nothing from it on is marked. Applied records not
// yet committed when a member dies, or the broker, are delivered again,
// and the inbox drops them.
//
// The member is static (kgo.InstanceID, kafkaInstanceID): a worker dies
// without leaving the group (SIGKILL, the poison event's os.Exit), and the
// coordinator starts it again with the same number, so the new process
// takes its predecessor's place in the group at once instead of joining
// beside it. A dynamic member of a dead process stays in the group until
// the broker gives up on it, and every rebalance meanwhile waits for it:
// SessionTimeout if it died while the group was stable; if it died
// waiting in a JoinGroup, kfake counts it as joined, starts no session
// timer when the answer cannot reach it, and may make it the leader
// whose SyncGroup the others then wait for, so that the group stands still
// for the whole rebalance timeout (60 s) each time, its partitions
// unconsumed, their records waiting past the committed offsets. A member
// whose worker is not back holds its partitions until SessionTimeout.
func dialKafka(_ context.Context, url, run string, worker int) (brokerClient, error) {
	topic, err := kafkaTopic(run)
	if err != nil {
		return nil, err
	}
	snk, err := outboxkafka.New(outboxkafka.Config{
		Brokers: []string{url},
		Options: []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MetadataMinAge(500 * time.Millisecond)},
		Topic:   func(outbox.Envelope) (string, error) { return topic, nil },
	})
	if err != nil {
		return nil, err
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(url), kgo.MetadataMinAge(500*time.Millisecond),
		kgo.ConsumerGroup(topic), kgo.InstanceID(kafkaInstanceID(worker)), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitMarks(), kgo.AutoCommitInterval(time.Second), kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(time.Second))
	if err != nil {
		return nil, errors.Join(err, snk.Close())
	}
	return &kafkaClient{snk: snk, cons: cons}, nil
}

// kafkaInstanceID is the group instance id of the consumer of worker
// number worker, the same in every process of that worker.
func kafkaInstanceID(worker int) string { return "worker-" + strconv.Itoa(worker) }

func (k *kafkaClient) sink() outbox.Listener { return k.snk }

// consume polls the run's records and applies them (see dialKafka). A
// record without one event id is logged (its position only, nothing it
// carries) and marked without being applied. It returns nil when ctx ends, an error if the
// client was closed first.
func (k *kafkaClient) consume(ctx context.Context, apply func(ctx context.Context, eventID string, payload []byte) error) error {
	for {
		fetches := k.cons.PollRecords(ctx, 256)
		if ctx.Err() != nil {
			k.cons.AllowRebalance()
			return nil
		}
		if fetches.IsClientClosed() {
			return fmt.Errorf("kafka consumer: %w", kgo.ErrClientClosed)
		}
		// Other fetch errors (the broker away, …) are retried by the
		// client; the records come when it is back.
		var done []*kgo.Record
		again := map[string]map[int32]kgo.EpochOffset{}
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			for _, r := range p.Records {
				id, ok := kafkaEventID(r)
				if !ok {
					slog.Default().Warn("relay kafka: a record without one event id is skipped",
						"topic", r.Topic, "partition", r.Partition, "offset", r.Offset)
				} else if err := apply(ctx, id, r.Value); err != nil {
					if again[r.Topic] == nil {
						again[r.Topic] = map[int32]kgo.EpochOffset{}
					}
					again[r.Topic][r.Partition] = kgo.EpochOffset{Epoch: -1, Offset: r.Offset}
					return
				}
				done = append(done, r)
			}
		})
		if len(done) > 0 {
			k.cons.MarkCommitRecords(done...)
			cctx, cancel := context.WithTimeout(ctx, kafkaCommitWithin)
			_ = k.cons.CommitMarkedOffsets(cctx) // on failure: the next one commits them
			cancel()
		}
		k.cons.SetOffsets(again)
		k.cons.AllowRebalance()
		if len(again) > 0 {
			sleep(ctx, kafkaRetryPause)
		}
	}
}

// kafkaEventID returns the value of r's one Outbox-Event-Id header; false
// if it has none, more than one, or an empty one.
func kafkaEventID(r *kgo.Record) (string, bool) {
	var id string
	n := 0
	for _, h := range r.Headers {
		if h.Key == relay.HeaderEventID {
			id, n = string(h.Value), n+1
		}
	}
	return id, n == 1 && id != ""
}

// close closes the sink and its client, and the consumer, which leaves
// the group.
func (k *kafkaClient) close() error {
	err := k.snk.Close()
	k.cons.CloseAllowingRebalance()
	return err
}
