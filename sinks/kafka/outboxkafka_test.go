package outboxkafka_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/relay"
	"github.com/go-outbox/outbox/core/relay/relaytest"
	outboxkafka "github.com/go-outbox/outbox/sinks/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

// TestMain fails the test binary if a goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cluster is an in-process Kafka cluster (kfake: the Kafka protocol, no
// server to install) of three brokers on fixed loopback ports with its
// data in a temp dir, so that a test can stop it and start it again with
// what it stored, as a restarted cluster would.
type cluster struct {
	ports []int
	dir   string

	mu sync.Mutex
	c  *kfake.Cluster
}

func startCluster(t testing.TB) *cluster {
	t.Helper()
	c := &cluster{dir: t.TempDir()}
	for range 3 {
		c.ports = append(c.ports, freePort(t))
	}
	c.start(t)
	t.Cleanup(c.stop)
	return c
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (c *cluster) start(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	kc, err := kfake.NewCluster(kfake.Ports(c.ports...), kfake.DataDir(c.dir))
	if err != nil {
		t.Fatalf("start the cluster: %v", err)
	}
	c.c = kc
}

func (c *cluster) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c != nil {
		c.c.Close()
		c.c = nil
	}
}

func (c *cluster) addrs() []string {
	out := make([]string, len(c.ports))
	for i, p := range c.ports {
		out[i] = fmt.Sprintf("127.0.0.1:%d", p)
	}
	return out
}

// createTopics makes topics of 4 partitions each.
func (c *cluster) createTopics(t testing.TB, topics ...string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, topic := range topics {
		if err := c.c.CreateTopic(topic, 4, nil); err != nil {
			t.Fatalf("create topic %s: %v", topic, err)
		}
	}
}

var prefixes atomic.Int64

// topics is a fixture's topics, "<prefix>.[<tenant>.]<event type>", and a
// consumer of its own that reads them back over the Kafka protocol.
type topics struct {
	prefix string
	names  []string
	topic  relay.Topic // to names, and RefusedType to "missing.…", a topic that does not exist
	cl     *kgo.Client
	adm    *kadm.Client
	next   map[string]map[int32]int64 // the next offset to read per partition
}

func newTopics(t testing.TB, c *cluster) *topics {
	t.Helper()
	tp := &topics{prefix: fmt.Sprintf("t%d", prefixes.Add(1)), next: map[string]map[int32]int64{}}
	for _, typ := range relaytest.EventTypes() {
		tp.names = append(tp.names, tp.prefix+"."+typ, tp.prefix+"."+relaytest.Tenant+"."+typ)
	}
	tp.topic = relaytest.TenantTopic(tp.prefix+".", "missing.")
	c.createTopics(t, tp.names...)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.ConsumeTopics(tp.names...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	tp.cl, tp.adm = cl, kadm.NewClient(cl)
	return tp
}

// records reads every record up to the partitions' end offsets as they are
// when it is called. The cluster may be restarting: errors are retried
// until ctx ends.
func (tp *topics) records(ctx context.Context) ([]*kgo.Record, error) {
	var ends kadm.ListedOffsets
	for {
		var err error
		if ends, err = tp.adm.ListEndOffsets(ctx, tp.names...); err == nil {
			err = ends.Error()
		}
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("list end offsets: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	behind := func() bool {
		found := false
		ends.Each(func(o kadm.ListedOffset) {
			if tp.next[o.Topic][o.Partition] < o.Offset {
				found = true
			}
		})
		return found
	}
	var out []*kgo.Record
	for behind() {
		fetches := tp.cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("read back: %w (fetch errors: %v)", err, fetches.Errors())
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if tp.next[r.Topic] == nil {
				tp.next[r.Topic] = map[int32]int64{}
			}
			tp.next[r.Topic][r.Partition] = r.Offset + 1
			out = append(out, r)
		})
	}
	return out, nil
}

