package sqlstore

import (
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// TestULIDPrefix: a partition's bound is the first ten characters of the
// ULIDs of its instant, so that the ULIDs made before it sort before it
// and the others at or after it.
func TestULIDPrefix(t *testing.T) {
	id := outbox.NewULID()
	at, ok := outbox.ULIDTime(id)
	if !ok {
		t.Fatalf("ULIDTime(%s) not ok", id)
	}
	if got := ulidPrefix(at); got != id[:10] {
		t.Fatalf("ulidPrefix(%v) = %s, want %s (of %s)", at, got, id[:10], id)
	}
	if next := ulidPrefix(at.Add(time.Millisecond)); !(id < next) {
		t.Fatalf("%s does not sort before the bound of the next millisecond %s", id, next)
	}
	if got := ulidPrefix(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)); got != "01M8J9KY00" {
		t.Fatalf("ulidPrefix(2026-11-29) = %s, want 01M8J9KY00 (the SQL of docs/databases.md computes the same)", got)
	}
}
