package outboxhttp

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxadmin"
)

// Limits of the API's input.
const (
	// defaultLimit and maxLimit bound one page of a list.
	defaultLimit = 50
	maxLimit     = 500
	// maxIDs is the most ids one replay or delete names: they are
	// checked and changed in one statement each.
	maxIDs = 500
	// maxBody bounds the body of a mutation.
	maxBody = 1 << 20
)

func (h *Handler) info(w http.ResponseWriter, r *http.Request) {
	out := infoJSON{Title: h.title, ReadOnly: h.ReadOnly(), Sources: make([]sourceJSON, len(h.names))}
	for i, n := range h.names {
		out.Sources[i] = sourceJSON{Name: n}
	}
	if h.authorize != nil {
		if err := h.authorize(r); err != nil {
			out.AuthorizationError = err.Error()
		} else {
			out.Authorized = true
		}
	}
	h.writeJSON(w, http.StatusOK, out)
}

func (h *Handler) stats(w http.ResponseWriter, r *http.Request, src *source) {
	if err := onlyParams(r.URL.Query()); err != nil {
		h.fail(w, r, src, err)
		return
	}
	st, err := src.client.Stats(r.Context())
	if err != nil {
		h.fail(w, r, src, err)
		return
	}
	h.writeJSON(w, http.StatusOK, statsJSON{Source: src.name, Stats: outboxadmin.NewStats(st, h.clock.Now())})
}

// filter is the query of a list endpoint.
type filter struct {
	q     outbox.Query
	limit int
}

// parseFilter reads the query parameters of a list: status (when
// withStatus), type, aggregate, tenant, after and limit. Anything else, a
// parameter given twice or a value out of range is a bad request.
func parseFilter(v url.Values, withStatus bool) (filter, error) {
	known := []string{"type", "aggregate", "tenant", "after", "limit"}
	if withStatus {
		known = append(known, "status")
	}
	if err := onlyParams(v, known...); err != nil {
		return filter{}, err
	}
	f := filter{limit: defaultLimit}
	f.q.EventType = v.Get("type")
	f.q.AggregateType = v.Get("aggregate")
	f.q.TenantID = v.Get("tenant")
	f.q.AfterID = v.Get("after")
	if err := checkNames(f.q.EventType, f.q.AggregateType, f.q.TenantID); err != nil {
		return f, err
	}
	if len(f.q.AfterID) > outbox.MaxEventIDLen {
		return f, badRequest("after: %q is not an event id (at most %d characters)", f.q.AfterID, outbox.MaxEventIDLen)
	}
	if s, ok := v["limit"]; ok {
		n, err := strconv.Atoi(s[0])
		if err != nil || n < 1 || n > maxLimit {
			return f, badRequest("limit: %q: want a number from 1 to %d", s[0], maxLimit)
		}
		f.limit = n
	}
	if s, ok := v["status"]; ok {
		st, err := parseStatuses(s[0])
		if err != nil {
			return f, err
		}
		f.q.Statuses = st
	}
	return f, nil
}

// onlyParams fails unless v has only the known parameters, each once.
func onlyParams(v url.Values, known ...string) error {
	for k, vals := range v {
		if !slices.Contains(known, k) {
			if len(known) == 0 {
				return badRequest("unknown query parameter %q: this endpoint takes none", k)
			}
			return badRequest("unknown query parameter %q (known: %s)", k, strings.Join(known, ", "))
		}
		if len(vals) > 1 {
			return badRequest("query parameter %q given %d times", k, len(vals))
		}
	}
	return nil
}

// checkNames checks an event type, an aggregate type and a tenant filter:
// longer names than an envelope takes match nothing and are a mistake.
func checkNames(eventType, aggregate, tenant string) error {
	if len(eventType) > outbox.MaxEventTypeLen {
		return badRequest("type: longer than an event type can be (%d characters)", outbox.MaxEventTypeLen)
	}
	if len(aggregate) > outbox.MaxAggregateTypeLen {
		return badRequest("aggregate: longer than an aggregate type can be (%d characters)", outbox.MaxAggregateTypeLen)
	}
	if len(tenant) > outbox.MaxTenantIDLen {
		return badRequest("tenant: longer than a tenant id can be (%d characters)", outbox.MaxTenantIDLen)
	}
	return nil
}

