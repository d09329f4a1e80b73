package outbox

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncateError(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		wantRunes int
		wantSame  bool
	}{
		{"empty", "", 0, true},
		{"short", "boom", 4, true},
		{"ascii at limit", strings.Repeat("a", MaxErrorLen), MaxErrorLen, true},
		{"ascii over", strings.Repeat("a", MaxErrorLen+500), MaxErrorLen, false},
		{"multibyte under limit in runes, over in bytes", strings.Repeat("é", MaxErrorLen), MaxErrorLen, true},
		{"multibyte over", strings.Repeat("日本語", MaxErrorLen), MaxErrorLen, false},
		{"emoji over", strings.Repeat("🙂", MaxErrorLen+1), MaxErrorLen, false},
		{"mixed over", strings.Repeat("a€", MaxErrorLen), MaxErrorLen, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := TruncateError(tc.in)
			if !utf8.ValidString(got) {
				t.Error("result is not valid UTF-8")
			}
			if n := utf8.RuneCountInString(got); n != tc.wantRunes {
				t.Errorf("result has %d runes, want %d", n, tc.wantRunes)
			}
			if !strings.HasPrefix(tc.in, got) {
				t.Error("result is not a prefix of the input")
			}
			if (got == tc.in) != tc.wantSame {
				t.Errorf("unchanged = %v, want %v", got == tc.in, tc.wantSame)
			}
		})
	}
}

func TestStatusString(t *testing.T) {
	for s, want := range map[Status]string{StatusNew: "NEW", StatusDone: "DONE", StatusRetry: "RETRY", StatusDead: "DEAD", 9: "Status(9)"} {
		if got := s.String(); got != want {
			t.Errorf("Status(%d).String() = %q, want %q", int8(s), got, want)
		}
	}
}
