package outbox

import (
	"math"
	"testing"
	"time"
)

func TestExponentialBackoffNoJitter(t *testing.T) {
	p := &ExponentialBackoff{NoJitter: true, Max: 5 * time.Second}
	want := []time.Duration{
		200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second,
	}
	for i, w := range want {
		if got := p.Delay(i + 1); got != w {
			t.Errorf("Delay(%d) = %v, want %v", i+1, got, w)
		}
	}
}

func TestExponentialBackoffDefaults(t *testing.T) {
	p := &ExponentialBackoff{NoJitter: true}
	tests := []struct {
		attempts int
		want     time.Duration
	}{
		{-3, 200 * time.Millisecond}, // treated as the first attempt
		{0, 200 * time.Millisecond},
		{1, 200 * time.Millisecond},
		{2, 400 * time.Millisecond},
		{9, 51200 * time.Millisecond},
		{10, 60 * time.Second}, // 102.4s capped at the default Max
		{11, 60 * time.Second},
	}
	for _, tc := range tests {
		if got := p.Delay(tc.attempts); got != tc.want {
			t.Errorf("Delay(%d) = %v, want %v", tc.attempts, got, tc.want)
		}
	}
}

func TestExponentialBackoffHugeAttempts(t *testing.T) {
	for _, p := range []*ExponentialBackoff{
		{NoJitter: true},
		{NoJitter: true, Base: time.Nanosecond, Max: time.Duration(math.MaxInt64)},
		{NoJitter: true, Base: 3 * time.Hour, Max: 1000 * time.Hour},
	} {
		maxD := p.Max
		if maxD == 0 {
			maxD = 60 * time.Second
		}
		prev := time.Duration(0)
		for _, n := range []int{1, 2, 30, 31, 32, 33, 60, 61, 62, 63, 64, 65, 100, 1000, math.MaxInt32, math.MaxInt} {
			got := p.Delay(n)
			if got <= 0 || got > maxD {
				t.Errorf("Base %v Max %v: Delay(%d) = %v, want in (0, %v]", p.Base, p.Max, n, got, maxD)
			}
			if got < prev {
				t.Errorf("Base %v Max %v: Delay(%d) = %v decreased from %v", p.Base, p.Max, n, got, prev)
			}
			prev = got
		}
	}
}

func TestExponentialBackoffJitter(t *testing.T) {
	tests := []struct {
		r        float64
		attempts int
		want     time.Duration
	}{
		{0, 1, 100 * time.Millisecond},        // 0.5 × 200ms
		{0.5, 1, 200 * time.Millisecond},      // 1.0 × 200ms
		{0.999, 1, 299800 * time.Microsecond}, // ≈1.5 × 200ms
		{0, 3, 400 * time.Millisecond},
		{0.999, 20, 89940 * time.Millisecond}, // ≈1.5 × the 60s cap
	}
	for _, tc := range tests {
		p := &ExponentialBackoff{Rand: func() float64 { return tc.r }}
		got := p.Delay(tc.attempts)
		if diff := got - tc.want; diff < -time.Microsecond || diff > time.Microsecond {
			t.Errorf("r=%v: Delay(%d) = %v, want %v", tc.r, tc.attempts, got, tc.want)
		}
	}
}

func TestExponentialBackoffDefaultRandInRange(t *testing.T) {
	p := &ExponentialBackoff{Base: time.Second, Max: time.Minute}
	for range 1000 {
		d := p.Delay(1)
		if d < 500*time.Millisecond || d >= 1500*time.Millisecond {
			t.Fatalf("Delay(1) = %v, want in [500ms, 1.5s)", d)
		}
	}
}

func TestExponentialBackoffConcurrentRand(t *testing.T) {
	// Rand is called under a lock: a non-thread-safe source stays race-free.
	calls := 0
	p := &ExponentialBackoff{Rand: func() float64 { calls++; return 0.5 }}
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 100 {
				p.Delay(2)
			}
		}()
	}
	for range 8 {
		<-done
	}
	if calls != 800 {
		t.Errorf("Rand called %d times, want 800", calls)
	}
}

func TestRetryPolicyFunc(t *testing.T) {
	var p RetryPolicy = RetryPolicyFunc(func(n int) time.Duration { return time.Duration(n) * time.Second })
	if got := p.Delay(3); got != 3*time.Second {
		t.Errorf("Delay(3) = %v", got)
	}
}

func TestExponentialBackoffJitterHugeMaxDoesNotOverflow(t *testing.T) {
	for _, r := range []float64{0, 0.5, 0.999} {
		p := &ExponentialBackoff{Base: time.Second, Max: time.Duration(math.MaxInt64), Rand: func() float64 { return r }}
		for _, n := range []int{1, 40, 63, 100, math.MaxInt} {
			if got := p.Delay(n); got <= 0 {
				t.Errorf("r=%v: Delay(%d) = %v, want positive", r, n, got)
			}
		}
	}
}
