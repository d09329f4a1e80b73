package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
)

// TestDemo runs the whole demo on a fresh SQLite file: run fails unless every
// committed event was delivered or is DEAD and no rolled-back one was.
func TestDemo(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := run(context.Background(), filepath.Join(t.TempDir(), "demo.db"), logger); err != nil {
		t.Fatal(err)
	}
}
