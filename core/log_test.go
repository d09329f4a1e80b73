package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
	"github.com/go-outbox/outbox/core/outboxtest"
)

// syncBuffer is a bytes.Buffer for a logger that many goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines returns the JSON log lines whose message contains msg.
func (s *syncBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(s.b.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if strings.Contains(m["msg"].(string), msg) {
			out = append(out, m)
		}
	}
	return out
}

// TestLogLinesNameTheTenant: a log line about an event names it with its
// id and type and, when it has one, its tenant, at the top level.
func TestLogLinesNameTheTenant(t *testing.T) {
	store := outboxmem.New()
	var buf syncBuffer
	c := newClient(t, store, outbox.Config{MaxAttempts: 1, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err := c.Handle(outbox.EventName("Bad"), func(context.Context, outbox.Envelope) error { return errors.New("boom") }); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	tenant := outbox.MustEnvelope(outbox.EventName("Bad"), outbox.WithJSON([]byte(`{}`)), outbox.WithTenant("acme"))
	none := outbox.MustEnvelope(outbox.EventName("Bad"), outbox.WithJSON([]byte(`{}`)))
	if _, err := writeIn(store, c, tenant, none); err != nil {
		t.Fatal(err)
	}
	outboxtest.Eventually(t, 5*time.Second, "both DEAD", func() bool {
		return len(buf.lines(t, "moved to DEAD")) == 2
	})
	for _, line := range buf.lines(t, "moved to DEAD") {
		want := map[string]any{"event_type": "Bad", "event_id": tenant.ID(), "tenant_id": "acme"}
		if line["event_id"] == none.ID() {
			want = map[string]any{"event_type": "Bad", "event_id": none.ID()}
		}
		for k, v := range want {
			if line[k] != v {
				t.Errorf("log line %v: %s = %v, want %v", line, k, line[k], v)
			}
		}
		if _, has := line["tenant_id"]; has != (want["tenant_id"] != nil) {
			t.Errorf("log line %v: tenant_id present %v, want %v", line, has, want["tenant_id"] != nil)
		}
	}
}
