package outboxhttp

import (
	"context"
	"embed"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"regexp"
	"strings"

	outbox "github.com/go-outbox/outbox/core"
)

// Config configures the admin handler. New validates it.
type Config struct {
	// Sources are the outboxes the handler serves, one per data source
	// (at least one). The page shows one at a time and switches between
	// them; the JSON endpoints name them in their paths.
	Sources []Source
	// Authorize decides whether request r may change anything (replay or
	// delete dead letters): nil allows it, an error refuses it with 403 and
	// the error's text. It is called for every mutation, after the CSRF
	// checks, and for GET requests of the API root (to tell the page
	// whether to show its buttons), so it must have no side effects.
	//
	// Without Authorize the handler is read-only: the page says so and
	// shows no buttons, and every mutation is refused with 403.
	Authorize func(r *http.Request) error
	// AuthorizeRead decides whether request r may read: the page, its
	// assets and every endpoint of the API. nil allows it, an error
	// refuses it with 403 and the error's text. Every request, a mutation
	// too, passes it first; it must have no side effects.
	//
	// Without AuthorizeRead, reads are allowed on direct loopback
	// connections only (LoopbackOnly). Behind your own authentication
	// middleware, set it to AllowAnyone.
	AuthorizeRead func(r *http.Request) error
	// Principal names who request r acts as, once Authorize allowed it:
	// the audit trail records it as the actor of the change (see
	// outbox.WithActor) — your session's user name, say. Default:
	// DefaultPrincipal, the remote address.
	Principal func(r *http.Request) string
	// AllowedHosts are the host names (or IP addresses) of the Host
	// header the handler answers to, besides the ones it always allows:
	// loopback addresses, "localhost" and the names under ".localhost",
	// and the address of the server's end of the connection. Any other
	// Host is refused with 421, a defence against DNS rebinding (a page of
	// another site whose name is made to resolve to this server). Names
	// match without regard to case or a trailing dot and without a
	// port; AnyHost ("*") allows every Host, for a proxy that checks it.
	AllowedHosts []string
	// Title is the page's title (default "outbox").
	Title string
	// Logger logs the mutations (who replayed or deleted what) and the
	// store errors, whose text is never sent to the client (default
	// slog.Default()).
	Logger *slog.Logger
	// Clock tells the time for ages (default outbox.SystemClock).
	Clock outbox.Clock
}

// Source is one outbox the handler serves.
type Source struct {
	// Name names the source in the endpoints' paths and on the page:
	// 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or
	// a digit, unique among the sources.
	Name string
	// Client is the outbox of the data source (required): its Stats, Get
	// and Dead back the endpoints.
	Client *outbox.Client
	// Events lists and counts events of every status for the events
	// endpoint (required): usually the Store the Client was built with,
	// since a Client lists DEAD events only.
	Events EventLister
}

// EventLister lists and counts stored events; every outbox.Store is one.
type EventLister interface {
	// List returns events matching q, ordered by id.
	List(ctx context.Context, q outbox.Query) ([]outbox.Record, error)
	// Count returns how many events match q.
	Count(ctx context.Context, q outbox.Query) (int64, error)
}

// source is one validated Source.
type source struct {
	name   string
	client *outbox.Client
	events EventLister
}

// Handler serves the admin page and its JSON API (see the package
// documentation for the endpoints). It is safe for concurrent use.
type Handler struct {
	sources   map[string]*source
	names     []string
	authorize func(r *http.Request) error
	canRead   func(r *http.Request) error
	principal func(r *http.Request) string
	hosts     hostAllowList
	title     string
	logger    *slog.Logger
	clock     outbox.Clock
	origin    *http.CrossOriginProtection
	mux       *http.ServeMux
}

var sourceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

//go:embed ui
var uiFiles embed.FS

