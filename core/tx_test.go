package outbox

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

func bufferLogger() (*slog.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestCallbacksCommit(t *testing.T) {
	var c Callbacks
	var got []string
	c.AfterCommit(func() { got = append(got, "c1") })
	c.AfterRollback(func() { got = append(got, "r1") })
	c.AfterCommit(func() { got = append(got, "c2") })
	c.AfterCommit(func() { got = append(got, "c3") })
	c.RunCommit()
	if want := "c1,c2,c3"; strings.Join(got, ",") != want {
		t.Fatalf("ran %v, want %s", got, want)
	}
	c.RunCommit()
	c.RunRollback()
	c.AfterCommit(func() { got = append(got, "late") })
	c.RunCommit()
	if want := "c1,c2,c3"; strings.Join(got, ",") != want {
		t.Errorf("after a second run: ran %v, want %s", got, want)
	}
}

func TestCallbacksRollback(t *testing.T) {
	var c Callbacks
	var got []string
	c.AfterCommit(func() { got = append(got, "c1") })
	c.AfterRollback(func() { got = append(got, "r1") })
	c.AfterRollback(func() { got = append(got, "r2") })
	c.RunRollback()
	c.RunCommit()
	c.RunRollback()
	if want := "r1,r2"; strings.Join(got, ",") != want {
		t.Errorf("ran %v, want %s", got, want)
	}
}

func TestCallbacksPanicRecovered(t *testing.T) {
	logger, buf := bufferLogger()
	c := Callbacks{Logger: logger}
	var got []string
	c.AfterCommit(func() { got = append(got, "before") })
	c.AfterCommit(func() { panic("boom in callback") })
	c.AfterCommit(func() { got = append(got, "after") })
	c.RunCommit() // must not panic
	if want := "before,after"; strings.Join(got, ",") != want {
		t.Errorf("ran %v, want %s", got, want)
	}
	out := buf.String()
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "transaction callback panicked") || !strings.Contains(out, "boom in callback") {
		t.Errorf("panic not logged as expected:\n%s", out)
	}
	if strings.Count(out, "panicked") != 1 {
		t.Errorf("want exactly one panic logged:\n%s", out)
	}
}

func TestCallbacksPanicDefaultLogger(t *testing.T) {
	logger, buf := bufferLogger()
	old := slog.Default()
	slog.SetDefault(logger)
	t.Cleanup(func() { slog.SetDefault(old) })

	var c Callbacks // nil Logger: slog.Default()
	ran := false
	c.AfterRollback(func() { panic("rollback boom") })
	c.AfterRollback(func() { ran = true })
	c.RunRollback()
	if !ran {
		t.Error("callback after a panicking one did not run")
	}
	if !strings.Contains(buf.String(), "rollback boom") {
		t.Errorf("panic not logged to the default logger:\n%s", buf.String())
	}
}

func TestCallbacksConcurrent(t *testing.T) {
	var c Callbacks
	var mu sync.Mutex
	n := 0
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.AfterCommit(func() { mu.Lock(); n++; mu.Unlock() })
		}()
	}
	wg.Wait()
	for range 5 {
		wg.Add(1)
		go func() { defer wg.Done(); c.RunCommit() }()
	}
	wg.Wait()
	if n != 20 {
		t.Errorf("%d callbacks ran, want 20 (each exactly once)", n)
	}
}
