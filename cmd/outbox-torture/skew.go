package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
)

// With -skew S, the worker processes run with clocks off the real one by
// up to ±S: worker i of n adds -S + 2S·i/(n-1) to every time its Client
// reads (Config.Clock), and sets Config.MaxClockSkew to 2S, the most two
// workers' clocks differ (-skew-unguarded leaves it at 0, to show what it
// guards against). The database's clock is not involved: the Clients
// write and compare their own times only (docs/guarantees.md, "Clocks").
// The line adds
//
//	skew=… max_clock_skew=… early=… early_checked=… early_max_ms=… stolen=…
//
// early counts the deliveries of delayed events that started before the
// event was due by more than the clocks' difference allows: the events
// written with WithAvailableAt (one in skewDelayedEvery, due 1 s to 2S+1 s
// after the writer's clock) and those whose first delivery answered
// outbox.RetryAfter(2S+1s) (the fates in skewRetryFates): longer than the
// clocks differ, so that a skewed claimer finds them due early. A claimer whose clock is
// ahead of the writer's (or of the node that decided the retry) by D sees
// the event due D early: a start is early when it comes more than
// max(0, D) + skewSlack before the due time on the real clock. It must be
// 0. Starts on a take-over are not checked (a take-over claims a row whose
// owner stored no outcome, a RetryAfter's included, due or not): the
// deliveries of rows claimed as due are. early_checked counts the starts checked, early_max_ms how early the
// earliest of them came on the real clock (at most 2S).
//
// stolen counts the take-overs of a live claim: a claim taken over from a
// worker whose process was alive less than a Lease (on the real clock)
// after the owner's last claim or renewal of the row. Each worker's
// claims read, before they claim, the claimed rows whose lease has run
// out by the claimer's clock, with their owner, which names the owner's
// process and clock offset (skewOwner); a row then taken over is checked.
// With MaxClockSkew 2S it must be 0; with -skew-unguarded, a worker ahead
// of an owner by more than the renewal's margin (2·Lease/3 less the
// renewal's own time) steals its claims.

const (
	// skewDelayedEvery: one event in this many is written delayed.
	skewDelayedEvery = 20
	// skewSlack absorbs the rounding of the stored times (microseconds).
	skewSlack = time.Millisecond
	// The skew's tables: every checked start of a delayed event, the due
	// time of each RetryAfter, and every stolen claim.
	skewStartsTable = "torture_skew_starts"
	skewDueTable    = "torture_skew_due"
	skewStolenTable = "torture_skew_stolen"
)

// skewRetryFates are the fates (see fate) of the events whose first
// delivery answers RetryAfter: 5%, clear of the failing, panicking,
// poison and slow shares (checkSkew).
var skewRetryFates = [2]uint32{500, 550}

// skewFlags registers the flags of -skew.
func skewFlags(c *config) {
	flag.DurationVar(&c.skew, "skew", 0, "run the workers with clocks off by up to ±this (spread over the workers), MaxClockSkew twice that; count early delayed deliveries and stolen claims")
	flag.BoolVar(&c.skewUnguarded, "skew-unguarded", false, "with -skew: leave the workers' MaxClockSkew at 0 (stolen claims are then expected, reported and not an error)")
	flag.DurationVar(&c.clockOffset, "clock-offset", 0, "internal: this worker's clock offset")
}

// checkSkew checks the flags of -skew.
func checkSkew(c config) error {
	switch {
	case c.skew == 0:
		return nil
	case c.skew < 0:
		return errors.New("-skew: want a positive duration")
	case c.dbFault() != "":
		return errors.New("-skew does not combine with -failover or -unsafe-commit")
	case uint32(c.poisonPermille+10*(c.failPct+c.panicPct)) > skewRetryFates[0] || uint32(1000-c.slowPermille) < skewRetryFates[1]:
		return errors.New("-skew: -poison-permille, -fail-pct, -panic-pct or -slow-permille overlap the RetryAfter share")
	}
	return nil
}

// skewOffset is the clock offset of worker id of n: -S to +S, evenly.
func skewOffset(c config, id int) time.Duration {
	if c.workers < 2 {
		return c.skew
	}
	return -c.skew + time.Duration(int64(2*c.skew)*int64(id)/int64(c.workers-1))
}

