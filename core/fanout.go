package outbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// MaxSubscriberLen is the longest subscriber name, in bytes.
const MaxSubscriberLen = 64

// fanOut is the listener of an event type with named subscribers (see
// Registry.Subscribe). A delivery runs the subscribers the event still
// owes (all of them the first time) side by side, each guarded against
// panics; the ones that fail come back in a *SubscribersError, and only
// they run at the next attempt.
type fanOut struct {
	mu   sync.RWMutex
	subs map[string]Listener
}

// add registers l as subscriber name.
func (f *fanOut) add(name string, l Listener) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.subs[name]; dup {
		return fmt.Errorf("%w: subscriber %q", ErrDuplicateListener, name)
	}
	f.subs[name] = l
	return nil
}

// Handle runs every subscriber.
func (f *fanOut) Handle(ctx context.Context, e Envelope) error { return f.run(ctx, e, nil, nil) }

// run runs the subscribers e still owes (nil: all of them) and reports
// each one's outcome to report, if not nil.
func (f *fanOut) run(ctx context.Context, e Envelope, owed []string, report func(name string, err error)) error {
	f.mu.RLock()
	names := owed
	if names == nil {
		names = make([]string, 0, len(f.subs))
		for name := range f.subs {
			names = append(names, name)
		}
	}
	run := make([]Listener, len(names))
	for i, name := range names {
		run[i] = f.subs[name] // nil: no longer subscribed
	}
	f.mu.RUnlock()

	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, l := range run {
		if l == nil {
			errs[i] = fmt.Errorf("%w: subscriber %q of %s is not registered", ErrUnroutable, names[i], e.Type())
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = ErrGoexit // kept if the subscriber calls runtime.Goexit
			errs[i] = guard(func() error { return l.Handle(ctx, e) })
		}()
	}
	wg.Wait()
	failed := make(map[string]error)
	for i, err := range errs {
		if report != nil {
			report(names[i], err)
		}
		if err != nil {
			failed[names[i]] = err
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return &SubscribersError{Failed: failed}
}

// SubscribersError is how a delivery to subscribers (Registry.Subscribe)
// fails: Failed holds the error of each subscriber that failed; the others
// succeeded and are not run again. The event's next attempt runs only the
// failed ones, and the stored event names them (Record.Subscribers).
//
// When every failure is a RetryAfter, the error unwraps to the one with the
// longest delay (no attempt is used up); when every failure is
// ErrUnroutable (subscribers that are no longer registered), or every one
// is ErrPermanent, to that.
type SubscribersError struct {
	Failed map[string]error
}

// Names returns the failed subscribers, sorted.
func (e *SubscribersError) Names() []string {
	names := make([]string, 0, len(e.Failed))
	for name := range e.Failed {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Error lists each failed subscriber with its error.
func (e *SubscribersError) Error() string {
	var b strings.Builder
	for i, name := range e.Names() {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "subscriber %s: %v", name, e.Failed[name])
	}
	return b.String()
}

// Unwrap returns what every failure has in common: the longest RetryAfter
// when all asked for one, ErrUnroutable when no failed subscriber is
// registered, ErrPermanent when every one failed permanently, else
// nothing.
func (e *SubscribersError) Unwrap() error {
	var longest *RetryAfterError
	allRetryAfter, allUnroutable, allPermanent := true, true, true
	for _, err := range e.Failed {
		var ra *RetryAfterError
		if errors.As(err, &ra) {
			if longest == nil || ra.Delay > longest.Delay {
				longest = ra
			}
		} else {
			allRetryAfter = false
		}
		if !errors.Is(err, ErrUnroutable) {
			allUnroutable = false
		}
		if !errors.Is(err, ErrPermanent) {
			allPermanent = false
		}
	}
	switch {
	case allRetryAfter && longest != nil:
		return longest
	case allUnroutable:
		return ErrUnroutable
	case allPermanent && len(e.Failed) > 0:
		return ErrPermanent
	}
	return nil
}

// subscribersAfter returns the subscribers an event owes after a failed
// delivery: the failed ones of a fan-out, else those it owed before (an
// interceptor failed, or it has a single listener).
func subscribersAfter(err error, before []string) []string {
	var se *SubscribersError
	if errors.As(err, &se) {
		return se.Names()
	}
	return before
}

// validSubscriber checks a subscriber name: it is stored, comma-separated
// (see Record.Subscribers).
func validSubscriber(name string) error {
	if name == "" || len(name) > MaxSubscriberLen || strings.ContainsAny(name, ",\n") {
		return fmt.Errorf("%w: subscriber name %q: want 1 to %d bytes without commas or newlines", ErrInvalidConfig, name, MaxSubscriberLen)
	}
	return nil
}
