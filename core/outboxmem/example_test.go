package outboxmem_test

import (
	"context"
	"errors"
	"fmt"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
)

// ExampleStore_InTx shows the transaction contract: events become visible
// at the commit, and a nested InTx that fails discards only its own
// events, whose after-commit callbacks never run.
func ExampleStore_InTx() {
	ctx := context.Background()
	store := outboxmem.New()
	write := func(ctx context.Context, name string) error {
		tx, err := store.Current(ctx)
		if err != nil {
			return err
		}
		tx.AfterCommit(func() { fmt.Println("after commit:", name) })
		e := outbox.MustEnvelope(outbox.EventName(name), outbox.WithJSON([]byte(`{}`)))
		return store.Insert(ctx, tx, e.OccurredAt(), "", []outbox.Envelope{e})
	}

	err := store.InTx(ctx, func(ctx context.Context) error {
		if err := write(ctx, "OrderPlaced"); err != nil {
			return err
		}
		err := store.InTx(ctx, func(ctx context.Context) error { // a savepoint
			if err := write(ctx, "CouponRedeemed"); err != nil {
				return err
			}
			return errors.New("coupon expired")
		})
		fmt.Println("nested:", err)
		n, _ := store.Count(ctx, outbox.Query{})
		fmt.Println("visible before the commit:", n)
		return nil
	})
	fmt.Println("committed:", err)
	recs, _ := store.List(ctx, outbox.Query{})
	for _, r := range recs {
		fmt.Println("stored:", r.Envelope.Type(), r.Status)
	}
	_, err = store.Current(ctx)
	fmt.Println("outside:", errors.Is(err, outbox.ErrNoTransaction))

	// Output:
	// nested: coupon expired
	// visible before the commit: 0
	// after commit: OrderPlaced
	// committed: <nil>
	// stored: OrderPlaced NEW
	// outside: true
}
