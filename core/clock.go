package outbox

import "time"

// Clock tells the time. Every timestamp the framework writes or compares
// comes from one Clock, in UTC, so tests can move time and the database
// session's time zone never matters.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now().UTC() }

// SystemClock is the wall clock, in UTC.
var SystemClock Clock = systemClock{}

// ClockFunc adapts a function to Clock.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

func clockOr(c Clock) Clock {
	if c == nil {
		return SystemClock
	}
	return c
}

func utcNow(c Clock) time.Time { return c.Now().UTC() }
