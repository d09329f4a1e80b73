package sqlstore

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	outbox "github.com/go-outbox/outbox/core"
)

// The headers column holds a JSON object of strings. Every event written
// encodes it and every event claimed decodes it, so both have a fast path
// for what headers nearly always are — short ASCII keys and values with
// nothing to escape — and leave everything else to encoding/json, whose
// output they match: keys in sorted order, the same escapes.

// encodeHeaders returns the headers as a JSON object, or nil (NULL) when
// there are none.
func encodeHeaders(e outbox.Envelope) any {
	n := e.NumHeaders()
	if n == 0 {
		return nil
	}
	keys := make([]string, 0, n)
	size := 2
	e.RangeHeaders(func(k, v string) {
		keys = append(keys, k)
		size += len(k) + len(v) + 6
	})
	slices.Sort(keys)
	b := make([]byte, 0, size)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		v, _ := e.Header(k)
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, v)
	}
	return string(append(b, '}'))
}

// appendJSONString appends s as a JSON string, as encoding/json writes it.
func appendJSONString(b []byte, s string) []byte {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// decodeHeaders reads what encodeHeaders wrote: a JSON object of strings.
func decodeHeaders(s string) (map[string]string, error) {
	if h, ok := decodePlainHeaders(s); ok {
		return h, nil
	}
	var h map[string]string
	if err := json.Unmarshal([]byte(s), &h); err != nil {
		return nil, err
	}
	return h, nil
}

// decodePlainHeaders decodes a JSON object of strings without escapes,
// with keys and values that share s's memory. It returns false for
// anything else (escapes, invalid UTF-8, other JSON, invalid text), for
// encoding/json to decode or reject.
func decodePlainHeaders(s string) (map[string]string, bool) {
	if !utf8.ValidString(s) {
		return nil, false
	}
	i := skipSpace(s, 0)
	if i == len(s) || s[i] != '{' {
		return nil, false
	}
	h := make(map[string]string, strings.Count(s, ":"))
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return h, skipSpace(s, i+1) == len(s)
	}
	for {
		k, j, ok := plainString(s, i)
		if !ok {
			return nil, false
		}
		if j = skipSpace(s, j); j == len(s) || s[j] != ':' {
			return nil, false
		}
		v, j, ok := plainString(s, skipSpace(s, j+1))
		if !ok {
			return nil, false
		}
		h[k] = v
		if j = skipSpace(s, j); j == len(s) {
			return nil, false
		}
		switch s[j] {
		case ',':
			i = skipSpace(s, j+1)
		case '}':
			return h, skipSpace(s, j+1) == len(s)
		default:
			return nil, false
		}
	}
}

// plainString reads a JSON string without escapes or control characters
// at s[i:] and returns its content and the index after it.
func plainString(s string, i int) (string, int, bool) {
	if i == len(s) || s[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			return s[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return "", 0, false
		}
	}
	return "", 0, false
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}
