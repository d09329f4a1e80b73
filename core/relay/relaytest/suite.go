package relaytest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
	"github.com/go-outbox/outbox/core/relay"
)

// Event types of the events the suite publishes. A fixture's Topic maps
// each of them to a topic whose messages its Read returns, and RefusedType
// to a topic the broker refuses.
const (
	OrderPlaced   = "OrderPlaced"
	OrderShipped  = "OrderShipped"
	InvoiceIssued = "InvoiceIssued"
	// RefusedType is the event type of the events the broker must refuse:
	// the fixture's Topic maps it to a subject no stream captures, a
	// routing key no queue is bound to, a topic that does not exist.
	RefusedType = "Refused"
)

// EventTypes returns the event types the suite publishes, RefusedType
// aside: a fixture whose broker needs its topics made beforehand makes
// these.
func EventTypes() []string { return []string{OrderPlaced, OrderShipped, InvoiceIssued} }

// DefaultOutageEvents is how many events the outage case relays when the
// fixture does not say.
const DefaultOutageEvents = 1000

// EnvOutageEvents names the environment variable that, set to a positive
// number, overrides Fixture.OutageEvents: OUTBOX_TEST_OUTAGE_EVENTS=10000
// runs the outage case at the size of the acceptance runs.
const EnvOutageEvents = "OUTBOX_TEST_OUTAGE_EVENTS"

// outageHold is how long the outage case keeps the broker away at least.
const outageHold = 2 * time.Second

// waitTimeout bounds every wait of the suite for something that must
// happen; it is a guard against a hung test, not a measure of speed.
const waitTimeout = 60 * time.Second

// Fixture is one sink under test on its own topics. Factories must return
// a fixture whose topics no other fixture uses; the suite calls the
// factory once per case and runs the cases one after the other.
type Fixture struct {
	// Sink is the sink under test, built with Topic.
	Sink outbox.Listener
	// Broker is the broker whose messages the sink builds
	// (relay.NATS, …): the suite expects its messages.
	Broker relay.Broker
	// Topic is the topic mapping Sink was built with (nil means
	// relay.ByEventType). It maps every type of EventTypes to a topic
	// whose messages Read returns, for events without a tenant and for
	// events of the tenant Tenant (TenantTopic is such a mapping), and
	// RefusedType to a topic the broker refuses.
	Topic relay.Topic
	// SigningKey is the key Sink signs its messages with, nil if none:
	// the suite then checks every message's signature with relay.Verify.
	SigningKey []byte
	// Read returns the messages the broker stored on the fixture's topics
	// that an earlier Read did not return. It must return at least every
	// message whose publish the broker had acknowledged when Read was
	// called. Message.ID comes from the broker's own message-id field
	// where it has one, else from the HeaderEventID header; Topic is where
	// the broker stored the message (subject, routing key, topic); Key is
	// the broker's record key ("" where it has none); Headers are the
	// message's headers less those the broker itself adds (such as
	// Nats-Msg-Id).
	Read func(ctx context.Context) ([]relay.Message, error)
	// Keys reports that the broker stores a key per message (Kafka): the
	// suite then checks that it is the aggregate id.
	Keys bool
	// Dedupes reports that the broker drops a message whose id it has
	// stored already (the duplicate window of NATS JetStream): the suite
	// then checks that a redelivered event is stored once, also across an
	// outage.
	Dedupes bool
	// Down takes the broker away from the sink (stops the server, cuts the
	// connection); Up brings it back with what it had stored. Both nil
	// skips the outage cases.
	Down, Up func(t *testing.T)
	// OutageEvents is how many events the outage case relays through an
	// outbox Client (default DefaultOutageEvents; EnvOutageEvents
	// overrides it).
	OutageEvents int
}

func (f *Fixture) check(t *testing.T) {
	t.Helper()
	if f.Sink == nil || f.Read == nil {
		t.Fatal("relaytest: the fixture needs a Sink and a Read")
	}
	if (f.Down == nil) != (f.Up == nil) {
		t.Fatal("relaytest: the fixture needs both Down and Up, or neither")
	}
	if f.Topic == nil {
		f.Topic = relay.ByEventType
	}
	if n, err := strconv.Atoi(os.Getenv(EnvOutageEvents)); err == nil && n > 0 {
		f.OutageEvents = n
	}
	if f.OutageEvents <= 0 {
		f.OutageEvents = DefaultOutageEvents
	}
}

