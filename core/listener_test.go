package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

func TestRegistryRouting(t *testing.T) {
	r := &Registry{}
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
		{"Order", "Ping", "ping"}, // Handle routes its event type on any aggregate
		{"Invoice", "Ping", "ping"},
		{"__GLOBAL__", "OrderPlaced", ""},
		{"Customer", "OrderPlaced", ""},
		{"order", "OrderPlaced", ""}, // names are case-sensitive
		{"Order", "ping", ""},
	}
	for _, tc := range tests {
		got = nil
		l := r.listenerFor(tc.aggregate, tc.event)
		if tc.want == "" {
			if l != nil {
				t.Errorf("listenerFor(%s, %s) = %v, want nil", tc.aggregate, tc.event, l)
			}
			continue
		}
		if l == nil {
			t.Fatalf("listenerFor(%s, %s) = nil", tc.aggregate, tc.event)
		}
		if err := l.Handle(context.Background(), MustEnvelope(EventName(tc.event), WithID("x"), WithJSON([]byte(`1`)))); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0] != tc.want+":x" {
			t.Errorf("listenerFor(%s, %s) called %v, want %s", tc.aggregate, tc.event, got, tc.want)
		}
	}
}

// TestRegistryExactWinsOverHandle: Register for one (aggregate, event)
// pair wins over a Handle for the event type, whichever came first; other
// aggregates still reach the Handle.
func TestRegistryExactWinsOverHandle(t *testing.T) {
	for _, handleFirst := range []bool{true, false} {
		r := &Registry{}
		var got string
		handle := func(context.Context, Envelope) error { got = "any"; return nil }
		exact := ListenerFunc(func(context.Context, Envelope) error { got = "exact"; return nil })
		if handleFirst {
			if err := r.Handle(orderPlaced, handle); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Register(orderAggregate, orderPlaced, exact); err != nil {
			t.Fatalf("Register next to a Handle for the same event type: %v", err)
		}
		if !handleFirst {
			if err := r.Handle(orderPlaced, handle); err != nil {
				t.Fatalf("Handle next to a Register for the same event type: %v", err)
			}
		}
		for aggregate, want := range map[string]string{"Order": "exact", "Invoice": "any", "__GLOBAL__": "any"} {
			got = ""
			l := r.listenerFor(aggregate, "OrderPlaced")
			if l == nil {
				t.Fatalf("handle first %v: (%s, OrderPlaced) unroutable", handleFirst, aggregate)
			}
			_ = l.Handle(context.Background(), Envelope{})
			if got != want {
				t.Errorf("handle first %v: (%s, OrderPlaced) went to %s, want %s", handleFirst, aggregate, got, want)
			}
		}
	}
}

func TestRegistryDuplicate(t *testing.T) {
	r := &Registry{}
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
	r := &Registry{}
	l := ListenerFunc(func(context.Context, Envelope) error { return nil })
	for name, err := range map[string]error{
		"nil aggregate": r.Register(nil, orderPlaced, l),
		"nil event":     r.Register(orderAggregate, nil, l),
		"nil listener":  r.Register(orderAggregate, orderPlaced, nil),
		"nil handler":   r.Handle(EventName("E"), nil),
		"nil type":      r.Handle(nil, func(context.Context, Envelope) error { return nil }),
	} {
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
	if r.listenerFor("Order", "OrderPlaced") != nil || r.listenerFor("Order", "E") != nil {
		t.Error("a failed registration left a route behind")
	}
}

func TestRegistryZeroValue(t *testing.T) {
	var r Registry
	if r.listenerFor("a", "b") != nil {
		t.Error("empty registry routed an event")
	}
	if err := r.Register(AggregateName("a"), EventName("b"), ListenerFunc(func(context.Context, Envelope) error { return nil })); err != nil {
		t.Fatal(err)
	}
	if r.listenerFor("a", "b") == nil {
		t.Error("zero-value registry lost a registration")
	}
}

func TestRegistryConcurrent(t *testing.T) {
	r := &Registry{}
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
				r.listenerFor("A", fmt.Sprint("E", j))
			}
		}()
	}
	wg.Wait()
	for i := range n {
		if r.listenerFor("A", fmt.Sprint("E", i)) == nil {
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

func BenchmarkRegistryLookup(b *testing.B) {
	r := &Registry{}
	for _, n := range []string{"A", "B", "C", "D", "E", "F", "G", "H"} {
		if err := r.Handle(EventName(n), nil); err == nil {
			b.Fatal("nil listener accepted")
		}
		if err := r.Handle(EventName(n), func(context.Context, Envelope) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	if err := r.Register(AggregateName("Order"), EventName("E"), ListenerFunc(func(context.Context, Envelope) error { return nil })); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if r.listenerFor("Invoice", "E") == nil {
			b.Fatal("no listener")
		}
	}
}

// TestRegistryCatchAll: HandleAll takes what no other route matches;
// Register and Handle routes still win; a second catch-all is refused.
func TestRegistryCatchAll(t *testing.T) {
	r := &Registry{}
	var got string
	route := func(name string) ListenerFunc {
		return func(context.Context, Envelope) error { got = name; return nil }
	}
	if r.listenerFor("Order", "Anything") != nil {
		t.Fatal("an empty registry routed an event")
	}
	if err := r.HandleAll(route("all")); err != nil {
		t.Fatal(err)
	}
	if err := r.HandleAll(route("all2")); !errors.Is(err, ErrDuplicateListener) {
		t.Errorf("second HandleAll: err = %v, want ErrDuplicateListener", err)
	}
	if err := r.HandleAll(nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("HandleAll(nil): err = %v, want ErrInvalidConfig", err)
	}
	if err := r.Handle(orderPlaced, route("any")); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(orderAggregate, EventName("OrderShipped"), route("exact")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ aggregate, event, want string }{
		{"Order", "OrderPlaced", "any"},
		{"Order", "OrderShipped", "exact"},
		{"Invoice", "OrderShipped", "all"},
		{"Order", "Unknown", "all"},
	} {
		got = ""
		_ = r.listenerFor(c.aggregate, c.event).Handle(context.Background(), Envelope{})
		if got != c.want {
			t.Errorf("(%s, %s) went to %q, want %q", c.aggregate, c.event, got, c.want)
		}
	}
}