// parseStatuses reads a comma-separated list of statuses, in any case;
// PENDING stands for NEW and RETRY.
func parseStatuses(s string) ([]outbox.Status, error) {
	var out []outbox.Status
	for part := range strings.SplitSeq(s, ",") {
		var add []outbox.Status
		switch strings.ToUpper(strings.TrimSpace(part)) {
		case "NEW":
			add = []outbox.Status{outbox.StatusNew}
		case "RETRY":
			add = []outbox.Status{outbox.StatusRetry}
		case "DONE":
			add = []outbox.Status{outbox.StatusDone}
		case "DEAD":
			add = []outbox.Status{outbox.StatusDead}
		case "PENDING":
			add = []outbox.Status{outbox.StatusNew, outbox.StatusRetry}
		default:
			return nil, badRequest("status: %q: want NEW, RETRY, DONE, DEAD or PENDING, comma-separated", part)
		}
		for _, st := range add {
			if !slices.Contains(out, st) {
				out = append(out, st)
			}
		}
	}
	return out, nil
}

// readPage reads one page of f with list: one event more than the limit tells
// whether another page follows.
func readPage(f filter, list func(q outbox.Query) ([]outbox.Record, error)) (listJSON, error) {
	q := f.q
	q.Limit = f.limit + 1
	recs, err := list(q)
	if err != nil {
		return listJSON{}, err
	}
	out := listJSON{Events: make([]eventJSON, 0, min(len(recs), f.limit))}
	if len(recs) > f.limit {
		recs = recs[:f.limit]
		out.NextAfter = recs[len(recs)-1].ID
	}
	for _, rec := range recs {
		out.Events = append(out.Events, toEventJSON(rec, false))
	}
	return out, nil
}

func (h *Handler) events(w http.ResponseWriter, r *http.Request, src *source) {
	f, err := parseFilter(r.URL.Query(), true)
	if err != nil {
		h.fail(w, r, src, err)
		return
	}
	out, err := readPage(f, func(q outbox.Query) ([]outbox.Record, error) { return src.events.List(r.Context(), q) })
	if err != nil {
		h.fail(w, r, src, err)
		return
	}
	h.writeJSON(w, http.StatusOK, out)
}

func (h *Handler) event(w http.ResponseWriter, r *http.Request, src *source) {
	if err := onlyParams(r.URL.Query()); err != nil {
		h.fail(w, r, src, err)
		return
	}
	id := r.PathValue("id")
	rec, err := src.client.Get(r.Context(), id)
	if err != nil {
		if isNotFound(err) {
			err = notFound("no event with id %s in source %s", id, src.name)
		}
		h.fail(w, r, src, err)
		return
	}
	h.writeJSON(w, http.StatusOK, toEventJSON(rec, true))
}

func (h *Handler) dead(w http.ResponseWriter, r *http.Request, src *source) {
	f, err := parseFilter(r.URL.Query(), false)
	if err != nil {
		h.fail(w, r, src, err)
		return
	}
	dead := src.client.Dead()
	out, err := readPage(f, func(q outbox.Query) ([]outbox.Record, error) { return dead.List(r.Context(), q) })
	if err != nil {
		h.fail(w, r, src, err)
		return
	}
	count := f.q
	count.AfterID = ""
	n, err := dead.Count(r.Context(), count)
	if err != nil {
		h.fail(w, r, src, err)
		return
	}
	out.Matching = &n
	h.writeJSON(w, http.StatusOK, out)
}

// where names src in the message of an id that is not a DEAD event.
func (src *source) where() string { return "source " + src.name }

// notDead explains why id is not a DEAD event of src: it does not exist,
// or it is in another status (404).
func (h *Handler) notDead(r *http.Request, src *source, id string) error {
	return asNotFound(outboxadmin.WhyNotDead(r.Context(), src.client, src.where(), id))
}

// checkDead fails with 404 unless every id is a DEAD event of src.
func (h *Handler) checkDead(r *http.Request, src *source, ids []string) error {
	return asNotFound(outboxadmin.CheckDead(r.Context(), src.client, src.where(), ids))
}

// asNotFound turns an *outboxadmin.NotDeadError into a 404 and leaves any
// other error (the store's) as it is.
func asNotFound(err error) error {
	var nd *outboxadmin.NotDeadError
	if errors.As(err, &nd) {
		return notFound("%s", nd.Error())
	}
	return err
}

// pathID is the event id of a mutation's path.
func pathID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if len(id) > outbox.MaxEventIDLen {
		return "", badRequest("%q is not an event id (at most %d characters)", id, outbox.MaxEventIDLen)
	}
	return id, nil
}

