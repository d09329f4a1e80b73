package outboxhttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxadmin"
)

// maxAuditLimit bounds one page of the audit trail.
const maxAuditLimit = 500

// errUnsupported answers an operator action on a source whose Store keeps
// no control tables (outbox.ErrUnsupported).
var errUnsupported = &apiError{http.StatusNotImplemented, codeUnsupported,
	"this source's store keeps no control tables (pauses, audit trail) or cannot change events in any status; migrate its database with this version"}

// unsupported turns outbox.ErrUnsupported into errUnsupported and leaves
// any other error as it is.
func unsupported(err error) error {
	if errors.Is(err, outbox.ErrUnsupported) {
		return errUnsupported
	}
	return err
}

// DefaultPrincipal is the principal of a Config without Principal: the
// remote address of the request, as "http <address>".
func DefaultPrincipal(r *http.Request) string { return "http " + r.RemoteAddr }

// decodeBody decodes the body of a mutation into v: one JSON object, no
// unknown fields, at most maxBody bytes. example is shown when it is empty.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, example string) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, extra := dec.Token(); !errors.Is(extra, io.EOF) {
			err = errors.New("more than one JSON value")
		}
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return &apiError{http.StatusRequestEntityTooLarge, codeTooLarge, fmt.Sprintf("request body larger than %d bytes", maxBody)}
	case errors.Is(err, io.EOF):
		return badRequest("empty body: want a JSON object such as %s", example)
	case err != nil:
		return badRequest("body: %v", err)
	}
	return nil
}

// checkReason refuses a reason longer than the audit trail keeps.
func checkReason(reason string) error {
	if len(reason) > outbox.MaxReasonLen {
		return badRequest("reason: longer than %d bytes", outbox.MaxReasonLen)
	}
	return nil
}

