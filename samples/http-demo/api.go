package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/rs/zerolog"
	"go.uber.org/fx"
)

// maxBody bounds request bodies.
const maxBody = 64 << 10

// API is the HTTP interface: orders, the dead-letter admin, health.
type API struct {
	orders   *Orders
	outbox   *outbox.Client
	store    *outboxsql.Store
	db       *sql.DB
	shipping *Shipping
	log      zerolog.Logger
	ready    atomic.Bool
}

// newAPI returns the API; it reports ready once the app (the outbox
// included) has started, and not ready from the moment it stops.
func newAPI(lc fx.Lifecycle, orders *Orders, c *outbox.Client, store *outboxsql.Store, db *sql.DB, sh *Shipping, log zerolog.Logger) *API {
	a := &API{orders: orders, outbox: c, store: store, db: db, shipping: sh, log: log}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { a.ready.Store(true); return nil },
		OnStop:  func(context.Context) error { a.ready.Store(false); return nil },
	})
	return a
}

// Handler returns the routes, wrapped in the request logger.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", a.createOrder)
	mux.HandleFunc("GET /orders/{id}", a.getOrder)
	mux.HandleFunc("GET /outbox/stats", a.stats)
	mux.HandleFunc("GET /outbox/dead", a.listDead)
	mux.HandleFunc("POST /outbox/dead/{id}/replay", a.replay)
	mux.HandleFunc("POST /outbox/dead/replay", a.replayAll)
	mux.HandleFunc("GET /debug/shipping", a.getShipping)
	mux.HandleFunc("PUT /debug/shipping", a.setShipping)
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", a.readyz)
	return a.logRequests(mux)
}

// createOrder stores an order and its OrderPlaced event in one transaction.
func (a *API) createOrder(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Customer    string `json:"customer"`
		AmountCents int64  `json:"amount_cents"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	req.Customer = strings.TrimSpace(req.Customer)
	var problems []string
	if req.Customer == "" || utf8.RuneCountInString(req.Customer) > 200 {
		problems = append(problems, "customer is required (1-200 characters)")
	}
	if req.AmountCents <= 0 {
		problems = append(problems, "amount_cents must be a positive integer")
	}
	if len(problems) > 0 {
		writeError(w, http.StatusUnprocessableEntity, strings.Join(problems, "; "))
		return
	}
	order, err := a.orders.Place(r.Context(), req.Customer, req.AmountCents)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/orders/"+order.ID)
	writeJSON(w, http.StatusCreated, order)
}

func (a *API) getOrder(w http.ResponseWriter, r *http.Request) {
	order, err := a.orders.Get(r.Context(), r.PathValue("id"))
	if errors.Is(err, errOrderNotFound) {
		writeError(w, http.StatusNotFound, "no order with id "+r.PathValue("id"))
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, order)
}

// stats counts the outbox by status and reports the oldest pending event.
func (a *API) stats(w http.ResponseWriter, r *http.Request) {
	s, err := a.outbox.Stats(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	byStatus := map[string]int64{}
	for _, st := range []outbox.Status{outbox.StatusNew, outbox.StatusDone, outbox.StatusRetry, outbox.StatusDead} {
		byStatus[st.String()] = s.ByStatus[st]
	}
	resp := struct {
		Table                   string           `json:"table"`
		ByStatus                map[string]int64 `json:"by_status"`
		Pending                 int64            `json:"pending"`
		OldestPendingAt         *time.Time       `json:"oldest_pending_at"`
		OldestPendingAgeSeconds float64          `json:"oldest_pending_age_seconds"`
	}{Table: a.store.Table(), ByStatus: byStatus, Pending: byStatus["NEW"] + byStatus["RETRY"]}
	if !s.OldestPending.IsZero() {
		t := s.OldestPending.UTC()
		resp.OldestPendingAt = &t
		resp.OldestPendingAgeSeconds = time.Since(t).Round(time.Millisecond).Seconds()
	}
	writeJSON(w, http.StatusOK, resp)
}

// deadEvent is a DEAD event as the admin API shows it.
type deadEvent struct {
	ID            string          `json:"id"`
	EventType     string          `json:"event_type"`
	AggregateType string          `json:"aggregate_type"`
	AggregateID   string          `json:"aggregate_id"`
	Attempts      int             `json:"attempts"`
	LastError     string          `json:"last_error"`
	CreatedAt     time.Time       `json:"created_at"`
	DeadAt        time.Time       `json:"dead_at"`
	Payload       json.RawMessage `json:"payload,omitempty"`
}

// listDead pages through DEAD events: ?limit= (1-500, default 50),
// ?after=<id> (from next_after), ?event_type=.
func (a *API) listDead(w http.ResponseWriter, r *http.Request) {
	q := outbox.Query{Limit: 50, AfterID: r.URL.Query().Get("after"), EventType: r.URL.Query().Get("event_type")}
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			writeError(w, http.StatusBadRequest, "limit must be an integer from 1 to 500")
			return
		}
		q.Limit = n
	}
	recs, err := a.outbox.Dead().List(r.Context(), q)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	total, err := a.outbox.Dead().Count(r.Context(), outbox.Query{EventType: q.EventType})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	events := make([]deadEvent, 0, len(recs))
	for _, rec := range recs {
		d := deadEvent{ID: rec.ID, Attempts: rec.Attempts, LastError: rec.LastError, CreatedAt: rec.CreatedAt, DeadAt: rec.DoneAt}
		if rec.Err == nil {
			e := rec.Envelope
			d.EventType, d.AggregateType, d.AggregateID = e.Type(), e.AggregateType(), e.AggregateID()
			if e.PayloadKind() == outbox.PayloadJSON {
				d.Payload = json.RawMessage(e.PayloadString())
			}
		}
		events = append(events, d)
	}
	resp := map[string]any{"total": total, "events": events}
	if len(recs) == q.Limit {
		resp["next_after"] = recs[len(recs)-1].ID
	}
	writeJSON(w, http.StatusOK, resp)
}

// replay makes one DEAD event pending again; the poller delivers it.
func (a *API) replay(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	err := a.outbox.Dead().Replay(r.Context(), id)
	if errors.Is(err, outbox.ErrNotFound) {
		writeError(w, http.StatusNotFound, "no DEAD event with id "+id)
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"id": id, "status": outbox.StatusNew.String()})
}

// replayAll replays every DEAD event (?event_type= to narrow it).
func (a *API) replayAll(w http.ResponseWriter, r *http.Request) {
	n, err := a.outbox.Dead().ReplayAll(r.Context(), outbox.Query{EventType: r.URL.Query().Get("event_type")})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]int64{"replayed": n})
}

func (a *API) getShipping(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]bool{"fail": a.shipping.Failing()})
}

// setShipping makes the shipping listener fail, or work again, for trying
// out retries, dead letters and replay.
func (a *API) setShipping(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Fail *bool `json:"fail"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.Fail == nil {
		writeError(w, http.StatusUnprocessableEntity, `body must be {"fail": true} or {"fail": false}`)
		return
	}
	a.shipping.SetFailing(*req.Fail)
	a.log.Warn().Bool("fail", *req.Fail).Msg("shipping listener switched")
	writeJSON(w, http.StatusOK, map[string]bool{"fail": *req.Fail})
}

