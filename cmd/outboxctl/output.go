package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxadmin"
)

func isNotFound(err error) bool { return errors.Is(err, outbox.ErrNotFound) }

// printf writes to w; a failed write of the terminal is not worth an error.
func (c *cli) printf(w io.Writer, format string, args ...any) {
	_, _ = fmt.Fprintf(w, format, args...)
}

// writeJSON prints v as the run's one JSON document.
func (c *cli) writeJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return failErr("write output: %v", err)
	}
	return nil
}

// table returns an aligned table on stdout; Flush prints it.
func (c *cli) table() *tabwriter.Writer {
	return tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
}

func flush(tw *tabwriter.Writer) error {
	if err := tw.Flush(); err != nil {
		return failErr("write output: %v", err)
	}
	return nil
}

// cell makes s fit one table cell: control characters (tabs, newlines,
// terminal escapes) are shown escaped, long text is cut to limit runes (0:
// no limit), and an empty value is a dash.
func cell(s string, limit int) string {
	if s == "" {
		return "-"
	}
	s = printable(s)
	if r := []rune(s); limit > 0 && len(r) > limit {
		s = string(r[:limit-1]) + "…"
	}
	return s
}

// printable escapes the control characters of s, as Go would quote them.
func printable(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

const (
	timeLayout     = "2006-01-02T15:04:05Z07:00"
	timeLayoutMsec = "2006-01-02T15:04:05.000Z07:00"
)

func fmtTime(t time.Time, layout string) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(layout)
}

// migrateJSON is the output of `migrate --json`.
type migrateJSON struct {
	Dialect    string   `json:"dialect"`
	Table      string   `json:"table"`
	Applied    bool     `json:"applied"`
	Statements []string `json:"statements"`
}

func (c *cli) printMigrate(dialect, table string, stmts []string, applied bool) error {
	if c.g.json {
		return c.writeJSON(migrateJSON{Dialect: dialect, Table: table, Applied: applied, Statements: stmts})
	}
	if applied {
		c.printf(c.stdout, "table %s and its indexes are in place (%s)\n", table, dialect)
		return nil
	}
	c.printf(c.stdout, "-- outbox table %s, %s; `outboxctl migrate --apply` runs these statements.\n", table, dialect)
	for _, s := range stmts {
		c.printf(c.stdout, "%s;\n\n", s)
	}
	return nil
}

// statsJSON is the output of `stats --json`.
type statsJSON struct {
	Table string `json:"table"`
	// Tenant is the tenant of stats --tenant: the counts are of its events.
	Tenant string `json:"tenant,omitempty"`
	outboxadmin.Stats
	// Pauses are the stored pauses of the table (not with --tenant).
	Pauses []outboxadmin.Pause `json:"pauses,omitempty"`
}

// printStats prints the counts of st and its oldest pending event; for a
// tenant ("" for the whole table) the counts only.
func (c *cli) printStats(table, tenant string, st outbox.Stats) error {
	now := c.now()
	out := statsJSON{Table: table, Tenant: tenant, Stats: outboxadmin.NewStats(st, now), Pauses: c.pausesNow}
	if c.g.json {
		return c.writeJSON(out)
	}
	tw := c.table()
	c.printf(tw, "STATUS\tEVENTS\n")
	statuses := outboxadmin.Statuses()
	for _, s := range statuses {
		if s == outbox.StatusDone && out.DoneEstimated {
			c.printf(tw, "%s\t~%d (estimated)\n", s, out.Counts[s.String()])
			continue
		}
		c.printf(tw, "%s\t%d\n", s, out.Counts[s.String()])
	}
	for _, s := range slices.Sorted(maps.Keys(out.Counts)) {
		if !slices.ContainsFunc(statuses, func(k outbox.Status) bool { return k.String() == s }) {
			c.printf(tw, "%s\t%d\n", s, out.Counts[s])
		}
	}
	if out.DoneEstimated {
		c.printf(tw, "total\t~%d\n", out.Total)
	} else {
		c.printf(tw, "total\t%d\n", out.Total)
	}
	if err := flush(tw); err != nil {
		return err
	}
	if tenant != "" {
		c.printf(c.stdout, "\nevents of tenant %s\n", tenant)
		return nil
	}
	if st.OldestPending.IsZero() {
		c.printf(c.stdout, "\noldest pending: none\n")
	} else {
		age := max(now.Sub(st.OldestPending), 0)
		c.printf(c.stdout, "\noldest pending: created %s, %s ago\n", fmtTime(st.OldestPending, timeLayout), formatAge(age))
	}
	c.printf(c.stdout, "due now: %d\n", out.Due)
	c.printf(c.stdout, "claimed: %d\n", out.Claimed)
	for _, p := range out.Pauses {
		c.printf(c.stdout, "paused: %s, by %s since %s (%s ago): %s\n", cell(p.Scope, 0), cell(p.By, 0), fmtTime(p.At, timeLayout),
			formatAge(max(now.Sub(p.At), 0)), cell(firstLine(p.Reason), 80))
	}
	for _, u := range out.Unrouted {
		oldest := "-"
		if u.Oldest != nil {
			oldest = formatAge(max(now.Sub(*u.Oldest), 0))
		}
		c.printf(c.stdout, "unrouted: %s, %d pending, the oldest %s old: no live instance routes it\n", cell(u.Type, 0), u.Pending, oldest)
	}
	for _, name := range slices.Sorted(maps.Keys(out.DeadBySubscriber)) {
		c.printf(c.stdout, "DEAD owing subscriber %s: %d\n", cell(name, 0), out.DeadBySubscriber[name])
	}
	c.printHorizon(out.Horizon, now)
	return nil
}

