package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
)

// Order is an aggregate root: it embeds a Recorder and raises domain
// events while it changes; it knows nothing of the outbox.
type Order struct {
	outbox.Recorder
	ID    string
	Total int
	state string
}

// AggregateRef names the aggregate the events belong to.
func (o *Order) AggregateRef() (outbox.AggregateType, string) { return OrderAggregate, o.ID }

// Place changes the order and records what happened.
func (o *Order) Place() {
	o.state = "placed"
	o.Raise(OrderWasPlaced{OrderID: o.ID, Total: o.Total})
}

// OrderWasPlaced is a domain event; EventType names it, so renaming or
// moving the Go type changes nothing stored.
type OrderWasPlaced struct {
	OrderID string `json:"orderId"`
	Total   int    `json:"total"`
}

// EventType returns the stored event type.
func (OrderWasPlaced) EventType() string { return "OrderPlaced" }

// orderRepo stands for the application's repository (GORM, sqlx, …): it
// saves the order in the transaction carried by ctx.
type orderRepo struct {
	mu    sync.Mutex
	saved map[string]string
}

func (r *orderRepo) Save(_ context.Context, o *Order) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.saved[o.ID] = o.state
	return nil
}

// ExampleClient_WriteFrom: service → repository → outbox in one
// transaction. The service changes the aggregate, the repository saves it,
// and WriteFrom writes the events the aggregate raised, in the same
// transaction: both commit, or neither.
func ExampleClient_WriteFrom() {
	ctx := context.Background()
	store := outboxmem.New()
	client, err := outbox.New(outbox.Config{
		Store: store, TxContext: store,
		// Headers every domain event carries, from the request's context.
		EnvelopeOptions: func(ctx context.Context) []outbox.EnvelopeOption {
			return []outbox.EnvelopeOption{outbox.WithHeader("operator", "alice")}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	delivered := make(chan string, 1)
	_ = client.Handle(OrderPlaced, func(_ context.Context, e outbox.Envelope) error {
		var ev OrderWasPlaced
		if err := e.DecodeJSON(&ev); err != nil {
			return err
		}
		op, _ := e.Header("operator")
		delivered <- fmt.Sprintf("%s on %s %s: total %d, by %s", e.Type(), e.AggregateType(), e.AggregateID(), ev.Total, op)
		return nil
	})
	if err := client.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close(ctx)

	repo := &orderRepo{saved: map[string]string{}}
	placeOrder := func(ctx context.Context, id string, total int) error {
		return store.InTx(ctx, func(ctx context.Context) error {
			order := &Order{ID: id, Total: total}
			order.Place()
			if err := repo.Save(ctx, order); err != nil {
				return err
			}
			_, err := client.WriteFrom(ctx, order)
			return err
		})
	}
	if err := placeOrder(ctx, "o-42", 1200); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(<-delivered)

	// An event type the outbox cannot name is refused, and the
	// transaction with it.
	type unnamed struct{ N int }
	err = store.InTx(ctx, func(ctx context.Context) error {
		o := &Order{ID: "o-43"}
		o.Raise(unnamed{1})
		_, err := client.WriteFrom(ctx, o)
		return err
	})
	fmt.Println(errors.Is(err, outbox.ErrInvalidEnvelope))
	// Output:
	// OrderPlaced on Order o-42: total 1200, by alice
	// true
}
