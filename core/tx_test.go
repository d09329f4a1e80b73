package outbox

import (
	"log/slog"
	"strings"
	"testing"
)

// The transaction callbacks themselves (once, in order, savepoint-aware,
// panics recovered) are package outboxtx's Scope and are tested there.
// safeCall is how the writer runs its hooks' callbacks.

func TestSafeCallRecoversAndLogsPanics(t *testing.T) {
	logger, buf := bufferLogger()
	ran := false
	safeCall(logger, "after-commit hook", func() { ran = true })
	if !ran {
		t.Fatal("safeCall did not run fn")
	}
	safeCall(logger, "after-commit hook", func() { panic("boom in hook") }) // must not panic
	out := buf.String()
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "outbox: after-commit hook panicked") ||
		!strings.Contains(out, "boom in hook") || !strings.Contains(out, "stack=") {
		t.Errorf("panic not logged as expected:\n%s", out)
	}
	if strings.Count(out, "panicked") != 1 {
		t.Errorf("want exactly one panic logged:\n%s", out)
	}
}

func TestSafeCallDefaultLogger(t *testing.T) {
	logger, buf := bufferLogger()
	old := slog.Default()
	slog.SetDefault(logger)
	t.Cleanup(func() { slog.SetDefault(old) })

	safeCall(nil, "after-rollback hook", func() { panic("rollback boom") })
	if !strings.Contains(buf.String(), "rollback boom") {
		t.Errorf("panic not logged to the default logger:\n%s", buf.String())
	}
	if loggerOr(nil) != logger || loggerOr(old) != old {
		t.Error("loggerOr does not default to slog.Default()")
	}
}