// printHorizon prints the horizon guard's report (PostgreSQL): the
// table's tuples and size, what holds the vacuum horizon back, and each
// warning, with the default thresholds (see outbox.Knobs).
func (c *cli) printHorizon(hz *outboxadmin.Horizon, now time.Time) {
	if hz == nil {
		return
	}
	vacuumed := "never"
	if last := laterOf(hz.LastVacuum, hz.LastAutovacuum); last != nil {
		vacuumed = formatAge(max(now.Sub(*last), 0)) + " ago"
	}
	c.printf(c.stdout, "storage: %d dead tuples, %d live, %d bytes with indexes, last vacuumed %s\n",
		hz.DeadTuples, hz.LiveTuples, hz.TableBytes, vacuumed)
	for _, h := range hz.Holders {
		age := "-"
		if h.AgeSeconds > 0 {
			age = formatAge(time.Duration(h.AgeSeconds * float64(time.Second)))
		}
		c.printf(c.stdout, "horizon held by: %s, pid %d, %s, %s, for %s, %d transactions\n",
			h.Kind, h.PID, cell(h.Name, 64), cell(h.State, 64), age, h.XIDAge)
	}
	for _, w := range hz.Warnings {
		c.printf(c.stdout, "WARNING (%s): %s\n", w.Check, cell(w.Message, 0))
	}
}

// laterOf returns the later of two times, nil if neither is set.
func laterOf(a, b *time.Time) *time.Time {
	if a == nil || (b != nil && b.After(*a)) {
		return b
	}
	return a
}

// eventJSON is one event in JSON output.
type eventJSON = outboxadmin.Event

// toJSON is the JSON view of r with its headers and payload; headers are
// an object even for a row that cannot be decoded.
func toJSON(r outbox.Record) eventJSON {
	e := outboxadmin.NewEvent(r, outboxadmin.EventOptions{Payload: true})
	if e.Headers == nil {
		e.Headers = map[string]string{}
	}
	return e
}