// skewArgs are the flags of -skew that worker id gets.
func skewArgs(c config, id int) []string {
	if c.skew == 0 {
		return nil
	}
	return []string{"-skew", c.skew.String(), "-clock-offset", skewOffset(c, id).String(), "-skew-unguarded=" + strconv.FormatBool(c.skewUnguarded)}
}

// skewTables are the statements that drop the skew's tables and, with
// -skew, create them.
func skewTables(c config) []string {
	stmts := []string{"DROP TABLE IF EXISTS " + skewStartsTable, "DROP TABLE IF EXISTS " + skewDueTable, "DROP TABLE IF EXISTS " + skewStolenTable}
	if c.skew == 0 {
		return stmts
	}
	return append(stmts,
		"CREATE TABLE "+skewStartsTable+" (event_id VARCHAR(36) NOT NULL, worker INT NOT NULL, ahead_us BIGINT NOT NULL, bound_us BIGINT NOT NULL)",
		"CREATE TABLE "+skewDueTable+" (event_id VARCHAR(36) PRIMARY KEY, due_us BIGINT NOT NULL, offset_us BIGINT NOT NULL)",
		"CREATE TABLE "+skewStolenTable+" (event_id VARCHAR(36) NOT NULL, thief VARCHAR(128) NOT NULL, owner VARCHAR(128) NOT NULL, age_us BIGINT NOT NULL)")
}

// skew is a worker's side of -skew; its methods do nothing without it.
type skew struct {
	c      config
	db     *sql.DB
	pid    int
	offset time.Duration
	// takenOver holds the events this process last claimed by a
	// take-over: their delivery is not checked for an early start, as a
	// take-over claims a row whose owner stored no outcome, due or not.
	takenOver sync.Map
	// ins* are the statements of the skew's tables.
	insStart, insDue, selDue, insStolen, selClaimed string
}

func newSkew(c config, db *sql.DB, pid int) *skew {
	return &skew{c: c, db: db, pid: pid, offset: c.clockOffset,
		insStart:   bind(c.db, "INSERT INTO "+skewStartsTable+" (event_id, worker, ahead_us, bound_us) VALUES (?, ?, ?, ?)"),
		insDue:     bind(c.db, "INSERT INTO "+skewDueTable+" (event_id, due_us, offset_us) VALUES (?, ?, ?)"),
		selDue:     bind(c.db, "SELECT due_us, offset_us FROM "+skewDueTable+" WHERE event_id = ?"),
		insStolen:  bind(c.db, "INSERT INTO "+skewStolenTable+" (event_id, thief, owner, age_us) VALUES (?, ?, ?, ?)"),
		selClaimed: "SELECT event_id, locked_by, locked_at FROM " + outboxTable + " WHERE status IN (0, 2) AND locked_by IS NOT NULL",
	}
}

func (s *skew) on() bool { return s.c.skew > 0 }

// now is this worker's clock.
func (s *skew) now() time.Time { return time.Now().Add(s.offset).UTC() }

// clock is the Client's Clock (nil: the system's).
func (s *skew) clock() outbox.Clock {
	if !s.on() {
		return nil
	}
	return outbox.ClockFunc(s.now)
}

// maxClockSkew is the Client's MaxClockSkew: the most two workers' clocks differ.
func (s *skew) maxClockSkew() time.Duration {
	if !s.on() || s.c.skewUnguarded {
		return 0
	}
	return 2 * s.c.skew
}

// owner is the Client's Owner ("" for the default): it names the process
// and its clock offset, for the claims that take its rows over.
func (s *skew) owner() string {
	if !s.on() {
		return ""
	}
	return fmt.Sprintf("torture-w%d-p%d-o%d-%s", s.c.workerID, s.pid, s.offset.Microseconds(), outbox.NewOwnerID())
}