// readyz is ready while the app runs and the database answers.
func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	if !a.ready.Load() {
		writeError(w, http.StatusServiceUnavailable, "not started, or stopping")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	if err := a.db.PingContext(ctx); err != nil {
		writeError(w, http.StatusServiceUnavailable, "database unreachable")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// fail logs an unexpected error and answers 500 without leaking it.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	logFrom(r).Error().Err(err).Msg("request failed")
	writeError(w, http.StatusInternalServerError, "internal error")
}

// decodeJSON reads one JSON object into v, rejecting unknown fields,
// trailing data and bodies over maxBody, with a message a client can act on.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		if dec.More() {
			return errors.New("invalid JSON body: unexpected data after the object")
		}
		if _, err := dec.Token(); err != io.EOF {
			return errors.New("invalid JSON body: unexpected data after the object")
		}
		return nil
	case errors.Is(err, io.EOF):
		return errors.New("invalid JSON body: the body is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("invalid JSON body: it ends too early")
	case errors.As(err, &syntaxErr):
		return fmt.Errorf("invalid JSON body: syntax error at byte %d: %s", syntaxErr.Offset, syntaxErr.Error())
	case errors.As(err, &typeErr):
		return fmt.Errorf("invalid JSON body: field %q must be %s, not %s", typeErr.Field, jsonKind(typeErr.Type), typeErr.Value)
	case errors.As(err, &tooBig):
		return fmt.Errorf("invalid JSON body: larger than %d bytes", tooBig.Limit)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Errorf("invalid JSON body: unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return fmt.Errorf("invalid JSON body: %w", err)
}

// jsonKind names the JSON value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	}
	return "a " + t.String()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// statusRecorder remembers the status and size of a response.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(p)
	s.bytes += n
	return n, err
}

type logKey struct{}

// logFrom returns the request's logger (with its request id).
func logFrom(r *http.Request) *zerolog.Logger {
	if l, ok := r.Context().Value(logKey{}).(*zerolog.Logger); ok {
		return l
	}
	nop := zerolog.Nop()
	return &nop
}

// logRequests writes one structured line per request: method, path,
// status, size, duration, remote address and a request id (from the
// X-Request-Id header, or a new one, echoed in the response).
func (a *API) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 64 {
			id = outbox.NewULID()
		}
		w.Header().Set("X-Request-Id", id)
		l := a.log.With().Str("request_id", id).Logger()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), logKey{}, &l)))
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		ev := l.Info()
		switch {
		case rec.status >= 500:
			ev = l.Error()
		case rec.status >= 400:
			ev = l.Warn()
		}
		ev.Str("method", r.Method).Str("path", r.URL.Path).Int("status", rec.status).Int("bytes", rec.bytes).
			Dur("duration_ms", time.Since(start)).Str("remote", r.RemoteAddr).Msg("http request")
	})
}