// Run runs every case of the suite, each on a fixture of its own from
// newFixture.
func Run(t *testing.T, newFixture func(t *testing.T) Fixture) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(t *testing.T, f Fixture)
	}{
		{"Publish", testPublish},
		{"Redelivery", testRedelivery},
		{"Refused", testRefused},
		{"Batch", testBatch},
		{"Hostile", testHostile},
		{"Cancelled", testCancelled},
		{"BrokerDown", testBrokerDown},
		{"Outage", testOutage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.check(t)
			c.fn(t, f)
		})
	}
}

// newEvent builds an event of type typ, failing the test on an error.
func newEvent(t *testing.T, typ string, opts ...outbox.EnvelopeOption) outbox.Envelope {
	t.Helper()
	e, err := outbox.NewEnvelope(outbox.EventName(typ), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func order(id string) outbox.EnvelopeOption {
	return outbox.WithAggregate(outbox.AggregateName("Order"), id)
}

// sampleEvents returns events that exercise every part of a message.
func sampleEvents(t *testing.T) []outbox.Envelope {
	t.Helper()
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	events := []outbox.Envelope{
		newEvent(t, OrderPlaced, order("o-1"), outbox.WithTenant("acme"),
			outbox.WithOccurredAt(time.Date(2026, 3, 4, 5, 6, 7, 891011121, time.FixedZone("UTC+9", 9*3600))),
			outbox.WithHeader("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
			outbox.WithHeader("X-Mixed-Case", "a value; with=punctuation, spaces"),
			outbox.WithJSON([]byte(`{"total":1200,"note":"crème brûlée ✓"}`))),
		newEvent(t, OrderShipped, order("o-1"), outbox.WithBytes(binary)),
		newEvent(t, InvoiceIssued, outbox.WithJSON([]byte(`{"global":true}`))),
		newEvent(t, OrderPlaced, order("o-2"),
			outbox.WithHeader(relay.HeaderContentType, "application/vnd.acme.order+json"),
			outbox.WithJSON([]byte(`{"total":1}`))),
	}
	types := EventTypes()
	for i := range 20 {
		events = append(events, newEvent(t, types[i%len(types)], order(fmt.Sprintf("o-%d", i%5)),
			outbox.WithJSON(fmt.Appendf(nil, `{"n":%d}`, i))))
	}
	return events
}

func ids(events []outbox.Envelope) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.ID()
	}
	return out
}

// reader accumulates what the fixture's Read returns.
type reader struct {
	f    Fixture
	byID map[string][]relay.Message
}

func newReader(f Fixture) *reader { return &reader{f: f, byID: make(map[string][]relay.Message)} }

func (r *reader) read(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	msgs, err := r.f.Read(ctx)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	for _, m := range msgs {
		r.byID[m.ID] = append(r.byID[m.ID], m)
	}
}

// waitFor reads until every id has at least n messages, then reads once
// more to pick up whatever else the broker acknowledged meanwhile. It
// fails the test if that does not happen within waitTimeout.
func (r *reader) waitFor(t *testing.T, ids []string, n int) {
	t.Helper()
	if missing := r.tryWait(t, ids, n); len(missing) > 0 {
		t.Fatalf("after %v, %d of %d events have fewer than %d messages on the broker, such as %v",
			waitTimeout, len(missing), len(ids), n, missing[:min(len(missing), 5)])
	}
}

// tryWait is waitFor that returns the ids still short of n messages after
// waitTimeout instead of failing.
func (r *reader) tryWait(t *testing.T, ids []string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		r.read(t)
		var missing []string
		for _, id := range ids {
			if len(r.byID[id]) < n {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 {
			r.read(t)
			return nil
		}
		if time.Now().After(deadline) {
			return missing
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// once waits for the messages of events and checks that each event is on
// the broker exactly once, as the message it must be.
func (r *reader) once(t *testing.T, events []outbox.Envelope) {
	t.Helper()
	r.waitFor(t, ids(events), 1)
	for _, e := range events {
		got := r.byID[e.ID()]
		if len(got) != 1 {
			t.Errorf("event %s: %d messages on the broker, want 1", e.ID(), len(got))
			continue
		}
		compare(t, r.f, got[0], e)
	}
}

// compare reports how got differs from the message f.Broker.Message makes.
func compare(t *testing.T, f Fixture, got relay.Message, e outbox.Envelope) {
	t.Helper()
	want, err := f.Broker.Message(e, f.Topic, f.SigningKey)
	if err != nil {
		t.Errorf("event %s: %v", e.ID(), err)
		return
	}
	if f.SigningKey != nil {
		if err := relay.Verify([][]byte{f.SigningKey}, got.Headers, got.Payload); err != nil {
			t.Errorf("event %s: %v", e.ID(), err)
		}
	}
	if got.ID != want.ID {
		t.Errorf("event %s: message id %q", e.ID(), got.ID)
	}
	if got.Topic != want.Topic {
		t.Errorf("event %s: topic %q, want %q", e.ID(), got.Topic, want.Topic)
	}
	if f.Keys && got.Key != want.Key {
		t.Errorf("event %s: key %q, want %q", e.ID(), got.Key, want.Key)
	}
	if !maps.Equal(got.Headers, want.Headers) {
		for _, k := range slices.Sorted(maps.Keys(want.Headers)) {
			if v, ok := got.Headers[k]; !ok || v != want.Headers[k] {
				t.Errorf("event %s: header %s = %q (present %v), want %q", e.ID(), k, v, ok, want.Headers[k])
			}
		}
		for _, k := range slices.Sorted(maps.Keys(got.Headers)) {
			if _, ok := want.Headers[k]; !ok {
				t.Errorf("event %s: unexpected header %s = %q", e.ID(), k, got.Headers[k])
			}
		}
	}
	if !bytes.Equal(got.Payload, want.Payload) {
		t.Errorf("event %s: payload %q, want %q", e.ID(), got.Payload, want.Payload)
	}
}

// handleAll hands every event to the sink from four goroutines, as the
// Client's workers do, and returns each event's error.
func handleAll(ctx context.Context, l outbox.Listener, events []outbox.Envelope) []error {
	errs := make([]error, len(events))
	next := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = l.Handle(ctx, events[i])
			}
		}()
	}
	for i := range events {
		next <- i
	}
	close(next)
	wg.Wait()
	return errs
}

// topic returns e's topic by f.Topic, "" if it fails.
func topic(f Fixture, e outbox.Envelope) string {
	t, _ := f.Topic(e)
	return t
}

// testPublish: every event becomes exactly the message Broker.Message
// describes, once.
func testPublish(t *testing.T, f Fixture) {
	events := sampleEvents(t)
	for i, err := range handleAll(context.Background(), f.Sink, events) {
		if err != nil {
			t.Errorf("Handle(%s %s): %v", events[i].Type(), events[i].ID(), err)
		}
	}
	if t.Failed() {
		return
	}
	r := newReader(f)
	r.once(t, events)
	for id, msgs := range r.byID {
		if !slices.Contains(ids(events), id) {
			t.Errorf("unexpected message id %q on the broker (%d messages)", id, len(msgs))
		}
	}
}

// testRedelivery: a second delivery of an event is dropped by a
// deduplicating broker, and otherwise stored with the same id.
func testRedelivery(t *testing.T, f Fixture) {
	ctx := context.Background()
	e := newEvent(t, OrderPlaced, order("o-redelivered"), outbox.WithJSON([]byte(`{"n":1}`)))
	for i := range 2 {
		if err := f.Sink.Handle(ctx, e); err != nil {
			t.Fatalf("delivery %d: %v", i+1, err)
		}
	}
	want := 2
	if f.Dedupes {
		want = 1
	}
	r := newReader(f)
	r.waitFor(t, []string{e.ID()}, want)
	got := r.byID[e.ID()]
	if len(got) != want {
		t.Fatalf("two deliveries of event %s left %d messages on the broker, want %d (Dedupes: %v)", e.ID(), len(got), want, f.Dedupes)
	}
	for _, m := range got {
		compare(t, f, m, e)
	}
}

// testRefused: an event the broker refuses is an error naming its topic,
// for that event only, and through a Client it ends DEAD, never DONE,
// while the events beside it are relayed.
func testRefused(t *testing.T, f Fixture) {
	ctx := context.Background()
	bad := newEvent(t, RefusedType, order("o-refused"), outbox.WithJSON([]byte(`{}`)))
	err := f.Sink.Handle(ctx, bad)
	if err == nil {
		t.Fatalf("Handle of an event for %q, which the broker refuses, returned nil", topic(f, bad))
	}
	t.Logf("refused: %v", err)
	if want := topic(f, bad); !strings.Contains(err.Error(), want) {
		t.Errorf("the error does not name the topic %q: %v", want, err)
	}

	store := outboxmem.New()
	client := newClient(t, store, 2)
	if err := client.HandleAll(f.Sink); err != nil {
		t.Fatal(err)
	}
	start(t, client)
	good := []outbox.Envelope{
		newEvent(t, OrderPlaced, order("o-r1"), outbox.WithJSON([]byte(`{}`))),
		newEvent(t, InvoiceIssued, order("o-r2"), outbox.WithJSON([]byte(`{}`))),
	}
	bad = newEvent(t, RefusedType, order("o-r3"), outbox.WithJSON([]byte(`{}`)))
	write(t, store, client, good[0], bad, good[1])
	waitStatus(t, client, ids(good), outbox.StatusDone)
	waitStatus(t, client, []string{bad.ID()}, outbox.StatusDead)
	rec, err := client.Get(ctx, bad.ID())
	if err != nil {
		t.Fatal(err)
	}
	if rec.LastError == "" || rec.Attempts != 2 {
		t.Errorf("refused event: %d attempts, last error %q; want 2 attempts and the broker's refusal", rec.Attempts, rec.LastError)
	}
	r := newReader(f)
	r.waitFor(t, ids(good), 1)
	if n := len(r.byID[bad.ID()]); n != 0 {
		t.Errorf("the refused event is on the broker %d times", n)
	}
}

// testBatch: in a batch (HandleBatch) the events the broker refuses fail
// on their own: every other event of the batch is nil and on the broker
// once. Through a Client, whose one worker hands the backlog over in
// batches, the refused events are RETRY and the others DONE.
func testBatch(t *testing.T, f Fixture) {
	bl, ok := f.Sink.(outbox.BatchListener)
	if !ok {
		t.Skip("the sink is not an outbox.BatchListener")
	}
	mixed := func(tag string) (all, good, bad []outbox.Envelope) {
		types := EventTypes()
		for i := range 12 {
			typ := types[i%len(types)]
			if i%4 == 1 {
				typ = RefusedType
			}
			e := newEvent(t, typ, order(fmt.Sprintf("o-%s%d", tag, i%3)), outbox.WithJSON(fmt.Appendf(nil, `{"n":%d}`, i)))
			all = append(all, e)
			if typ == RefusedType {
				bad = append(bad, e)
			} else {
				good = append(good, e)
			}
		}
		return all, good, bad
	}
	events, good, bad := mixed("b")
	errs := bl.HandleBatch(context.Background(), events)
	if len(errs) != len(events) {
		t.Fatalf("HandleBatch of %d events returned %d results", len(events), len(errs))
	}
	for i, e := range events {
		refused := e.Type() == RefusedType
		switch {
		case refused && errs[i] == nil:
			t.Errorf("event %d, for %q, which the broker refuses: nil", i, topic(f, e))
		case refused && !strings.Contains(errs[i].Error(), topic(f, e)):
			t.Errorf("event %d: the error does not name the topic %q: %v", i, topic(f, e), errs[i])
		case !refused && errs[i] != nil:
			t.Errorf("event %d, beside the refused ones: %v", i, errs[i])
		}
	}

	store := outboxmem.New()
	client := newClient(t, store, 1000, func(c *outbox.Config) { c.Workers = 1 })
	if err := client.HandleAll(f.Sink); err != nil {
		t.Fatal(err)
	}
	relayed, goodRelayed, badRelayed := mixed("c")
	write(t, store, client, relayed...) // before Start: one backlog, claimed at once
	start(t, client)
	waitStatus(t, client, ids(goodRelayed), outbox.StatusDone)
	waitStatus(t, client, ids(badRelayed), outbox.StatusRetry)

	r := newReader(f)
	r.once(t, append(good, goodRelayed...))
	for _, e := range append(bad, badRelayed...) {
		if n := len(r.byID[e.ID()]); n != 0 {
			t.Errorf("refused event %s is on the broker %d times", e.ID(), n)
		}
	}
}

// testCancelled: a cancelled or expired context fails Handle with the
// context's error, and the event is not published.
func testCancelled(t *testing.T, f Fixture) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	e1 := newEvent(t, OrderPlaced, order("o-c1"), outbox.WithJSON([]byte(`{}`)))
	e2 := newEvent(t, OrderPlaced, order("o-c2"), outbox.WithJSON([]byte(`{}`)))
	if err := f.Sink.Handle(cancelled, e1); !errors.Is(err, context.Canceled) {
		t.Errorf("Handle with a cancelled context: %v, want context.Canceled", err)
	}
	if err := f.Sink.Handle(expired, e2); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Handle with an expired context: %v, want context.DeadlineExceeded", err)
	}
	// A message published after them is read after them, too.
	after := newEvent(t, OrderPlaced, order("o-c1"), outbox.WithJSON([]byte(`{}`)))
	if err := f.Sink.Handle(context.Background(), after); err != nil {
		t.Fatal(err)
	}
	r := newReader(f)
	r.waitFor(t, []string{after.ID()}, 1)
	for _, e := range []outbox.Envelope{e1, e2} {
		if n := len(r.byID[e.ID()]); n != 0 {
			t.Errorf("event %s handed over with a done context is on the broker %d times", e.ID(), n)
		}
	}
}

