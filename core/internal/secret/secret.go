// Package secret takes the credentials found in a connection string out
// of the messages that may quote them: the one place the sinks' URLs and
// the SQL stores' DSNs are scrubbed the same way.
package secret

import (
	"cmp"
	"net/url"
	"slices"
	"strings"
)

// Set is the credentials found in a connection string: each as written,
// and as a URL would carry it unescaped, longest first, so that replacing
// them in turn leaves no part of one behind (a password inside
// "user:password").
type Set []string

// NewSet returns the set of found, with the unescaped forms added and the
// empty ones and mask left out.
func NewSet(found []string, mask string) Set {
	s := slices.Clone(found)
	for _, f := range found {
		for _, unescape := range []func(string) (string, error){url.PathUnescape, url.QueryUnescape} {
			if u, err := unescape(f); err == nil && u != f {
				s = append(s, u)
			}
		}
	}
	s = slices.DeleteFunc(s, func(v string) bool { return v == "" || v == mask })
	slices.SortFunc(s, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return Set(slices.Compact(s))
}

// Scrub returns text with every credential of s replaced by mask.
func (s Set) Scrub(text, mask string) string {
	for _, v := range s {
		text = strings.ReplaceAll(text, v, mask)
	}
	return text
}
