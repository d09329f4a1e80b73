package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
)

type invoice struct {
	outbox.Recorder
	id string
}

func (i *invoice) AggregateRef() (outbox.AggregateType, string) {
	return outbox.AggregateName("Invoice"), i.id
}

// invoiceSent has no EventType method: it is named by registration, and
// carries its own id and time.
type invoiceSent struct {
	ID string    `json:"-"`
	At time.Time `json:"-"`
	To string    `json:"to"`
}

func (e invoiceSent) EventID() string       { return e.ID }
func (e invoiceSent) OccurredAt() time.Time { return e.At }

type invoicePaid struct{ Amount int }

func (invoicePaid) EventType() string  { return "InvoicePaid" }
func (invoicePaid) SchemaVersion() int { return 2 }

func TestRecorderPullDrains(t *testing.T) {
	var r outbox.Recorder
	r.Raise(1, 2)
	r.Raise(3)
	if got := r.PullEvents(); len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("pulled %v, want [1 2 3]", got)
	}
	if got := r.PullEvents(); len(got) != 0 {
		t.Fatalf("second pull = %v, want nothing", got)
	}
}

func TestWriteFrom(t *testing.T) {
	ctx := context.Background()
	store := outboxmem.New()
	c, err := outbox.New(outbox.Config{Store: store, TxContext: store, Mode: outbox.ModeWriterOnly,
		EnvelopeOptions: func(ctx context.Context) []outbox.EnvelopeOption {
			return []outbox.EnvelopeOption{outbox.WithTenant("acme"), outbox.WithHeader("trace", "t-1")}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterEventType(invoiceSent{}, outbox.EventName("InvoiceSent")); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterEventType(invoiceSent{}, outbox.EventName("InvoiceSent")); err != nil {
		t.Fatalf("the same registration twice: %v", err)
	}
	if err := c.RegisterEventType(invoiceSent{}, outbox.EventName("Other")); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("a second name: %v, want ErrInvalidConfig", err)
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	sentID := outbox.NewULID()
	a, b := &invoice{id: "i-1"}, &invoice{id: "i-2"}
	a.Raise(invoiceSent{ID: sentID, At: at, To: "x@example.com"}, invoicePaid{Amount: 5})
	b.Raise(invoicePaid{Amount: 7})
	var ids []string
	err = store.InTx(ctx, func(ctx context.Context) error {
		ids, err = c.WriteFrom(ctx, a, b)
		return err
	})
	if err != nil || len(ids) != 3 || ids[0] != sentID {
		t.Fatalf("WriteFrom = %v, %v; want 3 ids, the first %s", ids, err, sentID)
	}
	if len(a.PullEvents())+len(b.PullEvents()) != 0 {
		t.Fatal("WriteFrom left events in the aggregates")
	}
	want := []struct {
		typ, agg, payload string
		version           int
	}{{"InvoiceSent", "i-1", `{"to":"x@example.com"}`, 1}, {"InvoicePaid", "i-1", `{"Amount":5}`, 2}, {"InvoicePaid", "i-2", `{"Amount":7}`, 2}}
	for i, w := range want {
		r, err := c.Get(ctx, ids[i])
		if err != nil {
			t.Fatal(err)
		}
		e := r.Envelope
		trace, _ := e.Header("trace")
		if e.Type() != w.typ || e.AggregateType() != "Invoice" || e.AggregateID() != w.agg || e.PayloadString() != w.payload || e.TenantID() != "acme" || trace != "t-1" ||
			e.SchemaVersion() != w.version {
			t.Errorf("event %d = %s %s/%s %s tenant %q trace %q v%d", i, e.Type(), e.AggregateType(), e.AggregateID(), e.PayloadString(), e.TenantID(), trace, e.SchemaVersion())
		}
	}
	if r, _ := c.Get(ctx, sentID); !r.Envelope.OccurredAt().Equal(at) {
		t.Errorf("occurred at %v, want the event's own %v", r.Envelope.OccurredAt(), at)
	}

	// Nothing raised: nothing written, no transaction needed.
	if ids, err := c.WriteFrom(ctx, &invoice{id: "i-3"}); err != nil || ids != nil {
		t.Errorf("WriteFrom with nothing raised = %v, %v", ids, err)
	}
	// Bad events fail the write and write nothing.
	for name, raise := range map[string]any{"nil": nil, "unnamed": struct{ X int }{1}} {
		agg := &invoice{id: "i-4"}
		agg.Raise(invoicePaid{Amount: 1}, raise)
		err := store.InTx(ctx, func(ctx context.Context) error {
			_, err := c.WriteFrom(ctx, agg)
			return err
		})
		if !errors.Is(err, outbox.ErrInvalidEnvelope) {
			t.Errorf("%s event: %v, want ErrInvalidEnvelope", name, err)
		}
	}
	if _, err := c.WriteFrom(ctx, nil); !errors.Is(err, outbox.ErrInvalidEnvelope) {
		t.Errorf("nil aggregate: %v", err)
	}
	if n, _ := store.Count(ctx, outbox.Query{}); n != 3 {
		t.Errorf("%d rows, want the 3 first ones only", n)
	}
}
