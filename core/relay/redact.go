package relay

import (
	"fmt"
	"strings"

	"github.com/go-outbox/outbox/core/internal/secret"
)

// RedactedURL is a broker URL, or a comma-separated list of them, without
// its credentials, for errors and logs: see RedactURL.
type RedactedURL struct {
	// URL is the URL with the user information of each part (a user and
	// password, or a token) replaced by "redacted".
	URL     string
	secrets secret.Set
}

// redacted stands in a redacted URL for its credentials.
const redacted = "redacted"

// RedactURL returns raw without its credentials. It does not need raw to
// parse: whatever stands between "://" and the last '@' of a part is
// taken for credentials.
func RedactURL(raw string) RedactedURL {
	var r RedactedURL
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		scheme := strings.Index(p, "://")
		if scheme < 0 {
			continue
		}
		rest := p[scheme+3:]
		at := strings.LastIndex(rest, "@")
		if at < 0 {
			continue
		}
		info := rest[:at]
		r.secrets = append(r.secrets, info)
		if _, pass, ok := strings.Cut(info, ":"); ok {
			r.secrets = append(r.secrets, pass)
		}
		parts[i] = p[:scheme+3] + redacted + rest[at:]
	}
	r.secrets = secret.NewSet(r.secrets, redacted)
	r.URL = strings.Join(parts, ",")
	return r
}

// Errorf returns an error whose text is fmt.Errorf(format, r.URL, err)'s
// with every credential of the URL taken out (a client error may quote
// the URL it was given), and which wraps err for errors.Is and errors.As.
func (r RedactedURL) Errorf(format string, err error) error {
	msg := r.secrets.Scrub(fmt.Errorf(format, r.URL, err).Error(), redacted)
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
