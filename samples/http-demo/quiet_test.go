package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-outbox/outbox/core/outboxtest"
)

// envRunMain makes the test binary run the demo's main.
const envRunMain = "HTTP_DEMO_TEST_RUN_MAIN"

// runDemo runs the demo as make demo-http does — its main, with the
// environment env — on a free loopback port until an order it placed is
// shipped, with a health check, a metrics scrape and the admin page's files
// on the way; then stops it with SIGTERM and returns its standard output
// and error.
func runDemo(t *testing.T, env ...string) (stdout, stderr string) {
	t.Helper()
	var out, errOut outboxtest.LogBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a guard against a hung demo
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-addr", "127.0.0.1:0", "-dsn", filepath.Join(t.TempDir(), "demo.db"))
	cmd.Env = append(append(os.Environ(), envRunMain+"=1", "HTTP_DEMO_TRACE=", "HTTP_DEMO_ADMIN_TOKEN="), env...)
	cmd.Stdout = &out
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			_, _ = errOut.Write(append(sc.Bytes(), '\n'))
			var line struct{ Message, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "http-demo listening" {
				addr <- line.Addr
			}
		}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-scanned:
		t.Fatalf("the demo ended before it listened:\n%s", errOut.String())
	}
	d := &demo{t: t, url: base, httpc: &http.Client{}}
	for _, p := range []string{"/livez", "/readyz", "/metrics", "/admin/", "/admin/assets/app.js", "/admin/assets/app.css"} {
		resp := d.send("GET", p, "")
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", p, resp.StatusCode)
		}
	}
	o := d.placeOrder()
	d.eventually("the order shipped", func() bool { return d.order(o.ID).Status == "shipped" })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-scanned
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the demo: %v\n%s", err, errOut.String())
	}
	return out.String(), errOut.String()
}

// TestTheDemoIsQuietByDefault: make demo-http prints no span unless asked,
// and logs no line at info for health checks, scrapes and page files.
func TestTheDemoIsQuietByDefault(t *testing.T) {
	stdout, stderr := runDemo(t)
	if stdout != "" {
		t.Errorf("the demo printed %d lines on standard output, want none:\n%.2000s", strings.Count(stdout, "\n"), stdout)
	}
	for _, p := range []string{`"/livez"`, `"/readyz"`, `"/metrics"`, `"/admin/"`, `"/admin/assets/`} {
		if strings.Contains(stderr, p) {
			t.Errorf("the demo logged a request for %s at info level:\n%s", p, stderr)
		}
	}
	t.Logf("standard error: %d lines", strings.Count(stderr, "\n"))
}

// TestTracesOnRequest: HTTP_DEMO_TRACE=stdout prints the spans of the
// order's request and delivery, one JSON line each, and none of the
// routine requests.
func TestTracesOnRequest(t *testing.T) {
	stdout, _ := runDemo(t, "HTTP_DEMO_TRACE=stdout")
	names := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var s span
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("a line that is not one span: %v\n%s", err, line)
		}
		names[s.Name]++
	}
	if names["POST /orders"] != 1 || names["process OrderPlaced"] != 1 {
		t.Errorf("spans %v: want the order's request and delivery", names)
	}
	for name := range names {
		for _, routine := range []string{"livez", "readyz", "metrics", "/admin/", "assets"} {
			if strings.Contains(name, routine) {
				t.Errorf("a span of a routine request: %q (spans %v)", name, names)
			}
		}
	}
	if _, _, err := traceOutput("stdrr", os.Stdout); err == nil || !strings.Contains(err.Error(), "want off, stdout or pretty") {
		t.Errorf("-trace stdrr: %v", err)
	}
}
