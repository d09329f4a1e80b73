package outboxhttp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
)

// readPaths are requests for every kind of read: the page, its assets,
// the API's root, an event list, one event and the stats.
func readPaths(s seeded) []string {
	return []string{"/", "/assets/app.js", "/assets/app.css", "/api", "/api/orders/stats",
		"/api/orders/events", "/api/orders/events/" + s.placed, "/api/orders/dead"}
}

// raw sends one request with exactly the Host line given (none when host
// is "", as HTTP/1.0 allows) over a new connection to srv.
func raw(t *testing.T, srv *httptest.Server, method, path, host string, hdr ...string) response {
	t.Helper()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var b strings.Builder
	proto := "HTTP/1.1"
	if host == "" {
		proto = "HTTP/1.0"
	}
	fmt.Fprintf(&b, "%s %s %s\r\n", method, path, proto)
	if host != "" {
		fmt.Fprintf(&b, "Host: %s\r\n", host)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", hdr[i], hdr[i+1])
	}
	b.WriteString("Content-Length: 0\r\nConnection: close\r\n\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: body}
}

// TestHostCheck sends requests whose Host header names another site, as a
// page does after DNS rebinding made its name resolve to this loopback
// server: every read and every change is refused with 421 and a message,
// and nothing changes. Loopback names and addresses pass in their every
// spelling.
func TestHostCheck(t *testing.T) {
	e := newEnv(t, sqlite(t), nil)
	s := e.seed()
	before := e.snapshot()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(e.srv.URL, "http://"))
	hostile := []string{
		"evil.example",
		"evil.example:" + port,
		"127.0.0.1.evil.example",
		"127.0.0.1.evil.example:" + port,
		"localhost.evil.example",
		"EVIL.EXAMPLE",
		"evil.example.",
		"evil.example.:" + port,
		"", // HTTP/1.0 without a Host
		"localhost:http",
		"localhost:" + port + ":" + port,
		"[::1]:" + port + "x",
		"[::1]x",
		"0.0.0.0:" + port,
		"[::]:" + port,
		"192.0.2.10",
		"-localhost",
		"[fe80::1%25lo]:" + port,
		"::1",
	}
	for _, host := range hostile {
		for _, p := range readPaths(s) {
			r := raw(t, e.srv, "GET", p, host)
			if r.status != http.StatusMisdirectedRequest {
				t.Fatalf("Host %q, GET %s: status %d, want 421", host, p, r.status)
			}
			r.wantError(t, http.StatusMisdirectedRequest, codeMisdirected, "Config.AllowedHosts")
		}
		raw(t, e.srv, "POST", "/api/orders/dead/"+s.placed+"/replay", host, "Content-Type", "application/json").
			wantError(t, http.StatusMisdirectedRequest, codeMisdirected)
		raw(t, e.srv, "DELETE", "/api/orders/dead/"+s.placed2, host, "Content-Type", "application/json").
			wantError(t, http.StatusMisdirectedRequest, codeMisdirected)
	}
	e.wantUnchanged(before)
	for _, host := range []string{"127.0.0.1:" + port, "127.0.0.1", "localhost:" + port, "LOCALHOST:" + port, "localhost.:" + port,
		"[::1]:" + port, "[::1]", "127.0.0.2", "admin.localhost:" + port, "[::ffff:127.0.0.1]:" + port} {
		for _, p := range readPaths(s) {
			if r := raw(t, e.srv, "GET", p, host); r.status != http.StatusOK {
				t.Errorf("Host %q, GET %s: status %d, want 200; body %s", host, p, r.status, r.body)
			}
		}
	}
	// A mutation from an allowed Host still works.
	raw(t, e.srv, "POST", "/api/orders/dead/"+s.placed+"/replay", "localhost:"+port, "Content-Type", "application/json").
		want(t, http.StatusOK, nil)
}

// TestAllowedHosts: the configured names pass in any case, with a port and
// a trailing dot; their look-alikes do not; "*" lets every Host through.
func TestAllowedHosts(t *testing.T) {
	e := newEnv(t, sqlite(t), func(c *Config) { c.AllowedHosts = []string{"Admin.Example.com", "192.0.2.10", "2001:db8::7"} })
	s := e.seed()
	for _, host := range []string{"admin.example.com", "ADMIN.EXAMPLE.COM:443", "admin.example.com.", "192.0.2.10:8080", "[2001:db8::7]:8443", "localhost"} {
		raw(t, e.srv, "GET", "/api/orders/stats", host).want(t, http.StatusOK, nil)
	}
	for _, host := range []string{"admin.example.com.evil.example", "evil-admin.example.com", "example.com", "192.0.2.11", "[2001:db8::8]"} {
		raw(t, e.srv, "GET", "/api/orders/stats", host).wantError(t, http.StatusMisdirectedRequest, codeMisdirected)
	}
	anyHost := newEnv(t, sqlite(t), func(c *Config) { c.AllowedHosts = []string{AnyHost} })
	anyHost.seed()
	raw(t, anyHost.srv, "GET", "/api/orders/stats", "evil.example").want(t, http.StatusOK, nil)
	_ = s
}

