package outbox

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSubscribeRules(t *testing.T) {
	ok := ListenerFunc(func(context.Context, Envelope) error { return nil })
	var r Registry
	if err := r.Subscribe("billing", EventName("Placed"), ok); err != nil {
		t.Fatal(err)
	}
	if err := r.Subscribe("mail", EventName("Placed"), ok); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what string
		err  error
		want error
	}{
		{"same name twice", r.Subscribe("mail", EventName("Placed"), ok), ErrDuplicateListener},
		{"Handle of a subscribed type", r.Handle(EventName("Placed"), ok), ErrDuplicateListener},
		{"empty name", r.Subscribe("", EventName("Other"), ok), ErrInvalidConfig},
		{"comma in the name", r.Subscribe("a,b", EventName("Other"), ok), ErrInvalidConfig},
		{"name too long", r.Subscribe(strings.Repeat("x", MaxSubscriberLen+1), EventName("Other"), ok), ErrInvalidConfig},
		{"no listener", r.Subscribe("mail", EventName("Other"), nil), ErrInvalidConfig},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.what, tc.err, tc.want)
		}
	}
	if err := r.Handle(EventName("Handled"), ok); err != nil {
		t.Fatal(err)
	}
	if err := r.Subscribe("mail", EventName("Handled"), ok); !errors.Is(err, ErrDuplicateListener) {
		t.Errorf("Subscribe to a handled type: %v, want ErrDuplicateListener", err)
	}
	if err := r.Subscribe(strings.Repeat("x", MaxSubscriberLen), EventName("Other"), ok); err != nil {
		t.Errorf("a name of MaxSubscriberLen bytes: %v", err)
	}
}

// TestFanOutRunsWhatIsOwed: a first delivery runs every subscriber side by
// side; a later one only those the event owes; failures, panics and
// unknown names come back, and are reported, per subscriber.
func TestFanOutRunsWhatIsOwed(t *testing.T) {
	var (
		mu  sync.Mutex
		ran []string
	)
	sub := func(name string, err error) Listener {
		return ListenerFunc(func(context.Context, Envelope) error {
			mu.Lock()
			ran = append(ran, name)
			mu.Unlock()
			if name == "panics" {
				panic("boom")
			}
			return err
		})
	}
	var r Registry
	for name, err := range map[string]error{"ok": nil, "fails": errors.New("down"), "panics": nil} {
		if err := r.Subscribe(name, EventName("Placed"), sub(name, err)); err != nil {
			t.Fatal(err)
		}
	}
	l := r.listenerFor("Any", "Placed").(*fanOut)
	e := MustEnvelope(EventName("Placed"), WithJSON([]byte(`{}`)))

	err := l.Handle(context.Background(), e)
	var se *SubscribersError
	if !errors.As(err, &se) || !slices.Equal(se.Names(), []string{"fails", "panics"}) {
		t.Fatalf("first delivery: %v, want fails and panics to fail", err)
	}
	var pe *PanicError
	if !errors.As(se.Failed["panics"], &pe) || !strings.Contains(err.Error(), "subscriber fails: down") {
		t.Fatalf("errors %v: want a PanicError for panics and down for fails", err)
	}
	if errors.Unwrap(err) != nil {
		t.Errorf("a real failure unwraps to %v, want nothing", errors.Unwrap(err))
	}
	if slices.Sort(ran); !slices.Equal(ran, []string{"fails", "ok", "panics"}) {
		t.Fatalf("first delivery ran %v, want all three", ran)
	}

	ran = nil
	reported := map[string]bool{}
	err = l.run(context.Background(), e, []string{"fails", "gone"}, func(name string, err error) { reported[name] = err == nil })
	if !slices.Equal(ran, []string{"fails"}) {
		t.Fatalf("retry ran %v, want fails only", ran)
	}
	if !errors.As(err, &se) || !slices.Equal(se.Names(), []string{"fails", "gone"}) || !errors.Is(se.Failed["gone"], ErrUnroutable) {
		t.Fatalf("retry: %v, want fails and an unroutable gone", err)
	}
	if want := map[string]bool{"fails": false, "gone": false}; !maps.Equal(reported, want) {
		t.Errorf("reported %v, want %v", reported, want)
	}
	if got := subscribersAfter(err, nil); !slices.Equal(got, []string{"fails", "gone"}) {
		t.Errorf("owed after the retry: %v", got)
	}
	if got := subscribersAfter(errors.New("interceptor"), []string{"fails"}); !slices.Equal(got, []string{"fails"}) {
		t.Errorf("owed after a failure outside the subscribers: %v, want them unchanged", got)
	}
	ran = nil
	if err := l.run(context.Background(), e, []string{"ok"}, nil); err != nil || !slices.Equal(ran, []string{"ok"}) {
		t.Fatalf("delivery owed to ok: %v, ran %v", err, ran)
	}
}

func TestSubscribersErrorUnwrap(t *testing.T) {
	soon, later := RetryAfter(time.Second, "busy"), RetryAfter(time.Minute, "busier")
	var ra *RetryAfterError
	err := error(&SubscribersError{Failed: map[string]error{"a": soon, "b": later}})
	if !errors.As(err, &ra) || ra.Delay != time.Minute {
		t.Errorf("all RetryAfter: %v, want the longest delay", ra)
	}
	err = &SubscribersError{Failed: map[string]error{"a": soon, "b": errors.New("down")}}
	if errors.As(err, &ra) {
		t.Errorf("a RetryAfter beside a failure unwraps to %v: the failure must use an attempt", ra)
	}
	err = &SubscribersError{Failed: map[string]error{"a": ErrUnroutable, "b": errors.New("down")}}
	if errors.Is(err, ErrUnroutable) {
		t.Error("one unroutable subscriber beside a failing one makes the event unroutable")
	}
	err = &SubscribersError{Failed: map[string]error{"a": ErrUnroutable}}
	if !errors.Is(err, ErrUnroutable) {
		t.Error("only unroutable subscribers: want ErrUnroutable")
	}
}
