package main

import (
	"bytes"
	"context"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"
)

// Every command has help, reached by -h and by `outboxctl help`, and its
// help names every flag the command accepts.
func TestHelp(t *testing.T) {
	globals := []string{"db", "table", "json", "yes", "as"}
	for name, text := range helpTexts {
		t.Run("cmd="+name, func(t *testing.T) {
			var args []string
			if name != "" {
				args = strings.Fields(name)
			}
			var out, errOut bytes.Buffer
			c := newCLI(context.Background(), strings.NewReader(""), &out, &errOut)
			if err := c.main(append(args, "-h")); err != errHelp { //nolint:errorlint // the sentinel itself, never wrapped
				t.Fatalf("-h: %v", err)
			}
			if !strings.HasPrefix(out.String(), text) || errOut.Len() != 0 {
				t.Errorf("-h printed %q, stderr %q", out.String(), errOut.String())
			}
			if name != "dead" {
				c.flags.VisitAll(func(f *flag.Flag) {
					if !slices.Contains(globals, f.Name) && !strings.Contains(text, "--"+f.Name) {
						t.Errorf("the help of %q does not mention --%s", name, f.Name)
					}
				})
			}
			r := runCLI(t, nil, append([]string{"help"}, args...)...)
			if r.code != exitOK || r.stdout != out.String() || r.stderr != "" {
				t.Errorf("help %s: %+v", name, r)
			}
		})
	}
	for _, g := range globals {
		if !strings.Contains(helpTexts[""], "--"+g+" ") {
			t.Errorf("the overview does not explain --%s", g)
		}
	}
	for _, cmd := range []string{"migrate", "stats", "get", "dead list", "dead show", "dead replay", "dead replay-all", "dead delete", "purge",
		"pause", "resume", "pauses", "audit", "force-dead", "delete", "skip-head"} {
		if !strings.Contains(helpTexts[""], "\n  "+cmd+" ") {
			t.Errorf("the overview does not list %q", cmd)
		}
		if _, ok := helpTexts[cmd]; !ok {
			t.Errorf("no help for %q", cmd)
		}
	}
	runCLI(t, nil, "help", "nope").wantErr(t, exitUsage, `help: unknown command "nope"`)
	runCLI(t, nil).wantErr(t, exitUsage, "no command (see `outboxctl help`)")
}

func TestParseAge(t *testing.T) {
	for in, want := range map[string]string{"0s": "0s", "0": "0s", "45s": "45s", "90m": "1h30m0s", "36h": "36h0m0s", "7d": "168h0m0s", "1d12h": "36h0m0s", "2d30m": "48h30m0s"} {
		if d, err := parseAge(in); err != nil || d.String() != want {
			t.Errorf("parseAge(%q) = %v, %v; want %s", in, d, err, want)
		}
	}
	for _, in := range []string{"", "d", "7", "1.5d", "-1h", "-1d", "3x", "7dd", "1d-1h", "d12h", "99999d"} {
		if d, err := parseAge(in); err == nil {
			t.Errorf("parseAge(%q) = %v, want an error", in, d)
		}
	}
}

func TestFormatAge(t *testing.T) {
	for in, want := range map[string]string{"0s": "0s", "59.6s": "1m", "90s": "1m30s", "1h": "1h", "1h0m31s": "1h1m", "47h59m": "47h59m", "48h": "2d", "49h40m": "2d2h", "-5s": "-5s"} {
		d, err := time.ParseDuration(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := formatAge(d); got != want {
			t.Errorf("formatAge(%s) = %q, want %q", in, got, want)
		}
	}
}

// Text from the table reaches the terminal with its control characters
// escaped: a header or an error cannot move the cursor or recolour it.
func TestCell(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit int
		want  string
	}{
		{"", 0, "-"},
		{"plain", 0, "plain"},
		{"a\tb\nc\x1b[31mred", 0, `a\tb\nc\x1b[31mred`},
		{"héllo wörld", 5, "héll…"},
		{"short", 5, "short"},
	} {
		if got := cell(tc.in, tc.limit); got != tc.want {
			t.Errorf("cell(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
		}
	}
	if got := printableLines("line 1\x07\nline 2\n"); got != "line 1\\a\nline 2" {
		t.Errorf("printableLines: %q", got)
	}
}