// handleBounded runs Handle and fails the test if it has not returned
// after waitTimeout: a sink must bound every publish.
func handleBounded(t *testing.T, ctx context.Context, l outbox.Listener, e outbox.Envelope, cancelAfter time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.Handle(ctx, e) }()
	if cancelAfter > 0 {
		time.Sleep(cancelAfter)
		cancel()
	}
	select {
	case err := <-done:
		return err
	case <-time.After(waitTimeout):
		t.Fatalf("Handle has not returned after %v with the broker down: the publish is not bounded", waitTimeout)
		return nil
	}
}

// testBrokerDown: with the broker away, Handle returns an error within its
// publish timeout (or when its context is cancelled), and once the broker
// is back the sink publishes again.
func testBrokerDown(t *testing.T, f Fixture) {
	if f.Down == nil {
		t.Skip("the fixture cannot take its broker down")
	}
	ctx := context.Background()
	first := newEvent(t, OrderPlaced, order("o-d1"), outbox.WithJSON([]byte(`{}`)))
	if err := f.Sink.Handle(ctx, first); err != nil {
		t.Fatal(err)
	}
	f.Down(t)
	down := newEvent(t, OrderPlaced, order("o-d2"), outbox.WithJSON([]byte(`{}`)))
	if err := handleBounded(t, ctx, f.Sink, down, 0); err == nil {
		t.Error("Handle returned nil with the broker down")
	} else {
		t.Logf("broker down: %v", err)
	}
	if err := handleBounded(t, ctx, f.Sink, down, 20*time.Millisecond); err == nil {
		t.Error("Handle, cancelled while the broker is down, returned nil")
	}
	f.Up(t)

	// The outbox retries a failed event; so does this loop.
	back := newEvent(t, OrderShipped, order("o-d1"), outbox.WithJSON([]byte(`{}`)))
	deadline := time.Now().Add(waitTimeout)
	for attempt := 1; ; attempt++ {
		err := f.Sink.Handle(ctx, back)
		if err == nil {
			t.Logf("published again at attempt %d", attempt)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sink did not publish again within %v of the broker's return: %v", waitTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := newReader(f)
	r.waitFor(t, []string{first.ID(), back.ID()}, 1)
	compare(t, f, r.byID[back.ID()][0], back)
}

// testOutage relays events through an outbox Client while the broker goes
// away mid-run: no event is DONE while the broker cannot have it, the
// outbox retries, and once the broker is back every event is on it.
func testOutage(t *testing.T, f Fixture) {
	if f.Down == nil {
		t.Skip("the fixture cannot take its broker down")
	}
	ctx := context.Background()
	store := outboxmem.New()
	client := newClient(t, store, 1000) // an outage must use up no event's attempts here
	if err := client.HandleAll(f.Sink); err != nil {
		t.Fatal(err)
	}
	start(t, client)
	began := time.Now()
	phase := func(what string) { t.Logf("%6.2fs %s", time.Since(began).Seconds(), what) }

	n := f.OutageEvents
	during := max(n/5, 1)
	types := EventTypes()
	events := make([]outbox.Envelope, n)
	for i := range events {
		events[i] = newEvent(t, types[i%len(types)], order(fmt.Sprintf("o-%d", i%16)), outbox.WithJSON(fmt.Appendf(nil, `{"n":%d}`, i)))
	}
	before, inOutage := events[:n-during], events[n-during:]
	for batch := range slices.Chunk(before, 50) {
		write(t, store, client, batch...)
	}
	// Take the broker away while the events written so far are relayed.
	waitUntil(t, "a quarter of the events DONE", func() bool { return count(t, client, outbox.StatusDone) >= int64(len(before)/4) })
	phase("broker down")
	f.Down(t)
	downAt := time.Now()
	doneAtDown := count(t, client, outbox.StatusDone)
	for batch := range slices.Chunk(inOutage, 50) {
		write(t, store, client, batch...)
	}
	waitUntil(t, "a failed attempt while the broker is down", func() bool { return count(t, client, outbox.StatusRetry) > 0 })
	time.Sleep(time.Until(downAt.Add(outageHold))) // an outage of some length: retries pile up
	for _, e := range inOutage {
		r, err := client.Get(ctx, e.ID())
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == outbox.StatusDone {
			t.Errorf("event %s, written while the broker was down, is DONE before the broker is back", e.ID())
		}
	}
	retrying := count(t, client, outbox.StatusRetry)
	phase("broker up")
	f.Up(t)

	waitUntil(t, "every event DONE after the outage", func() bool { return count(t, client, outbox.StatusDone) == int64(n) })
	phase("every event DONE")
	if dead := count(t, client, outbox.StatusDead); dead != 0 {
		t.Errorf("%d events DEAD", dead)
	}
	attempts := 0
	for _, e := range events {
		r, err := client.Get(ctx, e.ID())
		if err != nil {
			t.Fatal(err)
		}
		attempts += r.Attempts
	}
	r := newReader(f)
	r.tryWait(t, ids(events), 1) // what is missing then is lost, counted below
	phase("every event read back")
	lost, duplicates := 0, 0
	for _, e := range events {
		got := r.byID[e.ID()]
		if len(got) == 0 {
			lost++
			continue
		}
		duplicates += len(got) - 1
		compare(t, f, got[0], e)
	}
	t.Logf("OUTAGE events=%d written_during_outage=%d done_at_down=%d retrying_before_up=%d failed_attempts=%d lost=%d duplicates=%d",
		n, during, doneAtDown, retrying, attempts, lost, duplicates)
	if lost != 0 {
		t.Errorf("%d events lost", lost)
	}
	if f.Dedupes && duplicates != 0 {
		t.Errorf("%d duplicates on a deduplicating broker", duplicates)
	}
	if attempts == 0 {
		t.Error("no event failed while the broker was down")
	}
}

// newClient returns a Client on store whose retries come fast, changed
// by mut; start it with start.
func newClient(t *testing.T, store *outboxmem.Store, maxAttempts int, mut ...func(*outbox.Config)) *outbox.Client {
	t.Helper()
	cfg := outbox.Config{
		Store: store, TxContext: store,
		Workers:      8,
		MaxAttempts:  maxAttempts,
		RetryPolicy:  &outbox.ExponentialBackoff{Base: 5 * time.Millisecond, Max: 100 * time.Millisecond},
		PollInterval: 10 * time.Millisecond,
		Logger:       slog.New(slog.DiscardHandler), // failures are expected here
	}
	for _, m := range mut {
		m(&cfg)
	}
	client, err := outbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func start(t *testing.T, client *outbox.Client) {
	t.Helper()
	if err := client.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := client.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

func write(t *testing.T, store *outboxmem.Store, client *outbox.Client, events ...outbox.Envelope) {
	t.Helper()
	err := store.InTx(context.Background(), func(ctx context.Context) error {
		_, err := client.Write(ctx, events...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, client *outbox.Client, s outbox.Status) int64 {
	t.Helper()
	st, err := client.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.ByStatus[s]
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitStatus(t *testing.T, client *outbox.Client, ids []string, s outbox.Status) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%d events %s", len(ids), s), func() bool {
		for _, id := range ids {
			r, err := client.Get(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != s {
				return false
			}
		}
		return true
	})
}
