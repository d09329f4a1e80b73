package outbox

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Whatever a listener's error says, its stored text is valid UTF-8
// without NUL or other control characters (newline and tab kept), at most
// MaxErrorLen characters, cut on a character boundary.
func TestStoredErrorIsStorableEverywhere(t *testing.T) {
	long := strings.Repeat("é", MaxErrorLen+10)
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "broker said no", "broker said no"},
		{"newline and tab kept", "line 1\n\tline 2", "line 1\n\tline 2"},
		{"NUL", "a\x00b", `a\x00b`},
		{"escape and bell", "\x1b[31mred\x07", `\x1b[31mred\x07`},
		{"carriage return", "a\rb", `a\x0db`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"C1 control", "a\u0085b", `a\u0085b`},
		{"invalid UTF-8", "a\xff\xfeb", "a\uFFFDb"},
		{"truncated UTF-8 sequence", "ab\xe2\x82", "ab\uFFFD"},
		{"surrogate half", "a\xed\xa0\x80b", "a\uFFFDb"},
		{"too long, multibyte", long, long[:2*MaxErrorLen]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := storedError(tc.in)
			if got != tc.want {
				t.Errorf("storedError(%q) = %q; want %q", tc.in, got, tc.want)
			}
			if !utf8.ValidString(got) || strings.ContainsRune(got, 0) || utf8.RuneCountInString(got) > MaxErrorLen {
				t.Errorf("storedError(%q) = %q is not storable", tc.in, got)
			}
		})
	}
	// The cut keeps whole characters even after escaping has made the text longer.
	nuls := storedError(strings.Repeat("\x00", MaxErrorLen))
	if utf8.RuneCountInString(nuls) != MaxErrorLen || !strings.HasPrefix(nuls, `\x00\x00`) {
		t.Errorf("escaped NULs cut to %d characters; want %d", utf8.RuneCountInString(nuls), MaxErrorLen)
	}
}
