package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	outboxfx "github.com/go-outbox/outbox/fxmodule"
	"github.com/go-outbox/outbox/outboxhttp"
	"github.com/rs/zerolog"
)

const (
	// adminSource names the default data source in the admin API's paths
	// (/admin/api/default/…) and on the page.
	adminSource = "default"
	// adminRealm names the admin page in the browser's sign-in dialog.
	adminRealm = "http-demo admin"
)

// Admin is the outbox's admin page and JSON API (outboxhttp) for the
// default data source, served under /admin/.
type Admin struct {
	handler *outboxhttp.Handler
	// authorize checks the admin token; nil: read-only.
	authorize func(r *http.Request) error
}

// newAdmin returns the admin handler of the default data source: it is
// read on loopback connections only (the handler's default; a real
// service puts its authentication in front and sets AuthorizeRead), and
// replays and deletes need the admin token.
// Without a token it is read-only.
func newAdmin(s settings, c *outbox.Client, store *outboxsql.Store, log zerolog.Logger) (*Admin, error) {
	cfg := outboxhttp.Config{
		Sources: []outboxhttp.Source{{Name: adminSource, Client: c, Events: store}},
		Title:   "http-demo — outbox",
		Logger:  outboxfx.NewSlogLogger(log),
	}
	if s.adminToken != "" {
		cfg.Authorize = tokenAuthorizer(s.adminToken)
	}
	h, err := outboxhttp.New(cfg)
	if err != nil {
		return nil, err
	}
	return &Admin{handler: h, authorize: cfg.Authorize}, nil
}

// Errors of the token authorizer; the page shows them to the operator.
var (
	errNoToken    = errors.New(`send the admin token: sign in at /admin/login, or add the header "Authorization: Bearer" and the token`)
	errWrongToken = errors.New("wrong admin token")
)

// tokenAuthorizer allows a request that carries token, as a bearer token
// (Authorization: Bearer <token>, for curl) or as the password of HTTP
// basic authentication (any user name), which a browser sends once
// /admin/login asked for it.
func tokenAuthorizer(token string) func(r *http.Request) error {
	want := sha256.Sum256([]byte(token))
	return func(r *http.Request) error {
		got, ok := requestToken(r)
		if !ok {
			return errNoToken
		}
		// Hashes of equal length: the comparison takes as long for any
		// token sent.
		if sum := sha256.Sum256([]byte(got)); subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			return errWrongToken
		}
		return nil
	}
}

// requestToken returns the token of r's Authorization header.
func requestToken(r *http.Request) (string, bool) {
	if _, password, ok := r.BasicAuth(); ok {
		return password, true
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}

// login asks the browser for the admin token (HTTP basic authentication:
// any user name, the token as password) and, once it sends the right one,
// goes on to the admin page. The browser then sends it with the page's
// requests under /admin/, so the page offers replay and delete.
func (a *Admin) login(w http.ResponseWriter, r *http.Request) {
	if a.authorize == nil {
		writeError(w, http.StatusNotFound, "the admin page is read-only: start http-demo with -admin-token (or HTTP_DEMO_ADMIN_TOKEN) to replay and delete")
		return
	}
	if err := a.authorize(r); err != nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="`+adminRealm+`", charset="UTF-8"`)
		writeError(w, http.StatusUnauthorized, "sign in with the admin token as password (any user name)")
		return
	}
	w.Header().Set("Location", "./")
	w.WriteHeader(http.StatusSeeOther)
}
