package outbox

import (
	"context"
	"errors"
	"testing"
	"time"
)

type ctxKey struct{}

// TestDeliveryContextTimesOut: past ListenerTimeout, a delivery's context
// and everything derived from it end with context.DeadlineExceeded, as
// context.WithTimeout's would.
func TestDeliveryContextTimesOut(t *testing.T) {
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	to := newTimeouts(parent, 30*time.Millisecond)
	defer to.close()
	ctx := to.start(3)
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > 30*time.Millisecond {
		t.Fatalf("Deadline() = %v, %v; want within 30ms", d, ok)
	}
	if got := DeliveryAttempt(ctx); got != 3 {
		t.Fatalf("DeliveryAttempt = %d, want 3", got)
	}
	if got := ctx.Value(ctxKey{}); got != "v" {
		t.Fatalf("a value of the worker's context: %v, want v", got)
	}
	child, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := make(chan struct{})
	context.AfterFunc(ctx, func() { close(ran) })
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a context derived from the delivery's was not cancelled at its deadline")
	}
	<-ran
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err() = %v, child %v; want context.DeadlineExceeded", ctx.Err(), child.Err())
	}
	if got := context.Cause(child); !errors.Is(got, context.DeadlineExceeded) {
		t.Fatalf("Cause(child) = %v, want context.DeadlineExceeded", got)
	}
	to.end(ctx)
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("end changed the error of a delivery that timed out: %v", ctx.Err())
	}
}

// TestDeliveryContextEnds: a delivery that returns in time has its
// context cancelled (Canceled) when it ends, and a timer left from it
// does not cut off the next one.
func TestDeliveryContextEnds(t *testing.T) {
	to := newTimeouts(context.Background(), time.Hour)
	defer to.close()
	first := to.start(1)
	done := first.Done()
	to.end(first)
	<-done
	if !errors.Is(first.Err(), context.Canceled) {
		t.Fatalf("Err() after end = %v, want context.Canceled", first.Err())
	}
	next := to.start(2)
	to.expire() // as a timer of the first delivery that fires late
	if err := next.Err(); err != nil {
		t.Fatalf("the next delivery was cancelled by its predecessor's timer: %v", err)
	}
	if got := DeliveryAttempt(next); got != 2 {
		t.Fatalf("DeliveryAttempt = %d, want 2", got)
	}
	to.end(next)
}

// TestDeliveryContextFollowsItsWorker: when the worker's context ends
// (Close), the running delivery's context ends with it, and a delivery
// started after that starts cancelled.
func TestDeliveryContextFollowsItsWorker(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	to := newTimeouts(parent, time.Hour)
	defer to.close()
	ctx := to.start(1)
	child, stop := context.WithTimeout(ctx, time.Hour)
	defer stop()
	cancel()
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the delivery's context outlived its worker's")
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("Err() = %v, want context.Canceled", ctx.Err())
	}
	to.end(ctx)
	late := to.start(2)
	defer to.end(late)
	select {
	case <-late.Done():
	default:
		t.Fatal("a delivery started after its worker's context ended is not cancelled")
	}
}

// TestDeliveryContextAfterFunc: the AfterFunc hook behaves as
// context.AfterFunc's contract says.
func TestDeliveryContextAfterFunc(t *testing.T) {
	to := newTimeouts(context.Background(), time.Hour)
	defer to.close()
	ctx := to.start(1)
	stopped := ctx.AfterFunc(func() { t.Error("a stopped AfterFunc ran") })
	if !stopped() {
		t.Fatal("stop of a pending AfterFunc returned false")
	}
	if stopped() {
		t.Fatal("a second stop returned true")
	}
	ran := make(chan struct{})
	stop := ctx.AfterFunc(func() { close(ran) })
	to.end(ctx)
	<-ran
	if stop() {
		t.Fatal("stop after the function ran returned true")
	}
	again := make(chan struct{})
	ctx.AfterFunc(func() { close(again) }) // already cancelled: runs at once
	<-again
}
