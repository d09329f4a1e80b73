package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// durationFlag is a flag.Value for ages: Go durations (90m, 36h) with days
// in front (7d, 1d12h). Negative ages are refused.
type durationFlag struct {
	d   time.Duration
	raw string // as given
	set bool
}

// String returns the duration as it was given.
func (f *durationFlag) String() string { return f.raw }

func (f *durationFlag) Set(s string) error {
	d, err := parseAge(s)
	if err != nil {
		return err
	}
	f.d, f.raw, f.set = d, s, true
	return nil
}

// parseAge parses a non-negative duration: an optional whole number of days
// ("7d"), followed by a time.ParseDuration string ("12h30m").
func parseAge(s string) (time.Duration, error) {
	rest := s
	var days time.Duration
	if i := strings.IndexByte(rest, 'd'); i > 0 {
		n, err := strconv.ParseUint(rest[:i], 10, 16)
		if err != nil {
			return 0, fmt.Errorf("bad duration %q: want 90m, 36h, 7d or 1d12h", s)
		}
		days, rest = time.Duration(n)*24*time.Hour, rest[i+1:]
	}
	var d time.Duration
	if rest != "" || days == 0 {
		var err error
		if d, err = time.ParseDuration(rest); err != nil {
			return 0, fmt.Errorf("bad duration %q: want 90m, 36h, 7d or 1d12h", s)
		}
	}
	if d < 0 {
		return 0, errors.New("the duration must not be negative")
	}
	return days + d, nil
}

// formatAge writes d rounded to a readable precision: 45s, 12m30s, 5h3m,
// 3d4h.
func formatAge(d time.Duration) string {
	if d < 0 {
		return "-" + formatAge(-d)
	}
	d = d.Round(time.Second)
	two := func(n1 int64, u1 string, n2 int64, u2 string) string {
		if n2 == 0 {
			return fmt.Sprintf("%d%s", n1, u1)
		}
		return fmt.Sprintf("%d%s%d%s", n1, u1, n2, u2)
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int64(d.Round(time.Second)/time.Second))
	case d < time.Hour:
		s := int64(d.Round(time.Second) / time.Second)
		return two(s/60, "m", s%60, "s")
	case d < 48*time.Hour:
		m := int64(d.Round(time.Minute) / time.Minute)
		return two(m/60, "h", m%60, "m")
	}
	h := int64(d.Round(time.Hour) / time.Hour)
	return two(h/24, "d", h%24, "h")
}