func (tp *topics) read(ctx context.Context) ([]relay.Message, error) {
	rs, err := tp.records(ctx)
	out := make([]relay.Message, len(rs))
	for i, r := range rs {
		m := relay.Message{Topic: r.Topic, Key: string(r.Key), Payload: r.Value, Headers: make(map[string]string, len(r.Headers))}
		for _, h := range r.Headers {
			if v, dup := m.Headers[h.Key]; dup {
				m.Headers[h.Key] = v + ", " + string(h.Value) // shows as a mismatch
				continue
			}
			m.Headers[h.Key] = string(h.Value)
		}
		m.ID = m.Headers[relay.HeaderEventID] // Kafka records have no id of their own
		out[i] = m
	}
	return out, err
}

// quick makes a client give up on a missing topic within milliseconds
// rather than seconds (franz-go waits MetadataMinAge, 5 s by default,
// between metadata loads).
var quick = []kgo.Opt{kgo.MetadataMinAge(20 * time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond })}

func newSink(t testing.TB, cfg outboxkafka.Config) *outboxkafka.Sink {
	t.Helper()
	s, err := outboxkafka.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestSuite(t *testing.T) {
	c := startCluster(t)
	events := 2000
	if testing.Short() {
		events = 500
	}
	relaytest.Run(t, func(t *testing.T) relaytest.Fixture {
		tp := newTopics(t, c)
		sink := newSink(t, outboxkafka.Config{Brokers: c.addrs(), Options: quick, Topic: tp.topic, PublishTimeout: 2 * time.Second})
		return relaytest.Fixture{
			Sink: sink, Broker: relay.Kafka, Topic: tp.topic, Read: tp.read, Keys: true,
			Down:         func(*testing.T) { c.stop() },
			Up:           func(t *testing.T) { c.start(t) },
			OutageEvents: events,
		}
	})
}

// TestSuiteOnApplicationClient runs the cases without an outage with a
// client the application made, signing the records.
func TestSuiteOnApplicationClient(t *testing.T) {
	c := startCluster(t)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addrs()...)}, quick...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	relaytest.Run(t, func(t *testing.T) relaytest.Fixture {
		tp := newTopics(t, c)
		sink := newSink(t, outboxkafka.Config{Client: cl, Topic: tp.topic, SigningKey: key})
		return relaytest.Fixture{Sink: sink, Broker: relay.Kafka, Topic: tp.topic, SigningKey: key, Read: tp.read, Keys: true}
	})
}

