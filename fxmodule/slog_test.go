package outboxfx_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/slogtest"
	"time"

	"github.com/go-outbox/outbox/core/outboxtest"
	outboxfx "github.com/go-outbox/outbox/fxmodule"
	"github.com/rs/zerolog"
)

func TestSlogHandlerPassesSlogtest(t *testing.T) {
	var buf outboxtest.LogBuffer
	// zerolog stamps the time itself (Timestamp), so a record's zero time
	// cannot suppress it: that one slogtest case is expected to fail.
	h := outboxfx.NewSlogHandler(zerolog.New(&buf).Level(zerolog.TraceLevel).With().Timestamp().Logger())
	err := slogtest.TestHandler(h, func() []map[string]any {
		ms := buf.JSONLines(t)
		for _, m := range ms {
			m[slog.MessageKey] = m[zerolog.MessageFieldName]
			delete(m, zerolog.MessageFieldName)
		}
		return ms
	})
	var unexpected []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !strings.Contains(e.Error(), "zero Record.Time") {
				unexpected = append(unexpected, e)
			}
		}
	} else if err != nil {
		unexpected = append(unexpected, err)
	}
	if len(unexpected) > 0 {
		t.Fatal(errors.Join(unexpected...))
	}
}

func TestSlogHandlerLevelsAndValues(t *testing.T) {
	var buf outboxtest.LogBuffer
	zl := zerolog.New(&buf).Level(zerolog.InfoLevel).With().Str("app", "test").Logger()
	log := outboxfx.NewSlogLogger(zl).With("outbox_ds", "orders")

	log.Debug("hidden")
	log.Info("info", "n", 3, "d", 1500*time.Millisecond, "ok", true)
	log.Warn("warn", "error", errors.New("boom"), slog.Group("req", "id", "r-1"))
	log.WithGroup("g").Error("error", "k", "v")
	log.Log(context.Background(), slog.LevelError+4, "above error")

	if log.Enabled(context.Background(), slog.LevelDebug) || !log.Enabled(context.Background(), slog.LevelInfo) {
		t.Fatal("Enabled must follow the zerolog logger's level")
	}
	got := buf.JSONLines(t)
	if len(got) != 4 {
		t.Fatalf("want 4 lines (debug filtered), got %d: %s", len(got), buf.String())
	}
	check := func(i int, key string, want any) {
		t.Helper()
		if got[i][key] != want {
			t.Errorf("line %d: %s = %#v, want %#v (%v)", i, key, got[i][key], want, got[i])
		}
	}
	check(0, "level", "info")
	check(0, "app", "test")
	check(0, "outbox_ds", "orders")
	check(0, "n", float64(3))
	check(0, "d", "1.5s")
	check(0, "ok", true)
	check(1, "level", "warn")
	check(1, "error", "boom")
	if req, _ := got[1]["req"].(map[string]any); req["id"] != "r-1" {
		t.Errorf("group attr not nested: %v", got[1])
	}
	check(2, "level", "error")
	check(2, "outbox_ds", "orders") // added before the group: stays at the top
	if g, _ := got[2]["g"].(map[string]any); g["k"] != "v" {
		t.Errorf("WithGroup not nested: %v", got[2])
	}
	check(3, "level", "error")
}

func TestZerologLevelMapping(t *testing.T) {
	for l, want := range map[slog.Level]zerolog.Level{
		slog.LevelDebug - 4: zerolog.TraceLevel, slog.LevelDebug: zerolog.DebugLevel, slog.LevelInfo: zerolog.InfoLevel,
		slog.LevelInfo + 2: zerolog.InfoLevel, slog.LevelWarn: zerolog.WarnLevel, slog.LevelError: zerolog.ErrorLevel,
		slog.LevelError + 8: zerolog.ErrorLevel,
	} {
		if got := outboxfx.ZerologLevel(l); got != want {
			t.Errorf("ZerologLevel(%v) = %v, want %v", l, got, want)
		}
	}
}