// readIDs decodes the body of a replay or delete. It accepts one JSON
// object with no unknown fields; ids must be 1 to maxIDs non-empty ids
// (duplicates count once), unless all is allowed and set.
func readIDs(w http.ResponseWriter, r *http.Request, allowAll bool) (idsRequest, error) {
	var req idsRequest
	if err := decodeBody(w, r, &req, `{"ids": ["…"]}`); err != nil {
		return req, err
	}
	if !allowAll && (req.All || req.DryRun || req.Type != "" || req.Aggregate != "" || req.Tenant != "") {
		return req, badRequest("delete takes ids only: {\"ids\": [\"…\"]}")
	}
	if req.All {
		if len(req.IDs) > 0 {
			return req, badRequest("give either ids or \"all\": true, not both")
		}
		return req, checkNames(req.Type, req.Aggregate, req.Tenant)
	}
	if req.Type != "" || req.Aggregate != "" || req.Tenant != "" || req.DryRun {
		return req, badRequest("type, aggregate, tenant and dry_run go with a replay of \"all\": true only")
	}
	if len(req.IDs) == 0 && allowAll {
		return req, badRequest("no ids: want {\"ids\": [\"…\"]} or {\"all\": true}")
	}
	ids, err := checkIDs(req.IDs)
	req.IDs = ids
	return req, err
}

// audit logs a change: who asked (the remote address) and what changed.
func (h *Handler) audit(r *http.Request, src *source, what string, n int64, ids []string, args ...any) {
	h.logger.InfoContext(r.Context(), "outboxhttp: "+what, append([]any{"source", src.name, "count", n, "ids", ids, "remote", r.RemoteAddr}, args...)...)
}

func (h *Handler) replayOne(w http.ResponseWriter, r *http.Request, src *source) {
	id, err := pathID(r)
	if err != nil {
		h.fail(w, r, src, err)
		return
	}
	if err := src.client.Dead().Replay(r.Context(), id); err != nil {
		if isNotFound(err) {
			err = h.notDead(r, src, id)
		}
		h.fail(w, r, src, err)
		return
	}
	n := int64(1)
	h.audit(r, src, "replayed DEAD events", n, []string{id})
	h.writeJSON(w, http.StatusOK, changeJSON{Replayed: &n, IDs: []string{id}})
}

func (h *Handler) deleteOne(w http.ResponseWriter, r *http.Request, src *source) {
	id, err := pathID(r)
	if err != nil {
		h.fail(w, r, src, err)
		return
	}
	n, err := src.client.Dead().Delete(r.Context(), id)
	if err == nil && n == 0 {
		err = h.notDead(r, src, id)
	}
	if err != nil {
		h.fail(w, r, src, err)
		return
	}
	h.audit(r, src, "deleted DEAD events", n, []string{id})
	h.writeJSON(w, http.StatusOK, changeJSON{Deleted: &n, IDs: []string{id}})
}

func (h *Handler) replayMany(w http.ResponseWriter, r *http.Request, src *source) {
	req, err := readIDs(w, r, true)
	if err != nil {
		h.fail(w, r, src, err)
		return
	}
	dead := src.client.Dead()
	if req.DryRun {
		plan, err := outboxadmin.PlanReplay(r.Context(), dead, outbox.Query{EventType: req.Type, AggregateType: req.Aggregate, TenantID: req.Tenant})
		if err != nil {
			h.fail(w, r, src, err)
			return
		}
		h.writeJSON(w, http.StatusOK, planJSON{DryRun: true, ReplayPlan: plan})
		return
	}
	if req.All {
		n, err := dead.ReplayAll(r.Context(), outbox.Query{EventType: req.Type, AggregateType: req.Aggregate, TenantID: req.Tenant})
		filter := []any{"type", req.Type, "aggregate", req.Aggregate, "tenant", req.Tenant}
		if err != nil {
			if n > 0 {
				h.audit(r, src, "replayed DEAD events, then failed", n, nil, filter...)
			}
			h.fail(w, r, src, err)
			return
		}
		h.audit(r, src, "replayed DEAD events", n, nil, filter...)
		h.writeJSON(w, http.StatusOK, changeJSON{Replayed: &n})
		return
	}
	if err := h.checkDead(r, src, req.IDs); err != nil {
		h.fail(w, r, src, err)
		return
	}
	n, err := outboxadmin.ReplayIDs(r.Context(), dead, req.IDs)
	if err != nil {
		h.fail(w, r, src, err)
		return
	}
	h.audit(r, src, "replayed DEAD events", n, req.IDs)
	h.writeJSON(w, http.StatusOK, changeJSON{Replayed: &n, IDs: req.IDs})
}

func (h *Handler) deleteMany(w http.ResponseWriter, r *http.Request, src *source) {
	req, err := readIDs(w, r, false)
	if err != nil {
		h.fail(w, r, src, err)
		return
	}
	if err := h.checkDead(r, src, req.IDs); err != nil {
		h.fail(w, r, src, err)
		return
	}
	n, err := src.client.Dead().Delete(r.Context(), req.IDs...)
	if err != nil {
		h.fail(w, r, src, err)
		return
	}
	h.audit(r, src, "deleted DEAD events", n, req.IDs)
	h.writeJSON(w, http.StatusOK, changeJSON{Deleted: &n, IDs: req.IDs})
}
