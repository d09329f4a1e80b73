package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/relay"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMain makes the test binary the harness too: started with -role
// first, as the harness starts its child processes (the broker of -relay
// kafka is os.Executable() with -role kfake, see kafkaServer.run), it runs
// main.
//
// Started with kafkaMemberArg, broker address and run, it is a worker's
// consumer of -relay kafka alone (worker 0, applying nothing), until it is
// killed: TestKafkaRestartedWorkerTakesItsPlace's worker process.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-role" {
		main()
		os.Exit(0)
	}
	if len(os.Args) == 4 && os.Args[1] == kafkaMemberArg {
		bc, err := dialKafka(context.Background(), os.Args[2], os.Args[3], 0)
		if err == nil {
			err = bc.consume(context.Background(), func(context.Context, string, []byte) error { return nil })
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// kafkaMemberArg starts the test binary as a worker's consumer (see
// TestMain).
const kafkaMemberArg = "-kafka-member"

// startKafkaTest starts the broker of a run named run and closes it at the
// end of the test.
func startKafkaTest(t *testing.T, ctx context.Context, run string) *kafkaServer {
	t.Helper()
	srv, err := relayBrokers["kafka"].start(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.close(context.Background()) })
	return srv.(*kafkaServer)
}

// TestKafkaKillKeepsAcknowledged: the records the broker acknowledged
// (acks=all) before a fault are all there after it, once each.
func TestKafkaKillKeepsAcknowledged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := startKafkaTest(t, ctx, "kill-keeps")
	const n = 200
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.url()), kgo.DefaultProduceTopic(srv.topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Key: []byte(strconv.Itoa(i % 7)), Value: []byte(strconv.Itoa(i))}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	what, err := srv.fault(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(what)
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, srv.topic)
	if err = errors.Join(err, ends.Error()); err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != n {
		t.Fatalf("after the fault the topic holds %d records, want the %d acknowledged", total, n)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(srv.url()), kgo.ConsumeTopics(srv.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	for len(seen) < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of the %d records back: %v", len(seen), n, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
}

// TestKafkaRelay: two workers publish through their sinks and consume in
// the run's group while the broker is killed and restarted twice; every
// event is applied (the first apply of every tenth fails, and it comes
// again), with its payload, records without one event id are skipped and
// committed, and close leaves nothing running.
func TestKafkaRelay(t *testing.T) {
	noLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := startKafkaTest(t, ctx, "relay-test")
	const n = 500
	events := make([]outbox.Envelope, n)
	payloads := map[string]string{}
	failFirst := map[string]bool{}
	for i := range events {
		p := fmt.Sprintf(`{"n":%d}`, i)
		events[i] = outbox.MustEnvelope(outbox.EventName("TortureRelay"),
			outbox.WithAggregate(outbox.AggregateName("Agg"), strconv.Itoa(i%13)), outbox.WithJSON([]byte(p)))
		payloads[events[i].ID()] = p
		failFirst[events[i].ID()] = i%10 == 0
	}

	var mu sync.Mutex
	applied := map[string]int{}
	failed := map[string]bool{}
	var wrong []string
	apply := func(_ context.Context, id string, payload []byte) error {
		mu.Lock()
		defer mu.Unlock()
		if p, ok := payloads[id]; !ok || p != string(payload) {
			wrong = append(wrong, fmt.Sprintf("%q: %q", id, payload))
			return nil
		}
		if failFirst[id] && !failed[id] {
			failed[id] = true
			return errors.New("first apply fails")
		}
		applied[id]++
		return nil
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(applied)
	}

	consCtx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	var clients [2]brokerClient
	var consumers sync.WaitGroup
	consumeErrs := make(chan error, len(clients))
	for i := range clients {
		c, err := relayBrokers["kafka"].dial(ctx, srv.url(), "relay-test", i)
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
		consumers.Go(func() { consumeErrs <- c.consume(consCtx, apply) })
	}
	closeClients := func() {
		stopConsumers()
		consumers.Wait()
		for _, c := range clients {
			if err := c.close(); err != nil {
				t.Error(err)
			}
		}
	}
	defer func() {
		if clients[0] != nil {
			closeClients()
		}
	}()

	// Hostile records: no event id, two of them.
	raw, err := kgo.NewClient(kgo.SeedBrokers(srv.url()), kgo.DefaultProduceTopic(srv.topic))
	if err != nil {
		t.Fatal(err)
	}
	err = raw.ProduceSync(ctx, &kgo.Record{Value: []byte("no id")},
		&kgo.Record{Value: []byte("two ids"), Headers: []kgo.RecordHeader{{Key: relay.HeaderEventID, Value: []byte("a")}, {Key: relay.HeaderEventID, Value: []byte("b")}}}).FirstErr()
	raw.Close()
	if err != nil {
		t.Fatal(err)
	}

	// Two publishers, one per worker, each retrying an event until its
	// sink takes it, as the outbox would; the broker fails at a third and
	// two thirds of the events.
	var published, retries atomic.Int64
	var publishers sync.WaitGroup
	for w, c := range clients {
		publishers.Go(func() {
			for i := w; i < n; i += len(clients) {
				for c.sink().Handle(ctx, events[i]) != nil && ctx.Err() == nil {
					retries.Add(1)
					time.Sleep(20 * time.Millisecond)
				}
				published.Add(1)
			}
		})
	}
	for _, at := range []int64{n / 3, 2 * n / 3} {
		for published.Load() < at && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		what, err := srv.fault(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(what)
	}
	publishers.Wait()
	if ctx.Err() != nil {
		t.Fatalf("published %d of %d events: %v", published.Load(), n, ctx.Err())
	}

	for count() < n && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	// Both workers are members of the group again, and every record is
	// committed in the end, those without one id too.
	adm := kadm.NewClient(srv.cl)
	lag, members := int64(-1), 0
	for (lag != 0 || members != len(clients)) && ctx.Err() == nil {
		if lag, err = uncommitted(ctx, adm, srv.topic); err != nil {
			lag = -1
		}
		members = 0
		if gs, err := adm.DescribeGroups(ctx, srv.topic); err == nil && gs[srv.topic].State == "Stable" {
			members = len(gs[srv.topic].Members)
		}
		time.Sleep(20 * time.Millisecond)
	}
	closeClients()
	clients[0] = nil
	close(consumeErrs)
	for err := range consumeErrs {
		if err != nil {
			t.Errorf("consume: %v", err)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	dups := 0
	for _, e := range events {
		if applied[e.ID()] == 0 {
			t.Errorf("event %s was never applied", e.ID())
		} else {
			dups += applied[e.ID()] - 1
		}
		if failFirst[e.ID()] && !failed[e.ID()] {
			t.Errorf("event %s: its failing first apply was never called", e.ID())
		}
	}
	if len(wrong) > 0 {
		t.Errorf("applied records that were not published: %v", wrong)
	}
	if lag != 0 {
		t.Errorf("records left uncommitted: %d (-1: unknown)", lag)
	}
	if members != len(clients) {
		t.Errorf("the group has %d members in a stable state, want %d", members, len(clients))
	}
	t.Logf("%d events, applied %d, duplicates %d, failed publishes retried %d", n, len(applied), dups, retries.Load())

	dir, addr, proc := srv.dir, srv.url(), srv.proc
	if err := srv.close(ctx); err != nil {
		t.Fatal(err)
	}
	if proc.ProcessState == nil {
		t.Error("the broker process still runs after close")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the broker's directory is still there after close: %v", err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("something still listens on %s after close", addr)
	}
}

// TestKafkaRestartedWorkerTakesItsPlace: a worker whose process died
// (SIGKILL: it does not leave the group) and that the coordinator started
// again takes its predecessor's place in the run's group, so that the
// group never waits for the dead member: it never holds the two at once,
// and the new process consumes what is produced after the kill.
func TestKafkaRestartedWorkerTakesItsPlace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const run = "restarted-worker"
	srv := startKafkaTest(t, ctx, run)
	adm := kadm.NewClient(srv.cl)
	// group returns the group's state and members, "" while it cannot
	// be described.
	group := func() (string, []kadm.DescribedGroupMember) {
		gs, err := adm.DescribeGroups(ctx, srv.topic)
		if err != nil || gs[srv.topic].Err != nil {
			return "", nil
		}
		return gs[srv.topic].State, gs[srv.topic].Members
	}

	// Worker 0's first process: a member of the group with every
	// partition, then killed.
	cmd := exec.Command(os.Args[0], kafkaMemberArg, srv.url(), run)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	dieWithHarness(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	for {
		state, members := group()
		if state == "Stable" && len(members) == 1 && assigned(members[0]) == kafkaPartitions {
			break
		}
		select {
		case <-exited:
			t.Fatalf("worker 0's first process ended: %s", stderr.String())
		case <-ctx.Done():
			t.Fatalf("worker 0's first process never had the topic's partitions: %v", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	_ = cmd.Process.Kill()
	<-exited

	// Its second process.
	bc, err := relayBrokers["kafka"].dial(ctx, srv.url(), run, 0)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	applied := map[string]bool{}
	consCtx, stop := context.WithCancel(ctx)
	consumed := make(chan error, 1)
	go func() {
		consumed <- bc.consume(consCtx, func(_ context.Context, id string, _ []byte) error {
			mu.Lock()
			defer mu.Unlock()
			applied[id] = true
			return nil
		})
	}()
	defer func() {
		stop()
		if err := <-consumed; err != nil {
			t.Error(err)
		}
		if err := bc.close(); err != nil {
			t.Error(err)
		}
	}()
	const n = 20
	for i := range n {
		e := outbox.MustEnvelope(outbox.EventName("TortureRestart"),
			outbox.WithAggregate(outbox.AggregateName("Agg"), strconv.Itoa(i)), outbox.WithJSON([]byte(`{}`)))
		if err := bc.sink().Handle(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	for {
		if _, members := group(); len(members) > 1 {
			t.Fatalf("the group holds %d members, the dead process's beside its successor's: %+v", len(members), members)
		}
		mu.Lock()
		got := len(applied)
		mu.Unlock()
		if got == n {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the restarted worker applied %d of the %d records produced after the kill: %v", got, n, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestKafkaAudit: the broker's audit finds an event's record past the
// group's committed offset, one before it, and none for an event it does
// not have.
func TestKafkaAudit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := startKafkaTest(t, ctx, "audit")
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.url()), kgo.DefaultProduceTopic(srv.topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for _, id := range []string{"skipped", "unconsumed", "other"} {
		rs = append(rs, &kgo.Record{Partition: 1, Headers: []kgo.RecordHeader{{Key: relay.HeaderEventID, Value: []byte(id)}}})
	}
	rs = append(rs, &kgo.Record{Partition: 1, Value: []byte("no id")})
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var commit kadm.Offsets
	commit.Add(kadm.Offset{Topic: srv.topic, Partition: 1, At: 1, LeaderEpoch: -1})
	if err := kadm.NewClient(cl).CommitAllOffsets(ctx, srv.topic, commit); err != nil {
		t.Fatal(err)
	}
	got, err := srv.audit(ctx, map[string]bool{"skipped": true, "unconsumed": true, "lost": true})
	if err != nil {
		t.Fatal(err)
	}
	want := "the topic has 1 of them at or past their partition's committed offset (never consumed), 1 before it (committed without being applied), 1 not at all (acknowledged, yet not in the topic); committed/end offsets by partition: 0: 0/0, 1: 1/4, 2: 0/0, 3: 0/0"
	if got != want {
		t.Errorf("audit:\n got %s\nwant %s", got, want)
	}
}

// assigned returns how many partitions m is assigned, 0 if its assignment
// cannot be read.
func assigned(m kadm.DescribedGroupMember) int {
	a, ok := m.Assigned.AsConsumer()
	if !ok {
		return 0
	}
	n := 0
	for _, t := range a.Topics {
		n += len(t.Partitions)
	}
	return n
}

// uncommitted returns how many records of topic the run's group has not
// committed.
func uncommitted(ctx context.Context, adm *kadm.Client, topic string) (int64, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err = errors.Join(err, ends.Error()); err != nil {
		return 0, err
	}
	committed, err := adm.FetchOffsets(ctx, topic)
	if err = errors.Join(err, committed.Error()); err != nil {
		return 0, err
	}
	var lag int64
	ends.Each(func(o kadm.ListedOffset) {
		at := int64(0)
		if c, ok := committed.Lookup(o.Topic, o.Partition); ok {
			at = c.At
		}
		lag += o.Offset - at
	})
	return lag, nil
}

// TestKafkaEventID: a record's event id is its one non-empty
// Outbox-Event-Id header; anything else has none.
func TestKafkaEventID(t *testing.T) {
	h := func(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }
	for _, tc := range []struct {
		name    string
		headers []kgo.RecordHeader
		want    string
		ok      bool
	}{
		{"one", []kgo.RecordHeader{h("traceparent", "x"), h(relay.HeaderEventID, "01J0")}, "01J0", true},
		{"none", nil, "", false},
		{"empty", []kgo.RecordHeader{h(relay.HeaderEventID, "")}, "", false},
		{"two", []kgo.RecordHeader{h(relay.HeaderEventID, "a"), h(relay.HeaderEventID, "a")}, "", false},
		{"other case", []kgo.RecordHeader{h("outbox-event-id", "a")}, "", false},
	} {
		id, ok := kafkaEventID(&kgo.Record{Headers: tc.headers})
		if ok != tc.ok || (ok && id != tc.want) {
			t.Errorf("%s: got %q, %v; want %q, %v", tc.name, id, ok, tc.want, tc.ok)
		}
	}
}