// TestHostOfTheServer: a request by the address of the server's own end of
// the connection passes the Host check (no name was resolved), and is then
// refused by the default read authorizer when that address is not loopback.
func TestHostOfTheServer(t *testing.T) {
	for _, tc := range []struct {
		read   func(*http.Request) error
		status int
	}{{nil, http.StatusForbidden}, {AllowAnyone, http.StatusOK}} {
		e := newEnv(t, sqlite(t), func(c *Config) { c.AuthorizeRead = tc.read })
		r := remoteRequest("GET", "/api", "192.0.2.10:8080", "198.51.100.7:40000")
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
		if w.Code != tc.status {
			t.Errorf("AuthorizeRead %v: status %d, want %d; body %s", tc.read != nil, w.Code, tc.status, w.Body)
		}
		r = remoteRequest("GET", "/api", "192.0.2.10:8080", "198.51.100.7:40000")
		r.Host = "192.0.2.11:8080"
		w = httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
		if w.Code != http.StatusMisdirectedRequest {
			t.Errorf("another address than the server's: status %d; body %s", w.Code, w.Body)
		}
	}
}

// remoteRequest is a request as an http.Server hands it over when the
// client at remote reached the server's address local.
func remoteRequest(method, path, local, remote string) *http.Request {
	r := httptest.NewRequest(method, path, nil)
	addr, _ := net.ResolveTCPAddr("tcp", local)
	r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addr))
	r.RemoteAddr = remote
	r.Host = local
	return r
}

// TestReadsOnLoopbackOnlyByDefault: without AuthorizeRead, a request that a
// proxy relayed, one from another machine, or one that did not come
// through a server reads nothing, on every read path, and cannot change
// anything either.
func TestReadsOnLoopbackOnlyByDefault(t *testing.T) {
	e := newEnv(t, sqlite(t), nil)
	s := e.seed()
	before := e.snapshot()
	for _, hdr := range [][2]string{
		{"X-Forwarded-For", "203.0.113.9"},
		{"Forwarded", "for=203.0.113.9;proto=https"},
		{"X-Real-Ip", "203.0.113.9"},
		{"X-Forwarded-For", "127.0.0.1"}, // a proxy's header, whatever it says
	} {
		for _, p := range readPaths(s) {
			e.req("GET", p, "", hdr[0], hdr[1]).wantError(t, http.StatusForbidden, codeReadForbidden, "not authorized to read", hdr[0], "Config.AuthorizeRead")
		}
		e.req("POST", "/api/orders/dead/replay", idsBody(s.placed), hdr[0], hdr[1]).wantError(t, http.StatusForbidden, codeReadForbidden)
	}
	for name, r := range map[string]*http.Request{
		"from another machine":                remoteRequest("GET", "/api/orders/events", "127.0.0.1:8080", "198.51.100.7:40000"),
		"to a non-loopback address":           remoteRequest("GET", "/api/orders/events", "192.0.2.10:8080", "192.0.2.10:40000"),
		"without a server":                    httptest.NewRequest("GET", "/api/orders/events", nil),
		"a remote address that is no address": remoteRequest("GET", "/api/orders/events", "127.0.0.1:8080", "pipe"),
	} {
		r.Host = "localhost"
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), codeReadForbidden) {
			t.Errorf("%s: status %d, want 403 %s; body %s", name, w.Code, codeReadForbidden, w.Body)
		}
	}
	e.wantUnchanged(before)
	// A direct loopback request reads.
	for _, p := range readPaths(s) {
		e.req("GET", p, "").want(t, http.StatusOK, nil)
	}
}

// TestAuthorizeRead: an authorizer of reads guards the page, its assets and
// every endpoint; it comes before the one of changes, so a user who may
// change but not read changes nothing.
func TestAuthorizeRead(t *testing.T) {
	errNoReader := errors.New("readers only")
	e := newEnv(t, sqlite(t), func(c *Config) {
		c.AuthorizeRead = func(r *http.Request) error {
			if r.Header.Get("X-Reader") != "yes" {
				return errNoReader
			}
			return nil
		}
	})
	s := e.seed()
	before := e.snapshot()
	for _, p := range readPaths(s) {
		e.req("GET", p, "").wantError(t, http.StatusForbidden, codeReadForbidden, "not authorized to read: readers only")
		e.req("HEAD", p, "").want(t, http.StatusForbidden, nil)
		e.req("GET", p, "", "X-Reader", "yes").want(t, http.StatusOK, nil)
	}
	e.req("GET", "", "").want(t, http.StatusForbidden, nil) // the redirect to the page
	e.req("POST", "/api/orders/dead/replay", idsBody(s.placed)).wantError(t, http.StatusForbidden, codeReadForbidden)
	e.req("DELETE", "/api/orders/dead/"+s.placed, "").wantError(t, http.StatusForbidden, codeReadForbidden)
	e.wantUnchanged(before)
	e.req("POST", "/api/orders/dead/replay", idsBody(s.placed), "X-Reader", "yes").want(t, http.StatusOK, nil)
	if got := e.statuses(s.placed); got[0] != "NEW" {
		t.Errorf("replayed by a reader who may change: %q", got)
	}
}

func TestAllowedHostsValidated(t *testing.T) {
	e := newEnv(t, sqlite(t), nil)
	src := []Source{{Name: "orders", Client: e.client, Events: e.store}}
	for _, h := range []string{"", "http://admin.example.com", "admin.example.com:443", "admin.example.com/x", "a b", "-admin.example.com",
		"admin..example.com", "[::1]", "fe80::1%eth0", "*.example.com", strings.Repeat("a", 64) + ".example.com"} {
		_, err := New(Config{Sources: src, AllowedHosts: []string{"ok.example.com", h}})
		if !errors.Is(err, outbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "AllowedHosts[1]") {
			t.Errorf("AllowedHosts %q: %v, want ErrInvalidConfig naming it", h, err)
		}
	}
}
