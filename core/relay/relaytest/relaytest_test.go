package relaytest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/relay"
	"github.com/go-outbox/outbox/core/relay/relaytest"
)

// memBroker is the smallest broker the suite accepts: it runs the suite's
// own logic under the race detector in the core module. The real sinks
// run the suite against real brokers in their own modules.
type memBroker struct {
	mu      sync.Mutex
	dedupe  bool
	down    bool
	stored  []relay.Message
	seen    map[string]bool
	readPos int
}

func (b *memBroker) Handle(ctx context.Context, e outbox.Envelope) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m, err := relay.Broker{}.Message(e, topic, key)
	if err != nil {
		return fmt.Errorf("memBroker: event %s: %w", e.ID(), err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.down:
		return errors.New("memBroker: down")
	case strings.HasSuffix(m.Topic, relaytest.RefusedType):
		return fmt.Errorf("memBroker: no route for %q", m.Topic)
	case b.dedupe && b.seen[m.ID]:
		return nil
	}
	b.seen[m.ID] = true
	b.stored = append(b.stored, m)
	return nil
}

// HandleBatch makes memBroker an outbox.BatchListener: each event as
// Handle takes it.
func (b *memBroker) HandleBatch(ctx context.Context, events []outbox.Envelope) []error {
	errs := make([]error, len(events))
	for i, e := range events {
		errs[i] = b.Handle(ctx, e)
	}
	return errs
}

func (b *memBroker) read(context.Context) ([]relay.Message, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.stored[b.readPos:]
	b.readPos = len(b.stored)
	return out, nil
}

func (b *memBroker) setDown(down bool) {
	b.mu.Lock()
	b.down = down
	b.mu.Unlock()
}

var (
	topic = relaytest.TenantTopic("mem.", "")
	key   = []byte(strings.Repeat("k", relay.MinKeyLen))
)

func TestSuiteOnMemoryBroker(t *testing.T) {
	for _, dedupe := range []bool{false, true} {
		t.Run(fmt.Sprintf("dedupe=%v", dedupe), func(t *testing.T) {
			relaytest.Run(t, func(t *testing.T) relaytest.Fixture {
				b := &memBroker{dedupe: dedupe, seen: map[string]bool{}}
				return relaytest.Fixture{
					Sink: b, Topic: topic, SigningKey: key, Read: b.read, Keys: true, Dedupes: dedupe,
					Down:         func(*testing.T) { b.setDown(true) },
					Up:           func(*testing.T) { b.setDown(false) },
					OutageEvents: 200,
				}
			})
		})
	}
}

// echo starts a line echo server and returns its address.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

func roundTrip(c net.Conn, line string) (string, error) {
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSuffix(got, "\n"), err
}

func TestProxyCutAndRestore(t *testing.T) {
	p := relaytest.NewProxy(t, echo(t))
	dial := func() net.Conn {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	c := dial()
	if got, err := roundTrip(c, "one"); err != nil || got != "one" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}

	if n := p.Cut(); n != 1 {
		t.Errorf("Cut cut off %d clients, want 1", n)
	}
	if got, err := roundTrip(c, "two"); err == nil {
		t.Errorf("a connection survived the cut: %q", got)
	}
	if got, err := roundTrip(dial(), "three"); err == nil {
		t.Errorf("a new connection got through a cut proxy: %q", got)
	}

	p.Restore()
	if got, err := roundTrip(dial(), "four"); err != nil || got != "four" {
		t.Errorf("after Restore: %q, %v", got, err)
	}
	if err := p.Close(); err != nil {
		t.Error(err)
	}
}

func TestUnavailableSkipsUnlessRequired(t *testing.T) {
	t.Setenv(relaytest.EnvRequireBrokers, "")
	if relaytest.BrokersRequired() {
		t.Fatal("brokers required with the variable empty")
	}
	skipped := false
	t.Run("skip", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		relaytest.Unavailable(t, "test broker", errors.New("connection refused"))
	})
	if !skipped {
		t.Error("Unavailable did not skip")
	}
	t.Setenv(relaytest.EnvRequireBrokers, "1")
	if !relaytest.BrokersRequired() {
		t.Error("brokers not required with the variable set to 1")
	}
}

func BenchmarkMemoryBroker(b *testing.B) {
	relaytest.RunBench(b, relaytest.Bench{
		NewSink: func(*testing.B) (outbox.Listener, relay.Topic) {
			return &memBroker{seen: map[string]bool{}}, topic
		},
		Raw: func(b *testing.B, events []outbox.Envelope, topic relay.Topic) error {
			sink := &memBroker{seen: map[string]bool{}}
			for _, e := range events {
				if err := sink.Handle(context.Background(), e); err != nil {
					return err
				}
			}
			return nil
		},
	})
}
