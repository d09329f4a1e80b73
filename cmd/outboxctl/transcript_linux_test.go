package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxadmin/outboxadmintest"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
)

// envTranscript, when set, is the file TestTranscript writes its session
// to, as docs/outboxctl.md shows it.
const envTranscript = "OUTBOX_TRANSCRIPT"

// seedOutage writes what an outage of the payments API leaves: n DEAD
// events of three types and two tenants (and none), DEAD in the last hour.
func (e *env) seedOutage(n int) {
	e.t.Helper()
	txm := outboxsql.NewTxManager(e.db)
	client, err := outbox.New(outbox.Config{Store: e.store, TxContext: txm, Mode: outbox.ModeWriterOnly})
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = client.Close(context.Background()) }()
	types := []string{"PaymentCaptured", "PaymentCaptured", "PaymentCaptured", "RefundIssued", "InvoiceSent"}
	tenants := []string{"acme", "globex", "acme", ""}
	now := time.Now().UTC()
	for done := 0; done < n; {
		batch := make([]outboxadmintest.Event, min(500, n-done))
		for i := range batch {
			k := done + i
			opts := []outbox.EnvelopeOption{outbox.WithAggregate(outbox.AggregateName("Payment"), fmt.Sprintf("p-%d", 1000+k)),
				outbox.WithJSON(fmt.Appendf(nil, `{"payment":"p-%d"}`, 1000+k))}
			if t := tenants[k%len(tenants)]; t != "" {
				opts = append(opts, outbox.WithTenant(t))
			}
			batch[i] = outboxadmintest.Event{Envelope: outbox.MustEnvelope(outbox.EventName(types[k%len(types)]), opts...),
				Status: outbox.StatusDead, At: now.Add(-time.Hour + time.Duration(k)*time.Second), Error: "payments API: 503 Service Unavailable"}
		}
		outboxadmintest.Seed(e.t, client, e.store, txm, batch...)
		done += len(batch)
	}
}

// TestTranscript runs an operator's session on SQLite — pause, pauses,
// resume, a dry run of a replay, a replay at a rate with its progress on
// a terminal, the audit trail — and checks what each command printed.
// With OUTBOX_TRANSCRIPT=path it writes the session there, as
// docs/outboxctl.md shows it.
func TestTranscript(t *testing.T) {
	b := outboxsqltest.Backends()[0]
	e := newEnv(t, b)
	// The database is the test's own file: the table has its usual name.
	store, err := outboxsql.Open(e.db, outboxsql.WithDialect(b.Dialect), outboxsql.WithTable("outbox_event"))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.store = store
	e.seedOutage(600)
	controller, tty := openPTY(t)
	out := bufio.NewReader(controller)
	var doc strings.Builder
	step := func(args []string, want ...string) string {
		t.Helper()
		var stdout bytes.Buffer
		c := newCLI(context.Background(), strings.NewReader(""), &stdout, tty)
		code := c.execute(append([]string{"--db", e.url, "--table", e.store.Table()}, args...))
		const end = "<end of run>"
		if _, err := tty.WriteString(end); err != nil {
			t.Fatal(err)
		}
		shown := strings.TrimSuffix(readUntil(t, out, end), end)
		if code != exitOK {
			t.Fatalf("%v: exit code %d; terminal %q", args, code, shown)
		}
		fmt.Fprintf(&doc, "$ outboxctl %s\n", quoteArgs(args))
		doc.WriteString(progressLines(shown))
		doc.WriteString(stdout.String())
		doc.WriteString("\n")
		for _, re := range want {
			if !regexp.MustCompile(re).MatchString(stdout.String()) {
				t.Errorf("%v printed\n%s\nwhich does not match %s", args, stdout.String(), re)
			}
		}
		return shown
	}
	step([]string{"--as", "alice", "pause", "PaymentCaptured", "--reason", "payments API returns 503 (INC-4711)"},
		`^paused event type PaymentCaptured: no instance on \S+ claims its events until `)
	step([]string{"pauses"}, `(?m)^PaymentCaptured +alice +\S+ +\d+s +payments API returns 503 \(INC-4711\)$`)
	step([]string{"stats"}, `(?m)^DEAD +600$`, `(?m)^paused: PaymentCaptured, by alice since `)
	step([]string{"--as", "alice", "resume", "PaymentCaptured"}, `^resumed event type PaymentCaptured`)
	step([]string{"dead", "replay-all", "--dry-run"}, `^dry run: would replay 600 DEAD events of \S+; nothing changed\n`,
		`(?m)^PaymentCaptured +360$`, `(?m)^RefundIssued +120$`, `(?m)^InvoiceSent +120$`, `(?m)^acme +300$`, `(?m)^globex +150$`, `(?m)^- +150$`)
	shown := step([]string{"--as", "alice", "dead", "replay-all", "--type", "PaymentCaptured", "--rate", "120/s", "--yes"},
		`(?m)^paced at 120/s: 360 events in \d+s \([\d.]+/s\)$`, `(?m)^replayed 360 events: NEW again`)
	if !regexp.MustCompile(`replayed \d+ of 360 DEAD events, [\d.]+/s, ETA \d+s…`).MatchString(shown) ||
		!strings.Contains(shown, "replayed 360 of 360 DEAD events") {
		t.Errorf("the paced replay's progress on the terminal: %q", shown)
	}
	step([]string{"audit"}, `(?m)^\d+ +\S+ +alice +replay +360 +status=DEAD type="PaymentCaptured" +-$`,
		`(?m)^\d+ +\S+ +alice +resume +1 +PaymentCaptured +-$`, `(?m)^\d+ +\S+ +alice +pause +1 +PaymentCaptured +payments API returns 503`)
	if path := os.Getenv(envTranscript); path != "" {
		if err := os.WriteFile(path, []byte(doc.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// quoteArgs writes args as a shell would take them.
func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if strings.ContainsAny(a, " *()") {
			q[i] = "'" + a + "'"
		}
	}
	return strings.Join(q, " ")
}

// progressLines turns what a command showed on the terminal (progress
// lines, each rewriting the one before) into a few lines a reader can
// follow: the first, one in the middle, and the last, marked as stderr.
func progressLines(shown string) string {
	var lines []string
	for _, l := range strings.Split(shown, "\r\x1b[K") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > 3 {
		lines = []string{lines[0], lines[len(lines)/2], lines[len(lines)-1]}
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("  (stderr, rewritten in place) " + l + "\n")
	}
	return b.String()
}