func event(t *testing.T, typ, aggregate string) outbox.Envelope {
	t.Helper()
	opts := []outbox.EnvelopeOption{outbox.WithJSON([]byte(`{}`))}
	if aggregate != "" {
		opts = append(opts, outbox.WithAggregate(outbox.AggregateName("Order"), aggregate))
	}
	e, err := outbox.NewEnvelope(outbox.EventName(typ), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestOrderPerAggregate: the events of one aggregate, handed over one
// after the other, are in one partition in that order.
func TestOrderPerAggregate(t *testing.T) {
	c := startCluster(t)
	tp := newTopics(t, c)
	sink := newSink(t, outboxkafka.Config{Brokers: c.addrs(), Topic: func(outbox.Envelope) (string, error) { return tp.names[0], nil }})
	want := map[string][]string{}
	for i := range 200 {
		agg := fmt.Sprintf("o-%d", i%8)
		e := event(t, relaytest.OrderPlaced, agg)
		if err := sink.Handle(context.Background(), e); err != nil {
			t.Fatal(err)
		}
		want[e.OrderingKey()] = append(want[e.OrderingKey()], e.ID()) // the record key
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := tp.records(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	partition := map[string]int32{}
	partitions := map[int32]bool{}
	for _, r := range rs {
		agg := string(r.Key)
		if p, seen := partition[agg]; seen && p != r.Partition {
			t.Errorf("aggregate %s in partitions %d and %d", agg, p, r.Partition)
		}
		partition[agg] = r.Partition
		partitions[r.Partition] = true
		for _, h := range r.Headers {
			if h.Key == relay.HeaderEventID {
				got[agg] = append(got[agg], string(h.Value))
			}
		}
	}
	for agg, ids := range want {
		if strings.Join(got[agg], " ") != strings.Join(ids, " ") {
			t.Errorf("aggregate %s: events in the partition %v, handed over %v", agg, got[agg], ids)
		}
	}
	if len(partitions) < 2 {
		t.Errorf("8 aggregates share %d partition(s) of 4", len(partitions))
	}
}

func TestConfig(t *testing.T) {
	c := startCluster(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	notIdempotent, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()))
	if err != nil {
		t.Fatal(err)
	}
	defer notIdempotent.Close()
	for name, cfg := range map[string]outboxkafka.Config{
		"neither Brokers nor Client": {},
		"both Brokers and Client":    {Brokers: c.addrs(), Client: cl},
		"Options with Client":        {Client: cl, Options: []kgo.Opt{kgo.ProducerLinger(0)}},
		"negative PublishTimeout":    {Client: cl, PublishTimeout: -time.Second},
		"short SigningKey":           {Client: cl, SigningKey: key[:31]},
		"client not idempotent":      {Client: notIdempotent},
		"own client not idempotent":  {Brokers: c.addrs(), Options: []kgo.Opt{kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck())}},
		"own client transactional":   {Brokers: c.addrs(), Options: []kgo.Opt{kgo.TransactionalID("x")}},
		"options the client refuses": {Brokers: c.addrs(), Options: []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck())}},
	} {
		if _, err := outboxkafka.New(cfg); !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
}

// TestClose: Close closes the client the sink made, never the
// application's; after Close, Handle fails with ErrClosed.
func TestClose(t *testing.T) {
	c := startCluster(t)
	tp := newTopics(t, c)
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	borrowed, err := outboxkafka.New(outboxkafka.Config{Client: cl, Topic: tp.topic})
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(borrowed.Close(), borrowed.Close()); err != nil {
		t.Fatal(err)
	}
	if err := borrowed.Handle(ctx, event(t, relaytest.OrderPlaced, "o-1")); !errors.Is(err, outbox.ErrClosed) {
		t.Errorf("Handle after Close: %v, want ErrClosed", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: tp.names[0], Value: []byte("x")}).FirstErr(); err != nil {
		t.Errorf("the application's client after the sink's Close: %v", err)
	}
	owned, err := outboxkafka.New(outboxkafka.Config{Brokers: c.addrs(), Topic: tp.topic})
	if err != nil {
		t.Fatal(err)
	}
	if err := owned.Handle(ctx, event(t, relaytest.OrderPlaced, "o-1")); err != nil {
		t.Fatal(err)
	}
	if err := owned.Close(); err != nil {
		t.Fatal(err)
	}
}

// key is the signing key of the fixtures that sign.
var key = []byte("0123456789abcdef0123456789abcdef")

// record is outboxkafka.Record without a signing key, failing the test on
// an error.
func record(t *testing.T, e outbox.Envelope, topic relay.Topic) *kgo.Record {
	t.Helper()
	r, err := outboxkafka.Record(e, topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRecord: the record of an event, as a raw producer would send it.
func TestRecord(t *testing.T) {
	e := event(t, relaytest.OrderPlaced, "o-1")
	r := record(t, e, relay.Prefixed("orders."))
	if r.Topic != "orders.OrderPlaced" || string(r.Key) != "Order/o-1" || string(r.Value) != "{}" {
		t.Errorf("record %+v", r)
	}
	keyed := record(t, outbox.MustEnvelope(outbox.EventName(relaytest.OrderPlaced), outbox.WithAggregate(outbox.AggregateName("Order"), "o-1"),
		outbox.WithOrderingKey("customer-7"), outbox.WithJSON([]byte(`{}`))), nil)
	if string(keyed.Key) != "customer-7" {
		t.Errorf("record key %q, want the ordering key customer-7", keyed.Key)
	}
	for i := 1; i < len(r.Headers); i++ {
		if r.Headers[i-1].Key >= r.Headers[i].Key {
			t.Errorf("headers not sorted: %v", r.Headers)
		}
	}
	if g := record(t, event(t, relaytest.OrderPlaced, ""), nil); g.Key != nil || g.Topic != relaytest.OrderPlaced {
		t.Errorf("global event: key %q topic %q, want no key", g.Key, g.Topic)
	}
	if _, err := outboxkafka.Record(e, relay.Prefixed("orders/"), nil); !errors.Is(err, relay.ErrInvalidMessage) {
		t.Errorf("a topic name outside Kafka's syntax: %v, want relay.ErrInvalidMessage", err)
	}
}
