package main

import (
	"bufio"
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
)

// readUntil reads the terminal's output from controller up to and with
// want, and returns it.
func readUntil(t *testing.T, r *bufio.Reader, want string) string {
	t.Helper()
	var got strings.Builder
	for !strings.Contains(got.String(), want) {
		b, err := r.ReadByte()
		if err != nil {
			t.Fatalf("terminal output %q, then %v; want %q", got.String(), err, want)
		}
		got.WriteByte(b)
	}
	return got.String()
}

// On a terminal, dead replay-all and dead list show their progress on
// stderr, one line rewritten per page and cleared at the end.
func TestProgressOnTerminal(t *testing.T) {
	b := outboxsqltest.Backends()[0] // SQLite: the progress is the same on every database
	e := newEnv(t, b)
	e.seedDead(250)
	controller, tty := openPTY(t)
	out := bufio.NewReader(controller)
	for _, tc := range []struct {
		args  []string
		lines []string
	}{
		{[]string{"--json", "dead", "list", "--limit", "0"}, []string{"listed 100 DEAD events…", "listed 250 DEAD events…"}},
		{[]string{"dead", "replay-all", "--yes"}, []string{"counted 100 DEAD events…", "counted 250 DEAD events…", "replayed 100 of 250 DEAD events…", "replayed 250 of 250 DEAD events…"}},
	} {
		var stdout bytes.Buffer
		c := newCLI(context.Background(), strings.NewReader(""), &stdout, tty)
		c.pageSize = 100
		if code := c.execute(append([]string{"--db", e.url, "--table", e.store.Table()}, tc.args...)); code != exitOK {
			t.Fatalf("%v: exit code %d", tc.args, code)
		}
		const end = "<end of run>"
		if _, err := tty.WriteString(end); err != nil {
			t.Fatal(err)
		}
		shown := readUntil(t, out, end)
		for _, l := range tc.lines {
			if !strings.Contains(shown, "\r\x1b[K"+l) {
				t.Errorf("%v: the terminal shows %q, without the progress line %q", tc.args, shown, l)
			}
		}
		if !strings.HasSuffix(shown, "\r\x1b[K"+end) {
			t.Errorf("%v: the progress line is not cleared at the end: %q", tc.args, shown)
		}
		if strings.Contains(stdout.String(), "…") {
			t.Errorf("%v: progress on stdout: %q", tc.args, stdout.String())
		}
	}
	if n, err := e.store.Count(context.Background(), outbox.Query{Statuses: []outbox.Status{outbox.StatusNew}}); err != nil || n != 250 {
		t.Fatalf("%d NEW events (%v), want the 250 replayed", n, err)
	}
}

// dead replay-all replays the events it counted for the prompt: one that
// goes DEAD while the prompt waits is left alone.
func TestReplayAllLeavesLaterDeadAlone(t *testing.T) {
	b := outboxsqltest.Backends()[0]
	e := newEnv(t, b)
	s := e.seed()
	controller, tty := openPTY(t)
	out := bufio.NewReader(controller)
	type result struct {
		code   int
		stdout string
	}
	done := make(chan result, 1)
	go func() {
		var stdout bytes.Buffer
		code := newCLI(context.Background(), tty, &stdout, tty).execute([]string{"--db", e.url, "--table", e.store.Table(), "dead", "replay-all"})
		done <- result{code, stdout.String()}
	}()
	readUntil(t, out, "Replay 4 DEAD events of "+e.store.Table()+"? [y/N] ")
	// Meanwhile a pending event goes DEAD.
	ctx := context.Background()
	now := time.Now().UTC()
	claimed, err := e.store.Claim(ctx, outbox.ClaimRequest{Owner: "test", Now: now.Add(time.Second), Lease: time.Hour, Limit: 1})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	late := claimed[0].ID
	if ok, err := e.store.MarkDead(ctx, outbox.Outcome{Owner: "test", ID: late, At: now.Add(time.Second), Error: "late", CountAttempt: true}); !ok || err != nil {
		t.Fatalf("mark dead: %v, %v", ok, err)
	}
	if _, err := controller.WriteString("y\n"); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "replayed 4 events") {
		t.Fatalf("replay-all: %+v", r)
	}
	if got := e.statuses(append(s.dead(), late)...); !slices.Equal(got, []string{"NEW", "NEW", "NEW", "NEW", "DEAD"}) {
		t.Fatalf("statuses after replay-all: %q, want the 4 counted NEW and the late one DEAD", got)
	}
}