// New validates cfg and returns the handler. Errors wrap
// outbox.ErrInvalidConfig.
func New(cfg Config) (*Handler, error) {
	if len(cfg.Sources) == 0 {
		return nil, configErr("at least one Source is needed")
	}
	h := &Handler{
		sources:   make(map[string]*source, len(cfg.Sources)),
		authorize: cfg.Authorize,
		canRead:   cfg.AuthorizeRead,
		principal: cfg.Principal,
		title:     cfg.Title,
		logger:    cfg.Logger,
		clock:     cfg.Clock,
		origin:    http.NewCrossOriginProtection(),
		mux:       http.NewServeMux(),
	}
	for i, s := range cfg.Sources {
		switch {
		case !sourceName.MatchString(s.Name):
			return nil, configErr("source %d: name %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or a digit", i, s.Name)
		case h.sources[s.Name] != nil:
			return nil, configErr("source %q is named twice", s.Name)
		case s.Client == nil:
			return nil, configErr("source %q has no Client", s.Name)
		case s.Events == nil:
			return nil, configErr("source %q has no Events (the Store of its Client, say)", s.Name)
		}
		h.sources[s.Name] = &source{name: s.Name, client: s.Client, events: s.Events}
		h.names = append(h.names, s.Name)
	}
	var err error
	if h.hosts, err = newHostAllowList(cfg.AllowedHosts); err != nil {
		return nil, err
	}
	if h.canRead == nil {
		h.canRead = LoopbackOnly
	}
	if h.principal == nil {
		h.principal = DefaultPrincipal
	}
	if h.title == "" {
		h.title = "outbox"
	}
	if h.logger == nil {
		h.logger = slog.Default()
	}
	if h.clock == nil {
		h.clock = outbox.SystemClock
	}
	h.routes()
	return h, nil
}

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: outboxhttp: "+format, append([]any{outbox.ErrInvalidConfig}, args...)...)
}

// ReadOnly reports whether the handler refuses every mutation: it has no
// Authorize.
func (h *Handler) ReadOnly() bool { return h.authorize == nil }

// ServeHTTP serves the page and the API, to a request whose Host is
// allowed (Config.AllowedHosts) and that Config.AuthorizeRead allows.
// Mount it under a prefix with
// http.StripPrefix, the path ending in a slash:
//
//	mux.Handle("/admin/outbox/", http.StripPrefix("/admin/outbox", h))
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if err := h.hosts.check(r); err != nil {
		h.fail(w, r, nil, err)
		return
	}
	if err := h.canRead(r); err != nil {
		h.fail(w, r, nil, forbiddenRead(err))
		return
	}
	if r.URL.Path == "" {
		// Mounted at /prefix with the prefix stripped whole: the page's
		// relative links need /prefix/.
		h.redirectToSlash(w, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// redirectToSlash sends the browser from /prefix to /prefix/ with a
// relative redirect, so it works behind any router or proxy.
func (h *Handler) redirectToSlash(w http.ResponseWriter, r *http.Request) {
	p, _, _ := strings.Cut(r.RequestURI, "?")
	target := path.Base(p) + "/"
	if p == "" || strings.HasSuffix(p, "/") || target == "//" || target == "./" {
		target = "./"
	}
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	w.Header().Set("Location", target)
	w.WriteHeader(http.StatusTemporaryRedirect)
}

// The page's content security policy: its own script and style only, no
// inline code, requests to its own origin only, never in a frame.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func (h *Handler) routes() {
	h.mux.HandleFunc("/{$}", h.page)
	h.mux.HandleFunc("/assets/", h.asset)
	h.mux.HandleFunc("/api", h.get(h.info))
	h.mux.HandleFunc("/api/{$}", h.get(h.info))
	h.mux.HandleFunc("/api/{source}/stats", h.get(h.withSource(h.stats)))
	h.mux.HandleFunc("/api/{source}/events", h.get(h.withSource(h.events)))
	h.mux.HandleFunc("/api/{source}/events/{id}", h.get(h.withSource(h.event)))
	h.mux.HandleFunc("/api/{source}/dead", h.get(h.withSource(h.dead)))
	h.mux.HandleFunc("/api/{source}/dead/{id}", h.only(http.MethodDelete, h.mutation(h.deleteOne)))
	h.mux.HandleFunc("/api/{source}/dead/{id}/replay", h.only(http.MethodPost, h.mutation(h.replayOne)))
	h.mux.HandleFunc("/api/{source}/dead/replay", h.only(http.MethodPost, h.mutation(h.replayMany)))
	h.mux.HandleFunc("/api/{source}/dead/delete", h.only(http.MethodPost, h.mutation(h.deleteMany)))
	h.mux.HandleFunc("/api/{source}/health", h.get(h.withSource(h.health)))
	h.mux.HandleFunc("/api/{source}/pauses", h.get(h.withSource(h.pausesList)))
	h.mux.HandleFunc("/api/{source}/audit", h.get(h.withSource(h.auditList)))
	h.mux.HandleFunc("/api/{source}/actions/pause", h.only(http.MethodPost, h.mutation(h.pause)))
	h.mux.HandleFunc("/api/{source}/actions/resume", h.only(http.MethodPost, h.mutation(h.resume)))
	h.mux.HandleFunc("/api/{source}/actions/force-dead", h.only(http.MethodPost, h.mutation(h.action("force-dead", true, h.forceDead))))
	h.mux.HandleFunc("/api/{source}/actions/delete", h.only(http.MethodPost, h.mutation(h.action("delete", false, h.deleteEvents))))
	h.mux.HandleFunc("/api/{source}/actions/skip-head", h.only(http.MethodPost, h.mutation(h.action("skip-head", true, h.skipHead))))
	h.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, nil, notFound("no endpoint %s (see the package documentation for the API)", r.URL.Path))
	})
}