func (c *cli) printEvent(r outbox.Record) error {
	if c.g.json {
		return c.writeJSON(toJSON(r))
	}
	env := r.Envelope
	tw := c.table()
	row := func(k, v string) { c.printf(tw, "%s\t%s\n", k, v) }
	row("ID", cell(r.ID, 0))
	if r.Err == nil {
		row("TYPE", cell(env.Type(), 0))
		row("AGGREGATE", cell(env.AggregateType(), 0)+" "+cell(env.AggregateID(), 0))
		row("TENANT", cell(env.TenantID(), 0))
		row("SCHEMA VERSION", strconv.Itoa(env.SchemaVersion()))
	}
	row("STATUS", r.Status.String())
	if len(r.Subscribers) > 0 {
		row("SUBSCRIBERS", cell(strings.Join(r.Subscribers, ", "), 0))
	}
	row("ATTEMPTS", strconv.Itoa(r.Attempts))
	if r.Err == nil {
		row("OCCURRED AT", fmtTime(env.OccurredAt(), timeLayoutMsec))
	}
	row("CREATED AT", fmtTime(r.CreatedAt, timeLayoutMsec))
	row("AVAILABLE AT", fmtTime(r.AvailableAt, timeLayoutMsec))
	row("DONE AT", fmtTime(r.DoneAt, timeLayoutMsec))
	row("LOCKED BY", cell(r.LockedBy, 0))
	row("LOCKED AT", fmtTime(r.LockedAt, timeLayoutMsec))
	if r.Err != nil {
		row("DECODE ERROR", cell(r.Err.Error(), 0))
	}
	if r.Err == nil && env.NumHeaders() > 0 {
		row("HEADERS", "")
		h := env.Headers()
		for _, k := range slices.Sorted(maps.Keys(h)) {
			row("  "+cell(k, 0), cell(h[k], 0))
		}
	}
	if err := flush(tw); err != nil {
		return err
	}
	if r.LastError != "" {
		c.printf(c.stdout, "\nLAST ERROR\n%s\n", printableLines(r.LastError))
	}
	if r.Err == nil {
		if kind, text := outboxadmin.PayloadText(env); kind != "" {
			encoding := "JSON"
			if kind == "bytes" {
				encoding = "bytes, base64"
			}
			c.printf(c.stdout, "\nPAYLOAD (%s)\n%s\n", encoding, printableLines(text))
		}
	}
	return nil
}

// printableLines escapes the control characters of s but its line breaks.
func printableLines(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = printable(l)
	}
	return strings.Join(lines, "\n")
}

// listJSON is the document of `dead list --json`, as deadList streams it.
type listJSON struct {
	Events []eventJSON `json:"events"`
	// NextAfter is set when more events match: pass it to --after.
	NextAfter string `json:"next_after,omitempty"`
}

// jsonStream writes one JSON document, an object whose first field is an
// array written an element at a time, so that a long list is never held
// whole: `dead list --json` (events, next_after) and `dead replay-all
// --json` (ids, replayed). It is indented as writeJSON indents.
type jsonStream struct {
	w     io.Writer
	field string
	n     int
	err   error
}

