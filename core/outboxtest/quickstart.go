package outboxtest

import (
	"context"
	"sync"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// DeliverOnce runs the end of an adapter's quick start on c, a Client not
// yet started: it handles e's event type, starts c, writes e in the
// adapter's own transaction and waits until e is delivered exactly once,
// with its payload. c is closed before DeliverOnce returns.
//
// inTx must begin a transaction the way the adapter's users do, call write
// with a context that carries it (write calls c.Write with e) and commit
// it; it may write business rows in the same transaction.
func DeliverOnce(t testing.TB, c *outbox.Client, e outbox.Envelope, inTx func(ctx context.Context, write func(ctx context.Context) error) error) {
	t.Helper()
	l := NewLedger()
	var (
		mu       sync.Mutex
		payloads []string
	)
	handle(t, c, outbox.EventName(e.Type()), outbox.ListenerFunc(func(_ context.Context, got outbox.Envelope) error {
		mu.Lock()
		payloads = append(payloads, got.PayloadString())
		mu.Unlock()
		l.Record(got.ID())
		return nil
	}))
	start(t, c)
	defer closeClient(t, c)
	var ids []string
	err := inTx(context.Background(), func(ctx context.Context) (err error) {
		ids, err = c.Write(ctx, e)
		return err
	})
	if err != nil {
		t.Fatalf("write in the adapter's transaction: %v", err)
	}
	if len(ids) != 1 || ids[0] != e.ID() {
		t.Fatalf("Write returned the ids %v, want [%s]", ids, e.ID())
	}
	Eventually(t, 10*time.Second, "the event delivered", func() bool { return l.Count(e.ID()) == 1 })
	mu.Lock()
	defer mu.Unlock()
	if len(payloads) != 1 || payloads[0] != e.PayloadString() {
		t.Fatalf("delivered the payloads %q, want [%q]", payloads, e.PayloadString())
	}
}