// checkIDs checks the ids of an operator action: 1 to maxIDs non-empty
// ids, duplicates counted once; it returns them in their order.
func checkIDs(in []string) ([]string, error) {
	switch {
	case len(in) == 0:
		return nil, badRequest("no ids: want {\"ids\": [\"…\"]}")
	case len(in) > maxIDs:
		return nil, badRequest("%d ids: at most %d in one request", len(in), maxIDs)
	}
	ids := make([]string, 0, len(in))
	seen := make(map[string]bool, len(in))
	for _, id := range in {
		switch {
		case id == "":
			return nil, badRequest("ids: an empty id")
		case len(id) > outbox.MaxEventIDLen:
			return nil, badRequest("ids: %q is not an event id (at most %d characters)", id, outbox.MaxEventIDLen)
		case !seen[id]: // the first of duplicates, in the given order
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, nil
}

func (h *Handler) health(w http.ResponseWriter, r *http.Request, src *source) {
	if err := onlyParams(r.URL.Query()); err != nil {
		h.fail(w, r, src, err)
		return
	}
	hl, err := src.client.Health(r.Context())
	if err != nil {
		h.fail(w, r, src, err)
		return
	}
	h.writeJSON(w, http.StatusOK, healthJSON{Source: src.name, Health: outboxadmin.NewHealth(hl)})
}

func (h *Handler) pausesList(w http.ResponseWriter, r *http.Request, src *source) {
	if err := onlyParams(r.URL.Query()); err != nil {
		h.fail(w, r, src, err)
		return
	}
	ps, err := src.client.Pauses(r.Context())
	if err != nil {
		h.fail(w, r, src, unsupported(err))
		return
	}
	h.writeJSON(w, http.StatusOK, pausesJSON{Pauses: outboxadmin.NewPauses(ps)})
}

// readScope decodes the body of a pause or a resume.
func readScope(w http.ResponseWriter, r *http.Request) (pauseRequest, error) {
	var req pauseRequest
	if err := decodeBody(w, r, &req, `{"scope": "OrderPlaced", "reason": "…"}`); err != nil {
		return req, err
	}
	if req.Scope == "" {
		return req, badRequest("no scope: want an event type, or %q for every type", outbox.PauseAll)
	}
	if len(req.Scope) > outbox.MaxEventTypeLen {
		return req, badRequest("scope: longer than an event type can be (%d characters)", outbox.MaxEventTypeLen)
	}
	return req, checkReason(req.Reason)
}

func (h *Handler) pause(w http.ResponseWriter, r *http.Request, src *source) {
	req, err := readScope(w, r)
	if err != nil {
		h.fail(w, r, src, err)
		return
	}
	if strings.TrimSpace(req.Reason) == "" {
		h.fail(w, r, src, badRequest("no reason: say why, for the audit trail"))
		return
	}
	if err := src.client.Pause(r.Context(), req.Scope, req.Reason); err != nil {
		if errors.Is(err, outbox.ErrInvalidConfig) {
			err = badRequest("%v", err)
		}
		h.fail(w, r, src, unsupported(err))
		return
	}
	h.audit(r, src, "paused", 1, nil, "scope", req.Scope, "reason", req.Reason)
	h.writeJSON(w, http.StatusOK, pauseChangeJSON{Paused: req.Scope})
}

func (h *Handler) resume(w http.ResponseWriter, r *http.Request, src *source) {
	req, err := readScope(w, r)
	if err != nil {
		h.fail(w, r, src, err)
		return
	}
	if err := src.client.Resume(r.Context(), req.Scope); err != nil {
		switch {
		case isNotFound(err):
			err = notFound("%s is not paused", strconv.Quote(req.Scope))
		case errors.Is(err, outbox.ErrInvalidConfig):
			err = badRequest("%v", err)
		}
		h.fail(w, r, src, unsupported(err))
		return
	}
	h.audit(r, src, "resumed", 1, nil, "scope", req.Scope)
	h.writeJSON(w, http.StatusOK, pauseChangeJSON{Resumed: req.Scope})
}

func (h *Handler) auditList(w http.ResponseWriter, r *http.Request, src *source) {
	v := r.URL.Query()
	if err := onlyParams(v, "limit", "before"); err != nil {
		h.fail(w, r, src, err)
		return
	}
	q := outbox.AuditQuery{Limit: defaultLimit}
	if s, ok := v["limit"]; ok {
		n, err := strconv.Atoi(s[0])
		if err != nil || n < 1 || n > maxAuditLimit {
			h.fail(w, r, src, badRequest("limit: %q: want a number from 1 to %d", s[0], maxAuditLimit))
			return
		}
		q.Limit = n
	}
	if s, ok := v["before"]; ok {
		n, err := strconv.ParseInt(s[0], 10, 64)
		if err != nil || n < 1 {
			h.fail(w, r, src, badRequest("before: %q: want an audit entry's id", s[0]))
			return
		}
		q.BeforeID = n
	}
	limit := q.Limit
	q.Limit++ // one more tells whether another page follows
	es, err := src.client.Audit(r.Context(), q)
	if err != nil {
		h.fail(w, r, src, unsupported(err))
		return
	}
	out := auditJSON{}
	if len(es) > limit {
		es = es[:limit]
		out.NextBefore = es[len(es)-1].ID
	}
	out.Entries = outboxadmin.NewAudit(es)
	h.writeJSON(w, http.StatusOK, out)
}

// readAction decodes the body of force-dead, delete and skip-head.
func readAction(w http.ResponseWriter, r *http.Request) (actionRequest, error) {
	var req actionRequest
	if err := decodeBody(w, r, &req, `{"ids": ["…"], "reason": "…"}`); err != nil {
		return req, err
	}
	ids, err := checkIDs(req.IDs)
	if err != nil {
		return req, err
	}
	req.IDs = ids
	return req, checkReason(req.Reason)
}

// action serves an operator action on events in any status.
func (h *Handler) action(name string, needReason bool, do func(r *http.Request, src *source, req actionRequest) (int64, error)) apiFunc {
	return func(w http.ResponseWriter, r *http.Request, src *source) {
		req, err := readAction(w, r)
		if err == nil && needReason && strings.TrimSpace(req.Reason) == "" {
			err = badRequest("no reason: say why, for the audit trail")
		}
		if err != nil {
			h.fail(w, r, src, err)
			return
		}
		n, err := do(r, src, req)
		if err != nil {
			if isNotFound(err) {
				err = notFound("%s", err.Error())
			}
			h.fail(w, r, src, unsupported(err))
			return
		}
		h.audit(r, src, name, n, req.IDs, "reason", req.Reason)
		h.writeJSON(w, http.StatusOK, actionJSON{Action: name, Changed: n, IDs: req.IDs})
	}
}

func (h *Handler) forceDead(r *http.Request, src *source, req actionRequest) (int64, error) {
	return src.client.ForceDead(r.Context(), req.Reason, req.IDs...)
}

func (h *Handler) deleteEvents(r *http.Request, src *source, req actionRequest) (int64, error) {
	return src.client.DeleteEvents(r.Context(), req.Reason, req.IDs...)
}

func (h *Handler) skipHead(r *http.Request, src *source, req actionRequest) (int64, error) {
	if len(req.IDs) != 1 {
		return 0, badRequest("skip-head takes one id, got %d", len(req.IDs))
	}
	if err := src.client.SkipHead(r.Context(), req.IDs[0], req.Reason); err != nil {
		return 0, err
	}
	return 1, nil
}