// parseOwner reads the process and clock offset of a worker's owner.
func parseOwner(owner string) (pid int, offset time.Duration, ok bool) {
	var w int
	var us int64
	if _, err := fmt.Sscanf(owner, "torture-w%d-p%d-o%d-", &w, &pid, &us); err != nil {
		return 0, 0, false
	}
	return pid, time.Duration(us) * time.Microsecond, true
}

// skewPayload is the payload of a delayed event: its due time on the real
// clock and its writer's clock offset.
type skewPayload struct {
	Torture  bool  `json:"torture"`
	DueUS    int64 `json:"due_us,omitempty"`
	OffsetUS int64 `json:"offset_us,omitempty"`
}

// payload returns the options of the n-th event a writer writes: its
// payload and, one in skewDelayedEvery with -skew, a due time 1 s to 2S+1 s
// after the writer's clock.
func (s *skew) payload(n int64) []outbox.EnvelopeOption {
	if !s.on() || n%skewDelayedEvery != skewDelayedEvery/2 {
		return []outbox.EnvelopeOption{outbox.WithJSON([]byte(`{"torture":true}`))}
	}
	delay := time.Second + time.Duration(n/skewDelayedEvery%5)*s.c.skew/2
	real := time.Now()
	p, _ := json.Marshal(skewPayload{Torture: true, DueUS: real.Add(delay).UnixMicro(), OffsetUS: s.offset.Microseconds()})
	return []outbox.EnvelopeOption{outbox.WithJSON(p), outbox.WithAvailableAt(real.Add(s.offset).Add(delay))}
}

// delivery checks the start of a delivery of e: a delayed event's start
// is recorded, with how early it came; the first delivery of an event of
// skewRetryFates records its due time and answers RetryAfter (an error:
// the listener returns it).
func (s *skew) delivery(ctx context.Context, e outbox.Envelope) error {
	if !s.on() || e.ID() == s.c.poisonID || e.ID() == s.c.hungID {
		return nil
	}
	start := time.Now()
	_, tookOver := s.takenOver.Load(e.ID())
	var due, writer int64 // real due time, offset of the clock that set it (µs)
	switch f := fate(e.ID()); {
	case f >= skewRetryFates[0] && f < skewRetryFates[1]:
		err := s.db.QueryRowContext(ctx, s.selDue, e.ID()).Scan(&due, &writer)
		if errors.Is(err, sql.ErrNoRows) {
			// The retry is due its delay after the Client decides it,
			// after this returns.
			delay := 2*s.c.skew + time.Second
			if _, err := s.db.ExecContext(ctx, s.insDue, e.ID(), start.Add(delay).UnixMicro(), s.offset.Microseconds()); err != nil {
				return err
			}
			return outbox.RetryAfter(delay, "torture: delayed by -skew")
		}
		if err != nil {
			return err
		}
	case strings.Contains(e.PayloadString(), `"due_us"`):
		var p skewPayload
		if err := json.Unmarshal(e.Payload(), &p); err != nil {
			return err
		}
		due, writer = p.DueUS, p.OffsetUS
	default:
		return nil
	}
	if tookOver {
		return nil
	}
	bound := max(s.offset.Microseconds()-writer, 0)
	_, err := s.db.ExecContext(ctx, s.insStart, e.ID(), s.c.workerID, due-start.UnixMicro(), bound)
	return err
}

// store wraps the worker's Store: its claims check the rows they take over.
func (s *skew) store(st *outboxsql.Store) outbox.Store {
	if !s.on() {
		return st
	}
	return &skewStore{Store: st, s: s}
}

// skewStore is a Store whose Claim records the live claims it takes over
// (stolen, see the top of this file). Every other method is the Store's.
type skewStore struct {
	*outboxsql.Store
	s *skew
}

// claimedRow is a claimed row as a claim found it before it claimed.
type claimedRow struct {
	owner    string
	lockedAt time.Time
}

