// Command testsummary reads `go test -json` on its standard input and prints
// what a plain `go test` would: an "ok" line per package that passed, and
// everything a failed test or package wrote. It ends with one line saying
// how many tests ran and how many skipped, so that a module whose database
// tests all skipped does not pass for tested. It exits 1 when a test or a
// package failed. `make test` runs it; it uses the standard library only.
//
//	go test -json ./... 2>&1 | go run scripts/testsummary.go core
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
)

// event is the part of a test2json event that the summary reads.
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
}

// maxReasons is how many distinct skip reasons the summary quotes.
const maxReasons = 3

func main() {
	module := "tests"
	if len(os.Args) > 1 {
		module = os.Args[1]
	}
	out := os.Stdout

	logs := buffers{lines: map[string][]string{}}
	var ran, skipped, failures int
	var reasons []string
	failed := false
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	for in.Scan() {
		line := in.Text()
		var e event
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil {
			fmt.Fprintln(out, line) // not an event: a message of the go command
			continue
		}
		if e.Package == "" {
			e.Package = e.ImportPath // a build event
		}
		key := e.Package + "\x00" + e.Test
		switch e.Action {
		case "output", "build-output":
			if e.Test == "" && (strings.HasPrefix(e.Output, "ok ") || strings.HasPrefix(e.Output, "?  ")) {
				fmt.Fprint(out, e.Output)
				continue
			}
			if !isMarker(e.Output) {
				logs.add(key, e.Output)
			}
		case "pass":
			if e.Test != "" {
				ran++
			}
			logs.drop(key)
		case "skip":
			if e.Test != "" {
				ran++
				skipped++
				if r := reason(logs.lines[key]); r != "" && len(reasons) < maxReasons && !slices.Contains(reasons, r) {
					reasons = append(reasons, r)
				}
			}
			logs.drop(key)
		case "fail", "build-fail":
			failed = true
			if e.Test != "" {
				ran++
				failures++
				logs.flush(out, key)
				continue
			}
			// A package that failed: first what its unfinished tests
			// wrote (a panic, a timeout), then its own output.
			for _, k := range slices.Clone(logs.order) {
				if strings.HasPrefix(k, e.Package+"\x00") && k != key {
					logs.flush(out, k)
				}
			}
			logs.flush(out, key)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(out, "testsummary: %v\n", err)
		failed = true
	}
	if failed {
		for _, k := range slices.Clone(logs.order) {
			logs.flush(out, k)
		}
	}
	verdict := "ok"
	if failed {
		verdict = "FAIL"
	}
	fmt.Fprintf(out, "==> %s: %s, %d tests, %d skipped, %d failed\n", module, verdict, ran, skipped, failures)
	for _, r := range reasons {
		fmt.Fprintf(out, "    skipped: %s\n", r)
	}
	if failed {
		os.Exit(1)
	}
}

// buffers holds the output of each package and test until it ends, keyed
// by package and test name, in the order they first wrote.
type buffers struct {
	lines map[string][]string
	order []string
}

func (b *buffers) add(key, line string) {
	if _, ok := b.lines[key]; !ok {
		b.order = append(b.order, key)
	}
	b.lines[key] = append(b.lines[key], line)
}

// drop forgets key's output.
func (b *buffers) drop(key string) {
	if _, ok := b.lines[key]; !ok {
		return
	}
	delete(b.lines, key)
	for i, k := range b.order {
		if k == key {
			b.order = append(b.order[:i], b.order[i+1:]...)
			break
		}
	}
}

// flush prints key's output and forgets it.
func (b *buffers) flush(out io.Writer, key string) {
	for _, l := range b.lines[key] {
		fmt.Fprint(out, l)
	}
	b.drop(key)
}

// isMarker reports whether line is one of the progress lines that only -v
// prints (=== RUN, --- PASS, …).
func isMarker(line string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- PASS", "--- SKIP"} {
		if strings.HasPrefix(strings.TrimSpace(line), p) {
			return true
		}
	}
	return line == "PASS\n"
}

// logLine is the first line of a message of t.Log or t.Skip.
var logLine = regexp.MustCompile(`^[\w./-]+\.go:\d+: `)

// reason is the first line of the last message a skipped test logged: the
// reason it gave.
func reason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if r := strings.TrimSpace(lines[i]); logLine.MatchString(r) {
			return r
		}
	}
	return ""
}
