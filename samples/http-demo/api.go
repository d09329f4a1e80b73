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
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/rs/zerolog"
	"go.uber.org/fx"
)

// maxBody bounds request bodies.
const maxBody = 64 << 10

// API is the HTTP interface: orders, the outbox's admin page, health.
type API struct {
	orders   *Orders
	admin    *Admin
	db       *sql.DB
	shipping *Shipping
	obs      *Observability
	log      zerolog.Logger
	ready    atomic.Bool
}

// newAPI returns the API; it reports ready once the app (the outbox
// included) has started, and not ready from the moment it stops.
func newAPI(lc fx.Lifecycle, orders *Orders, admin *Admin, db *sql.DB, sh *Shipping, obs *Observability, log zerolog.Logger) *API {
	a := &API{orders: orders, admin: admin, db: db, shipping: sh, obs: obs, log: log}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { a.ready.Store(true); return nil },
		OnStop:  func(context.Context) error { a.ready.Store(false); return nil },
	})
	return a
}

// Handler returns the routes, wrapped in the request logger.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	// The service's own API.
	mux.HandleFunc("POST /orders", a.createOrder)
	mux.HandleFunc("GET /orders/{id}", a.getOrder)
	mux.HandleFunc("GET /debug/shipping", a.getShipping)
	mux.HandleFunc("PUT /debug/shipping", a.setShipping)
	// Operators: the outbox's admin page and its JSON API (stats, events,
	// dead letters; replay and delete with the admin token).
	mux.Handle("/admin/", http.StripPrefix("/admin", a.admin.handler))
	mux.HandleFunc("GET /admin/login", a.admin.login)
	// Health.
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", a.readyz)
	// Prometheus: the outbox's series (outbox_*), Go and process.
	mux.Handle("GET /metrics", a.obs.metricsHandler())
	// The tracing middleware wraps mux directly, so that it sees the
	// matched route, inside the request logger.
	return a.logRequests(a.obs.traceRequests(mux))
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
		case routine(r) && rec.status < 400:
			ev = l.Debug()
		case rec.status >= 500:
			ev = l.Error()
		case rec.status >= 400:
			ev = l.Warn()
		}
		ev.Str("method", r.Method).Str("path", r.URL.Path).Int("status", rec.status).Int("bytes", rec.bytes).
			Dur("duration_ms", time.Since(start)).Str("remote", r.RemoteAddr).Msg("http request")
	})
}
