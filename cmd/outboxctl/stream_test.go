package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxadmin/outboxadmintest"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
)

// envHeapChild makes the test binary run one outboxctl command and report
// its peak heap (TestDeadCommandsStreamInFlatMemory's child process).
const envHeapChild = "OUTBOXCTL_TEST_HEAP_CHILD"

// heapPayload is the size of each event's payload in the memory test.
const heapPayload = 16 << 10

// The dead commands that go through every DEAD event — dead list --limit 0
// (text and JSON) and dead replay-all — hold one page at a time: their
// peak heap with 4N DEAD events of 16 KiB is that with N, not four times
// it. Each run is a process of its own, whose runtime.MemStats.HeapSys is
// the largest the heap has been.
func TestDeadCommandsStreamInFlatMemory(t *testing.T) {
	if spec := os.Getenv(envHeapChild); spec != "" {
		heapChild(t, spec)
		return
	}
	if testing.Short() {
		t.Skip("SKIPPED — -short: the test writes 80 MB of events per database")
	}
	const n, pageSize = 1000, 100
	for _, b := range outboxsqltest.Backends() {
		if b.Name == "postgres-pq" { // the same database as postgres-pgx
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			small, large := newEnv(t, b), newEnv(t, b)
			small.seedDead(n)
			large.seedDead(4 * n)
			for _, args := range [][]string{{"dead", "list", "--limit", "0"}, {"--json", "dead", "list", "--limit", "0"}, {"dead", "replay-all", "--yes"}} {
				hs, hl := small.peakHeap(pageSize, args...), large.peakHeap(pageSize, args...)
				t.Logf("%s: peak heap %.1f MiB with %d DEAD events, %.1f MiB with %d", strings.Join(args, " "),
					float64(hs)/(1<<20), n, float64(hl)/(1<<20), 4*n)
				// 3N more events hold 3N × 16 KiB more when the command
				// collects them; a quarter of that is a clear line.
				if limit := hs + 3*n*heapPayload/4; hl > limit {
					t.Errorf("%s: peak heap %d bytes with %d events, %d with %d: it grows with the table", strings.Join(args, " "), hs, n, hl, 4*n)
				}
			}
			for _, e := range []*env{small, large} {
				if dead, err := e.store.Count(context.Background(), outbox.Query{Statuses: []outbox.Status{outbox.StatusDead}}); err != nil || dead != 0 {
					t.Errorf("after replay-all: %d DEAD events (%v), want 0", dead, err)
				}
			}
		})
	}
}

// seedDead writes count DEAD events with payloads of heapPayload bytes.
func (e *env) seedDead(count int) {
	e.t.Helper()
	txm := outboxsql.NewTxManager(e.db)
	client, err := outbox.New(outbox.Config{Store: e.store, TxContext: txm, Mode: outbox.ModeWriterOnly})
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = client.Close(context.Background()) }()
	payload := []byte(`{"pad":"` + strings.Repeat("x", heapPayload-10) + `"}`)
	at := time.Now().UTC().Add(-time.Hour)
	for done := 0; done < count; {
		batch := make([]outboxadmintest.Event, min(500, count-done))
		for i := range batch {
			batch[i] = outboxadmintest.Event{Envelope: outbox.MustEnvelope(outbox.EventName("Big"), outbox.WithJSON(payload)),
				Status: outbox.StatusDead, At: at, Error: "boom"}
		}
		outboxadmintest.Seed(e.t, client, e.store, txm, batch...)
		done += len(batch)
	}
}

// heapSpec is what the child process runs.
type heapSpec struct {
	Args     []string `json:"args"`
	PageSize int      `json:"page_size"`
}

// peakHeap runs outboxctl with args on e's table in a child process,
// reading pages of pageSize events, and returns its peak heap in bytes.
func (e *env) peakHeap(pageSize int, args ...string) int {
	e.t.Helper()
	spec, err := json.Marshal(heapSpec{Args: append([]string{"--db", e.url, "--table", e.store.Table()}, args...), PageSize: pageSize})
	if err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDeadCommandsStreamInFlatMemory$", "-test.count=1")
	// A small GOGC keeps the peak close to what is live.
	cmd.Env = append(os.Environ(), envHeapChild+"="+string(spec), "GOGC=25")
	out, err := cmd.CombinedOutput()
	var code, heap int
	for _, line := range strings.Split(string(out), "\n") {
		if _, scanErr := fmt.Sscanf(line, "HEAP %d %d", &code, &heap); scanErr == nil {
			break
		}
	}
	if err != nil || heap == 0 || code != exitOK {
		e.t.Fatalf("child %v: exit code %d, %v:\n%s", args, code, err, out)
	}
	return heap
}

// heapChild runs the command of spec and prints its exit code and the
// largest size of the heap.
func heapChild(t *testing.T, spec string) {
	var s heapSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	c := newCLI(context.Background(), strings.NewReader(""), io.Discard, &stderr)
	c.pageSize = s.PageSize
	code := c.execute(s.Args)
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	fmt.Printf("HEAP %d %d\n%s", code, m.HeapSys, stderr.String())
}