// add writes v as the array's next element.
func (j *jsonStream) add(v any) {
	if j.err != nil {
		return
	}
	var b bytes.Buffer
	if j.n == 0 {
		b.WriteString("{\n  " + strconv.Quote(j.field) + ": [")
	} else {
		b.WriteString(",")
	}
	b.WriteString("\n    ")
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("    ", "  ")
	if j.err = enc.Encode(v); j.err != nil {
		return
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	_, j.err = j.w.Write(b.Bytes())
	j.n++
}

// end closes the array and the object, after the field named field with
// value v unless field is "".
func (j *jsonStream) end(field string, v any) error {
	var b bytes.Buffer
	if j.n == 0 {
		b.WriteString("{\n  " + strconv.Quote(j.field) + ": []")
	} else {
		b.WriteString("\n  ]")
	}
	if field != "" {
		text, err := json.Marshal(v)
		if err != nil {
			return failErr("write output: %v", err)
		}
		b.WriteString(",\n  " + strconv.Quote(field) + ": " + string(text))
	}
	b.WriteString("\n}\n")
	if j.err == nil {
		_, j.err = j.w.Write(b.Bytes())
	}
	if j.err != nil {
		return failErr("write output: %v", j.err)
	}
	return nil
}

// deadList prints the events of `dead list` as they are read, a page at
// a time: a table (aligned per page) or, with --json, the listJSON
// document {"events": […], "next_after": ID}, where next_after is set
// when more events match: pass it to --after.
type deadList struct {
	c    *cli
	n    int
	last string
	js   *jsonStream
	tw   *tabwriter.Writer
	now  time.Time
}

func (c *cli) newDeadList() *deadList {
	l := &deadList{c: c, now: c.now()}
	if c.g.json {
		l.js = &jsonStream{w: c.stdout, field: "events"}
	} else {
		l.tw = c.table()
	}
	return l
}

// add prints r.
func (l *deadList) add(r outbox.Record) {
	l.n++
	l.last = r.ID
	if l.js != nil {
		l.js.add(toJSON(r))
		return
	}
	c := l.c
	if l.n == 1 {
		c.printf(l.tw, "ID\tTYPE\tAGGREGATE\tATTEMPTS\tDEAD SINCE\tAGE\tLAST ERROR\n")
	}
	typ, agg := "?", "?"
	if r.Err == nil {
		typ, agg = cell(r.Envelope.Type(), 40), cell(r.Envelope.AggregateType(), 30)+" "+cell(r.Envelope.AggregateID(), 30)
	}
	if len(r.Subscribers) > 0 {
		typ += " [" + cell(strings.Join(r.Subscribers, ","), 40) + "]" // the subscribers it owes
	}
	lastErr := r.LastError
	if r.Err != nil {
		lastErr = "cannot decode: " + r.Err.Error()
	}
	c.printf(l.tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", cell(r.ID, 0), typ, agg, r.Attempts,
		fmtTime(deadAt(r), timeLayout), formatAge(max(l.now.Sub(deadAt(r)), 0)), cell(firstLine(lastErr), 60))
}

// flush prints the rows added so far.
func (l *deadList) flush() error {
	if l.tw == nil {
		return nil
	}
	return flush(l.tw)
}

// end ends the list; more says that more events match than were listed.
func (l *deadList) end(more bool) error {
	next := ""
	if more && l.n > 0 {
		next = l.last
	}
	if l.js != nil {
		if next != "" {
			return l.js.end("next_after", next)
		}
		return l.js.end("", nil)
	}
	if err := l.flush(); err != nil {
		return err
	}
	if l.n == 0 {
		l.c.printf(l.c.stdout, "no DEAD events match\n")
	}
	if next != "" {
		l.c.printf(l.c.stdout, "\nmore match: add --after %s for the next page\n", next)
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// changeJSON is the output of `dead replay`, `dead replay-all` and
// `dead delete` with --json (see change).
type changeJSON struct {
	Replayed *int64   `json:"replayed,omitempty"`
	Deleted  *int64   `json:"deleted,omitempty"`
	IDs      []string `json:"ids"`
}

func (c *cli) printChange(verb string, n int64, ids []string) error {
	ch := c.newChange(verb)
	for _, id := range ids {
		ch.add(id)
	}
	return ch.end(n, int64(len(ids)))
}

// changeText says that n of the of events named were verb (replayed,
// deleted).
func (c *cli) changeText(verb string, n, of int64) {
	switch {
	case of == 0:
		c.printf(c.stdout, "no DEAD events match; nothing %s\n", verb)
	case n == of && verb == "replayed":
		c.printf(c.stdout, "replayed %d %s: NEW again, due now, with zero attempts\n", n, plural(n, "event"))
	case n == of:
		c.printf(c.stdout, "deleted %d DEAD %s\n", n, plural(n, "event"))
	default:
		c.printf(c.stdout, "%s %d of %d %s (the others stopped being DEAD meanwhile)\n", verb, n, of, plural(of, "event"))
	}
}

// change prints the outcome of `dead replay`, `dead replay-all` and
// `dead delete`: a line, or with --json the document {"ids": […],
// "replayed" or "deleted": n} (changeJSON), its ids written as they
// change.
type change struct {
	c    *cli
	verb string
	js   *jsonStream
}

func (c *cli) newChange(verb string) *change {
	ch := &change{c: c, verb: verb}
	if c.g.json {
		ch.js = &jsonStream{w: c.stdout, field: "ids"}
	}
	return ch
}

// add names one more event of the change.
func (ch *change) add(id string) {
	if ch.js != nil {
		ch.js.add(id)
	}
}

// end says that n of the of events named were changed.
func (ch *change) end(n, of int64) error {
	if ch.js != nil {
		return ch.js.end(ch.verb, n)
	}
	ch.c.changeText(ch.verb, n, of)
	return nil
}

// thousands writes n with a comma between each group of three digits:
// 12,345.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

func plural(n int64, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// purgeJSON is the output of `purge --json`.
type purgeJSON struct {
	Status string    `json:"status"`
	Tenant string    `json:"tenant,omitempty"`
	Before time.Time `json:"before"`
	Purged int64     `json:"purged"`
}

func (c *cli) printPurge(st outbox.Status, tenant string, before time.Time, n int64) error {
	if c.g.json {
		return c.writeJSON(purgeJSON{Status: st.String(), Tenant: tenant, Before: before.UTC(), Purged: n})
	}
	c.printf(c.stdout, "purged %d %s %s%s completed before %s\n", n, st, plural(n, "event"), ofTenant(tenant), fmtTime(before, timeLayout))
	return nil
}
