package outbox

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrNoTransaction is returned when an outbox write is attempted with no
	// transaction active in the context.
	ErrNoTransaction = errors.New("outbox: no transaction active in context")
	// ErrInvalidEnvelope is wrapped by every envelope validation error.
	ErrInvalidEnvelope = errors.New("outbox: invalid envelope")
	// ErrPayloadTooLarge is returned for payloads over MaxPayloadSize.
	ErrPayloadTooLarge = errors.New("outbox: payload too large")
	// ErrDuplicateEvent is returned when an event id is written twice: twice
	// in one Write, or again after it was stored. Nothing of that Write is
	// inserted and the caller's transaction stays usable, on every database:
	// the business code decides whether to roll back or to go on (an event
	// id derived from a business key makes a retried command idempotent).
	ErrDuplicateEvent = errors.New("outbox: event id already written")
	// ErrDuplicateListener is returned when a second listener is registered
	// for the same (aggregate type, event type).
	ErrDuplicateListener = errors.New("outbox: listener already registered")
	// ErrUnroutable is the error recorded for an event no listener handles;
	// such events go to DEAD without retries.
	ErrUnroutable = errors.New("outbox: no listener for event")
	// ErrInvalidConfig is wrapped by configuration validation errors.
	ErrInvalidConfig = errors.New("outbox: invalid configuration")
	// ErrClosed is returned by components used after Close.
	ErrClosed = errors.New("outbox: closed")
	// ErrClaimExpired is recorded as the last error of an event whose claim
	// another process took over: its previous owner stored no outcome (the
	// process died, or the listener hung past the lease). Each later
	// delivery of such an event counts its attempt when it starts, so an
	// event whose listener kills its process ends in DEAD after MaxAttempts.
	ErrClaimExpired = errors.New("outbox: no outcome stored: the claim expired and was taken over")
	// ErrInFlight is recorded as the last error of a taken-over event
	// whose delivery starts (Store.CountAttempt): if its claim is taken
	// over again, the take-over keeps it, and the event — in flight when
	// its owner stopped, so perhaps what stopped it — is a suspect: it is
	// delivered alone, after the events claimed with it. A take-over of an
	// event that did not start records ErrClaimExpired instead.
	ErrInFlight = errors.New("outbox: delivery started after a take-over, no outcome stored yet")
	// ErrNotFound is returned when an event id does not exist in the state an
	// operation requires (for example, replaying an event that is not DEAD).
	ErrNotFound = errors.New("outbox: event not found")
	// ErrNoResult is the failure recorded for an event of a batch whose
	// BatchListener.HandleBatch returned fewer results than events: the
	// events without a result count as failed.
	ErrNoResult = errors.New("outbox: batch listener returned no result for the event")
	// ErrGoexit is the failure recorded when a listener, a subscriber or
	// an interceptor calls runtime.Goexit (as t.FailNow does) instead of
	// returning: the delivery is a failed attempt, as a panic is, and the
	// worker that ran it is replaced.
	ErrGoexit = errors.New("outbox: the listener called runtime.Goexit instead of returning")
	// ErrExpired is the error recorded for an event that reached its
	// expiry (WithExpiresAt, WithTTL) before it was delivered: it goes to
	// DEAD without being delivered, using no attempt.
	ErrExpired = errors.New("outbox: expired before delivery")
)

// ErrPermanent marks a failure that no retry can mend: the event is one
// its consumer can never accept (a payload the broker refuses, a message
// the downstream rejects as invalid). A listener, subscriber or sink
// returns an error that wraps it — Permanent(err), or its own error type
// whose Is matches it — and the event goes DEAD at once with that error,
// its attempt counted, without waiting for MaxAttempts. Check with
// errors.Is(err, ErrPermanent).
var ErrPermanent = errors.New("outbox: permanent failure")

// Permanent returns err marked as permanent (see ErrPermanent): the
// event it fails goes DEAD at once. The result matches both ErrPermanent
// and err with errors.Is and errors.As; its text is err's. Permanent(nil)
// is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// permanentError is an error marked with Permanent.
type permanentError struct{ err error }

func (e *permanentError) Error() string        { return e.err.Error() }
func (e *permanentError) Unwrap() error        { return e.err }
func (e *permanentError) Is(target error) bool { return target == ErrPermanent }

// RetryAfterError asks the dispatcher to deliver the event again after Delay
// without counting a failed attempt: for a listener that knows the
// downstream is busy (rate limit, maintenance) rather than failing.
type RetryAfterError struct {
	Delay  time.Duration
	Reason string
}

// RetryAfter returns an error that makes the dispatcher retry the event after
// d without using up an attempt.
func RetryAfter(d time.Duration, reason string) error {
	return &RetryAfterError{Delay: d, Reason: reason}
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("outbox: retry after %s: %s", e.Delay, e.Reason)
}

// PanicError is the failure recorded when a listener or interceptor panics.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("outbox: panic: %v", e.Value) }

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}
