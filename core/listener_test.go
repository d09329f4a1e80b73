package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

func TestRegistryRouting(t *testing.T) {
	r := NewRegistry()
	var got []string
	mk := func(name string) Listener {
		return ListenerFunc(func(_ context.Context, e Envelope) error { got = append(got, name+":"+e.ID()); return nil })
	}
	if err := r.Register(orderAggregate, orderPlaced, mk("order-placed")); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(AggregateName("Invoice"), orderPlaced, mk("invoice-placed")); err != nil {
		t.Fatal(err)
	}
	if err := r.Handle(EventName("Ping"), func(_ context.Context, e Envelope) error { got = append(got, "ping:"+e.ID()); return nil }); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		aggregate, event string
		want             string // "" means unroutable
	}{
		{"Order", "OrderPlaced", "order-placed"},
		{"Invoice", "OrderPlaced", "invoice-placed"},
		{"__GLOBAL__", "Ping", "ping"},
		{"Order", "Ping", ""},
		{"__GLOBAL__", "OrderPlaced", ""},
		{"order", "OrderPlaced", ""}, // names are case-sensitive
	}
	for _, tc := range tests {
		got = nil
		l := r.ListenerFor(tc.aggregate, tc.event)
		if tc.want == "" {
			if l != nil {
				t.Errorf("ListenerFor(%s, %s) = %v, want nil", tc.aggregate, tc.event, l)
			}
			continue
		}
		if l == nil {
			t.Fatalf("ListenerFor(%s, %s) = nil", tc.aggregate, tc.event)
		}
		if err := l.Handle(context.Background(), MustEnvelope(EventName(tc.event), WithID("x"), WithJSON([]byte(`1`)))); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0] != tc.want+":x" {
			t.Errorf("ListenerFor(%s, %s) called %v, want %s", tc.aggregate, tc.event, got, tc.want)
		}
	}
}

func TestRegistryDuplicate(t *testing.T) {
	r := NewRegistry()
	l := ListenerFunc(func(context.Context, Envelope) error { return nil })
	if err := r.Register(orderAggregate, orderPlaced, l); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(AggregateName("Order"), EventName("OrderPlaced"), l); !errors.Is(err, ErrDuplicateListener) {
		t.Errorf("second Register: err = %v, want ErrDuplicateListener", err)
	}
	noop := func(context.Context, Envelope) error { return nil }
	if err := r.Handle(EventName("E"), noop); err != nil {
		t.Fatal(err)
	}
	if err := r.Handle(EventName("E"), noop); !errors.Is(err, ErrDuplicateListener) {
		t.Errorf("second Handle: err = %v, want ErrDuplicateListener", err)
	}
}

func TestRegistryNilArguments(t *testing.T) {
	r := NewRegistry()
	l := ListenerFunc(func(context.Context, Envelope) error { return nil })
	for name, err := range map[string]error{
		"nil aggregate": r.Register(nil, orderPlaced, l),
		"nil event":     r.Register(orderAggregate, nil, l),
		"nil listener":  r.Register(orderAggregate, orderPlaced, nil),
		"nil handler":   r.Handle(EventName("E"), nil),
	} {
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
	if r.ListenerFor("Order", "OrderPlaced") != nil {
		t.Error("a failed Register left a route behind")
	}
}

func TestRegistryZeroValue(t *testing.T) {
	var r Registry
	if r.ListenerFor("a", "b") != nil {
		t.Error("empty registry routed an event")
	}
	if err := r.Register(AggregateName("a"), EventName("b"), ListenerFunc(func(context.Context, Envelope) error { return nil })); err != nil {
		t.Fatal(err)
	}
	if r.ListenerFor("a", "b") == nil {
		t.Error("zero-value registry lost a registration")
	}
}

func TestRegistryConcurrent(t *testing.T) {
	r := NewRegistry()
	l := ListenerFunc(func(context.Context, Envelope) error { return nil })
	const n = 50
	var wg sync.WaitGroup
	var dups sync.Map
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := r.Register(AggregateName("A"), EventName(fmt.Sprint("E", i)), l); err != nil {
				t.Error(err)
			}
			// Everyone races for the same route: exactly one wins.
			if err := r.Register(AggregateName("A"), EventName("shared"), l); err != nil {
				dups.Store(i, err)
			}
		}()
		go func() {
			defer wg.Done()
			for j := range n {
				r.ListenerFor("A", fmt.Sprint("E", j))
			}
		}()
	}
	wg.Wait()
	for i := range n {
		if r.ListenerFor("A", fmt.Sprint("E", i)) == nil {
			t.Errorf("route E%d missing", i)
		}
	}
	count := 0
	dups.Range(func(_, v any) bool {
		count++
		if !errors.Is(v.(error), ErrDuplicateListener) {
			t.Errorf("unexpected error %v", v)
		}
		return true
	})
	if count != n-1 {
		t.Errorf("%d duplicate errors for the shared route, want %d", count, n-1)
	}
}