// Claim claims as the Store does, after reading the rows claimed by
// others whose claim the request could take over.
func (st *skewStore) Claim(ctx context.Context, req outbox.ClaimRequest) ([]outbox.Record, error) {
	var before map[string]claimedRow
	if !req.NoRecovery {
		before = st.claimed(ctx, req)
	}
	recs, err := st.Store.Claim(ctx, req)
	taken := time.Now() // no earlier than the take-over: an age read here is no shorter than the true one
	for _, r := range recs {
		if r.LastError != outbox.ErrClaimExpired.Error() && r.LastError != outbox.ErrInFlight.Error() {
			st.s.takenOver.Delete(r.ID)
			continue
		}
		st.s.takenOver.Store(r.ID, true)
		was, ok := before[r.ID]
		if !ok {
			continue
		}
		pid, offset, ok := parseOwner(was.owner)
		if !ok {
			continue
		}
		// The owner wrote locked_at with its clock: on the real clock it
		// claimed or renewed the row at locked_at - offset.
		age := taken.Sub(was.lockedAt.Add(-offset))
		if age >= st.s.c.lease || syscall.Kill(pid, 0) != nil {
			continue
		}
		if _, err := st.s.db.ExecContext(ctx, st.s.insStolen, r.ID, req.Owner, was.owner, age.Microseconds()); err != nil {
			fmt.Fprintln(os.Stderr, "skew: record a stolen claim:", err)
		}
	}
	return recs, err
}

// claimed reads the rows claimed by another owner whose claim has run out
// by the request's clock (nil if the read fails: the claim goes on).
func (st *skewStore) claimed(ctx context.Context, req outbox.ClaimRequest) map[string]claimedRow {
	rows, err := st.s.db.QueryContext(ctx, st.s.selClaimed)
	if err != nil {
		return nil
	}
	defer rows.Close()
	cutoff := req.Now.Add(-req.Lease)
	out := map[string]claimedRow{}
	for rows.Next() {
		var id, owner string
		var at any
		if err := rows.Scan(&id, &owner, &at); err != nil {
			return nil
		}
		t, ok := scanTime(at)
		if ok && owner != req.Owner && !t.After(cutoff) {
			out[id] = claimedRow{owner: owner, lockedAt: t}
		}
	}
	return out
}

// scanTime reads a stored timestamp: a time (PostgreSQL, MySQL with
// parseTime), microseconds since the epoch (SQLite) or MySQL's text.
func scanTime(v any) (time.Time, bool) {
	switch t := v.(type) {
	case time.Time:
		return t.UTC(), true
	case int64:
		return time.UnixMicro(t).UTC(), true
	case []byte:
		return scanTime(string(t))
	case string:
		p, err := time.Parse("2006-01-02 15:04:05.999999", t)
		return p, err == nil
	}
	return time.Time{}, false
}

// skewReport is the line's part of -skew and its error: early deliveries,
// and stolen claims unless -skew-unguarded.
func (co *coordinator) skewReport(ctx context.Context) (string, error) {
	c := co.c
	if c.skew == 0 {
		return "", nil
	}
	var early, checked, stolen int
	var aheadMax sql.NullInt64
	q := fmt.Sprintf("SELECT COUNT(*), COALESCE(SUM(CASE WHEN ahead_us > bound_us + %d THEN 1 ELSE 0 END), 0), MAX(ahead_us) FROM %s", skewSlack.Microseconds(), skewStartsTable)
	err := co.db.QueryRowContext(ctx, q).Scan(&checked, &early, &aheadMax)
	if err == nil {
		err = co.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+skewStolenTable).Scan(&stolen)
	}
	if err != nil {
		return "", fmt.Errorf("skew: %w", err)
	}
	guard := (2 * c.skew).String()
	if c.skewUnguarded {
		guard = "0"
	}
	line := fmt.Sprintf(" skew=%s max_clock_skew=%s early=%d early_checked=%d early_max_ms=%.0f stolen=%d",
		c.skew, guard, early, checked, float64(aheadMax.Int64)/1e3, stolen)
	var errs []error
	if early > 0 {
		errs = append(errs, fmt.Errorf("%d delayed deliveries started earlier than the clocks' difference allows", early))
	}
	if checked == 0 {
		errs = append(errs, errors.New("skew: no delayed delivery was checked"))
	}
	if stolen > 0 && !c.skewUnguarded {
		errs = append(errs, fmt.Errorf("%d live claims were taken over within a lease of their last renewal", stolen))
	}
	return line, errors.Join(errs...)
}
