package outboxhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"

	outbox "github.com/go-outbox/outbox/core"
)

// apiError is an error the API answers with: an HTTP status, a stable
// code and a message for the operator.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

// The error codes of the API's error responses.
const (
	codeBadRequest       = "bad_request"
	codeNotFound         = "not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeReadOnly         = "read_only"
	codeForbidden        = "forbidden"
	codeReadForbidden    = "read_forbidden"
	codeMisdirected      = "misdirected_host"
	codeCrossOrigin      = "cross_origin"
	codeNotJSON          = "unsupported_media_type"
	codeTooLarge         = "too_large"
	codeInternal         = "internal"
	codeUnavailable      = "unavailable"
	codeUnsupported      = "unsupported"
)

var (
	errReadOnly = &apiError{http.StatusForbidden, codeReadOnly,
		"read-only: this admin handler has no authorizer (Config.Authorize), so replay and delete are disabled"}
	errNotJSON = &apiError{http.StatusUnsupportedMediaType, codeNotJSON,
		"a replay or delete needs the header Content-Type: application/json (a CSRF defence)"}
	errCrossOrigin = &apiError{http.StatusForbidden, codeCrossOrigin,
		"cross-origin request refused: replay and delete are accepted from the admin page's own origin only"}
	errStore = &apiError{http.StatusInternalServerError, codeInternal,
		"the outbox store failed; the server's log has the details"}
	errCanceled = &apiError{http.StatusServiceUnavailable, codeUnavailable,
		"the request was cancelled before the store answered"}
)

func badRequest(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, codeBadRequest, fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *apiError {
	return &apiError{http.StatusNotFound, codeNotFound, fmt.Sprintf(format, args...)}
}

func methodNotAllowed(got, want string) *apiError {
	return &apiError{http.StatusMethodNotAllowed, codeMethodNotAllowed, fmt.Sprintf("method %s not allowed here; use %s", got, want)}
}

func forbidden(err error) *apiError {
	return &apiError{http.StatusForbidden, codeForbidden, "not authorized: " + err.Error()}
}

func forbiddenRead(err error) *apiError {
	return &apiError{http.StatusForbidden, codeReadForbidden, "not authorized to read: " + err.Error()}
}

// errorJSON is the body of every error response of the API.
type errorJSON struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// fail answers r with err: an *apiError as it is; anything else is a store
// error, logged with its text and answered with a message that does not
// repeat it (it may name the database's address or user).
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, src *source, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		name := ""
		if src != nil {
			name = src.name
		}
		switch {
		case r.Context().Err() != nil && errors.Is(err, context.Canceled):
			ae = errCanceled
			h.logger.DebugContext(r.Context(), "outboxhttp: request cancelled", "source", name, "method", r.Method, "path", r.URL.Path)
		default:
			ae = errStore
			h.logger.ErrorContext(r.Context(), "outboxhttp: store error", "source", name, "method", r.Method, "path", r.URL.Path, "err", err)
		}
	}
	h.writeJSON(w, ae.status, errorJSON{Error: ae.msg, Code: ae.code})
}

// writeJSON answers with v as indented JSON.
func (h *Handler) writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil { // the API's own types always encode
		status = http.StatusInternalServerError
		b = []byte(`{"error":"cannot encode the response","code":"internal"}`)
		h.logger.Error("outboxhttp: encode response", "err", err)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// isJSON reports whether a Content-Type header names application/json.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

func isNotFound(err error) bool { return errors.Is(err, outbox.ErrNotFound) }
