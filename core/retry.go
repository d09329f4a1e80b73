package outbox

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// RetryPolicy decides how long to wait before the next delivery attempt.
type RetryPolicy interface {
	// Delay returns the wait after the given number of failed attempts (≥ 1).
	Delay(attempts int) time.Duration
}

// RetryPolicyFunc adapts a function to RetryPolicy.
type RetryPolicyFunc func(attempts int) time.Duration

// Delay calls f.
func (f RetryPolicyFunc) Delay(attempts int) time.Duration { return f(attempts) }

// The defaults of ExponentialBackoff, and of Config.RetryBase and
// Config.RetryMax.
const (
	// DefaultRetryBase is the first retry delay unless Base sets another.
	DefaultRetryBase = 200 * time.Millisecond
	// DefaultRetryMax caps the retry delay unless Max sets another cap.
	DefaultRetryMax = 60 * time.Second
)

// ExponentialBackoff is the default RetryPolicy:
// min(Max, Base·2^(attempts-1)) multiplied by a jitter factor drawn
// uniformly from [0.5, 1.5).
type ExponentialBackoff struct {
	// Base is the first delay (default 200ms).
	Base time.Duration
	// Max caps the delay before jitter (default 60s).
	Max time.Duration
	// Rand returns a float in [0,1); nil uses math/rand/v2. Inject it for
	// deterministic tests.
	Rand func() float64
	// NoJitter disables the jitter factor.
	NoJitter bool

	mu sync.Mutex
}

// Delay implements RetryPolicy.
func (p *ExponentialBackoff) Delay(attempts int) time.Duration {
	base, maxD := p.Base, p.Max
	if base <= 0 {
		base = DefaultRetryBase
	}
	if maxD <= 0 {
		maxD = DefaultRetryMax
	}
	if attempts < 1 {
		attempts = 1
	}
	d := maxD
	if attempts-1 < 62 {
		if b := base << (attempts - 1); b > 0 && b < maxD && b>>(attempts-1) == base {
			d = b
		}
	}
	if p.NoJitter {
		return d
	}
	var r float64
	if p.Rand != nil {
		p.mu.Lock()
		r = p.Rand()
		p.mu.Unlock()
	} else {
		r = rand.Float64()
	}
	j := float64(d) * (0.5 + r)
	if j >= math.MaxInt64 { // a huge Max times the jitter would overflow to a negative delay
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(j)
}
