package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// rateFlag is the value of --rate: at most perSecond events a second,
// given as 100/s, 600/m, 3600/h or a bare number (per second).
type rateFlag struct {
	perSecond float64
	raw       string
}

func (f *rateFlag) String() string { return f.raw }

func (f *rateFlag) Set(s string) error {
	num, unit, _ := strings.Cut(s, "/")
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n <= 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return fmt.Errorf("bad rate %q: want a positive number of events per second, minute or hour, such as 100/s, 600/m or 5000/h", s)
	}
	switch unit {
	case "", "s":
	case "m", "min":
		n /= 60
	case "h":
		n /= 3600
	default:
		return fmt.Errorf("bad rate %q: the unit is s, m or h (100/s, 600/m, 5000/h)", s)
	}
	f.perSecond, f.raw = n, s
	return nil
}

// set reports whether --rate was given.
func (f *rateFlag) set() bool { return f.perSecond > 0 }

// pacer paces a paced change (replay --rate): it cuts the ids into
// chunks of about a tenth of a second's worth and waits before each as
// its token bucket says, so the events go out at the rate on average and
// never in a burst larger than a chunk.
type pacer struct {
	lim   *rate.Limiter
	chunk int
	start time.Time
}

// newPacer returns the pacer of f, or nil for no pacing.
func newPacer(f rateFlag, pageSize int) *pacer {
	if !f.set() {
		return nil
	}
	chunk := max(1, min(pageSize, int(f.perSecond/10)))
	lim := rate.NewLimiter(rate.Limit(f.perSecond), chunk)
	lim.AllowN(time.Now(), chunk) // the bucket starts empty: the first chunk waits its turn too
	return &pacer{lim: lim, chunk: chunk}
}

// chunks cuts ids into the pacer's chunks: the whole page without pacing.
func (p *pacer) chunks(ids []string) [][]string {
	if p == nil {
		return [][]string{ids}
	}
	var out [][]string
	for len(ids) > 0 {
		n := min(p.chunk, len(ids))
		out = append(out, ids[:n])
		ids = ids[n:]
	}
	return out
}

// wait waits until n more events may go; without pacing at once.
func (p *pacer) wait(ctx context.Context, n int) error {
	if p == nil {
		return nil
	}
	if p.start.IsZero() {
		p.start = time.Now()
	}
	return p.lim.WaitN(ctx, n)
}

// speed says how fast done events of total went, and, with more left, when
// the rest will be done: "120/s, ETA 40s".
func (p *pacer) speed(done, total int64) string {
	if p == nil || p.start.IsZero() {
		return ""
	}
	elapsed := time.Since(p.start)
	if elapsed < time.Millisecond || done == 0 {
		return ""
	}
	perSec := float64(done) / elapsed.Seconds()
	s := fmt.Sprintf("%s/s", formatRate(perSec))
	if left := total - done; left > 0 {
		s += ", ETA " + formatAge(time.Duration(float64(left)/perSec*float64(time.Second)))
	}
	return s
}

// elapsed is how long the pacing has been running.
func (p *pacer) elapsed() time.Duration {
	if p == nil || p.start.IsZero() {
		return 0
	}
	return time.Since(p.start)
}

// formatRate writes a rate per second with a sensible precision.
func formatRate(r float64) string {
	if r >= 10 {
		return strconv.FormatFloat(math.Round(r), 'f', -1, 64)
	}
	return strconv.FormatFloat(r, 'f', 1, 64)
}