func (h *Handler) page(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Security-Policy", pageCSP)
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeFileFS(w, r, uiFiles, "ui/index.html")
}

func (h *Handler) asset(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(r.URL.Path, "/assets/")
	if name != "app.js" && name != "app.css" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeFileFS(w, r, uiFiles, "ui/"+name)
}

// apiFunc serves one endpoint of one source.
type apiFunc func(w http.ResponseWriter, r *http.Request, src *source)

// get allows GET and HEAD only.
func (h *Handler) get(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			h.fail(w, r, nil, methodNotAllowed(r.Method, "GET"))
			return
		}
		next(w, r)
	}
}

// only allows one method.
func (h *Handler) only(method string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method {
			w.Header().Set("Allow", method)
			h.fail(w, r, nil, methodNotAllowed(r.Method, method))
			return
		}
		next(w, r)
	}
}

// withSource finds the source named in the path.
func (h *Handler) withSource(next apiFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("source")
		src := h.sources[name]
		if src == nil {
			h.fail(w, r, nil, notFound("no source named %q (sources: %s)", name, strings.Join(h.names, ", ")))
			return
		}
		next(w, r, src)
	}
}

// mutation guards a change: the handler must have an authorizer; the
// request must say it is JSON and come from the page's own origin (CSRF
// defences: an HTML form can send neither, and a cross-origin script
// cannot send the content type without a CORS preflight this handler
// never grants); then Authorize must allow it.
func (h *Handler) mutation(next apiFunc) http.HandlerFunc {
	return h.withSource(func(w http.ResponseWriter, r *http.Request, src *source) {
		if h.authorize == nil {
			h.fail(w, r, src, errReadOnly)
			return
		}
		if !isJSON(r.Header.Get("Content-Type")) {
			h.fail(w, r, src, errNotJSON)
			return
		}
		if err := h.origin.Check(r); err != nil {
			h.fail(w, r, src, errCrossOrigin)
			return
		}
		if err := h.authorize(r); err != nil {
			h.fail(w, r, src, forbidden(err))
			return
		}
		next(w, r.WithContext(outbox.WithActor(r.Context(), h.principal(r))), src)
	})
}
