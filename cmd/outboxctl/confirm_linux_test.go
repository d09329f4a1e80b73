package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"golang.org/x/sys/unix"
)

// openPTY returns both ends of a new pseudo-terminal: what is written to
// the controller is read from the terminal as typed input.
func openPTY(t *testing.T) (controller, tty *os.File) {
	t.Helper()
	controller, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("SKIPPED — no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { _ = controller.Close() })
	fd := int(controller.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	t.Cleanup(func() { _ = tty.Close() })
	return controller, tty
}

// On a terminal, destructive commands ask, and only y or yes goes ahead.
func TestConfirmationOnTerminal(t *testing.T) {
	b := outboxsqltest.Backends()[0] // the embedded SQLite: the prompt is the same on every database
	for _, tc := range []struct {
		name, typed string
		code        int
	}{
		{"y", "y\n", exitOK},
		{"yes", " YES \n", exitOK},
		{"n", "n\n", exitRefused},
		{"empty line", "\n", exitRefused},
		{"other", "sure\n", exitRefused},
		{"end of input", "\x04", exitRefused}, // Ctrl-D
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, b)
			s := e.seed()
			before := e.snapshot()
			controller, tty := openPTY(t)
			if _, err := controller.WriteString(tc.typed); err != nil {
				t.Fatal(err)
			}
			args := []string{"--db", e.url, "--table", e.store.Table(), "dead", "delete", s.placedOld, s.invoiceOld}
			r := runCLI(t, tty, args...)
			wantPrompt := "Delete 2 DEAD events of " + e.store.Table() + " for good? [y/N] "
			if !strings.HasPrefix(r.stderr, wantPrompt) {
				t.Errorf("stderr %q, want the prompt %q", r.stderr, wantPrompt)
			}
			if r.code != tc.code {
				t.Fatalf("exit code %d, want %d (stderr %q)", r.code, tc.code, r.stderr)
			}
			if tc.code == exitOK {
				if got := e.statuses(s.placedOld, s.invoiceOld, s.placedNew); !slices.Equal(got, []string{"gone", "gone", "DEAD"}) {
					t.Errorf("after a confirmed delete: %q", got)
				}
				return
			}
			if !strings.Contains(r.stderr, "; nothing changed\n") || r.stdout != "" {
				t.Errorf("refused: stdout %q, stderr %q", r.stdout, r.stderr)
			}
			e.wantUnchanged(before)
		})
	}

	// --yes skips the prompt, on a terminal too.
	e := newEnv(t, b)
	s := e.seed()
	_, tty := openPTY(t)
	r := runCLI(t, tty, "--db", e.url, "--table", e.store.Table(), "--yes", "purge", "--status", "done", "--older-than", "1d")
	if r.code != exitOK || r.stderr != "" || e.status(s.doneOld[0]) != "gone" {
		t.Errorf("purge --yes on a terminal: %+v, event %s", r, e.status(s.doneOld[0]))
	}
}
