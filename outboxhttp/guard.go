package outboxhttp

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// AnyHost in Config.AllowedHosts turns the Host check off: a proxy in
// front of the handler checks the Host header itself.
const AnyHost = "*"

// LoopbackOnly is the read authorizer of a Config without AuthorizeRead:
// it allows a request that came straight over a loopback connection —
// the server's end of the connection and the client's are both loopback
// addresses, and no proxy header (Forwarded, X-Forwarded-For,
// X-Real-Ip) says that it was relayed for someone else. A request that
// did not come through an http.Server (no local address in its context)
// is refused.
//
// A reverse proxy on the same host connects over loopback on behalf of
// anyone and usually adds X-Forwarded-For; one that adds no such header
// must be paired with an AuthorizeRead of your own.
func LoopbackOnly(r *http.Request) error {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil {
		return errors.New("reads are allowed on loopback connections only, and this request came through no http.Server; set Config.AuthorizeRead")
	}
	if ip, ok := addrIP(local.String()); !ok || !ip.IsLoopback() {
		return fmt.Errorf("reads are allowed on loopback connections only, and this request came to %s; set Config.AuthorizeRead to let it read", local)
	}
	if ip, ok := addrIP(r.RemoteAddr); !ok || !ip.IsLoopback() {
		return fmt.Errorf("reads are allowed on loopback connections only, and this request came from %.64q; set Config.AuthorizeRead to let it read", r.RemoteAddr)
	}
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Real-Ip"} {
		if _, ok := r.Header[h]; ok {
			return fmt.Errorf("reads are allowed on direct loopback connections only, and this request came through a proxy (%s header); set Config.AuthorizeRead to let it read", h)
		}
	}
	return nil
}

// AllowAnyone is a read authorizer that allows every request: for a
// handler mounted behind your own authentication middleware.
func AllowAnyone(*http.Request) error { return nil }

// addrIP returns the IP address of a "host:port" or bare address.
func addrIP(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	ip, err := netip.ParseAddr(s)
	return ip.Unmap(), err == nil
}

// hostAllowList is the validated Config.AllowedHosts.
type hostAllowList struct {
	any   bool
	names map[string]bool     // lower case, no trailing dot
	ips   map[netip.Addr]bool // unmapped
}

// newHostAllowList validates and normalises Config.AllowedHosts.
func newHostAllowList(hosts []string) (hostAllowList, error) {
	l := hostAllowList{names: map[string]bool{}, ips: map[netip.Addr]bool{}}
	for i, h := range hosts {
		if h == AnyHost {
			l.any = true
			continue
		}
		name, ip, ok := parseHostName(h)
		switch {
		case !ok:
			return l, configErr("AllowedHosts[%d] %q: want a host name or an IP address, without a scheme, port or path (or %q for any host)", i, h, AnyHost)
		case ip.IsValid():
			l.ips[ip] = true
		default:
			l.names[name] = true
		}
	}
	return l, nil
}

// errNoHost and hostError are the answers to a request whose Host header
// names no host this handler answers to (DNS rebinding: a page of another
// site whose name now resolves to this server).
var errNoHost = &apiError{http.StatusMisdirectedRequest, codeMisdirected,
	"the request has no Host header; the admin handler answers only to the hosts it is configured for (Config.AllowedHosts)"}

func hostError(host string) *apiError {
	return &apiError{http.StatusMisdirectedRequest, codeMisdirected, fmt.Sprintf(
		"Host %.100q is not one this admin handler answers to (loopback names and addresses, this server's own address and Config.AllowedHosts); "+
			"if it is yours, add it to Config.AllowedHosts", host)}
}

// check returns nil if r's Host header names an allowed host: a loopback
// address, "localhost" or a name under ".localhost", the address of the
// server's end of r's connection, or an entry of the list.
func (l hostAllowList) check(r *http.Request) error {
	if l.any {
		return nil
	}
	if r.Host == "" {
		return errNoHost
	}
	host := r.Host
	if h, port, err := net.SplitHostPort(host); err == nil {
		if !validPort(port) {
			return hostError(r.Host)
		}
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	} else if strings.Contains(host, ":") { // an IPv6 address needs its brackets
		return hostError(r.Host)
	}
	name, ip, ok := parseHostName(host)
	switch {
	case !ok:
		return hostError(r.Host)
	case ip.IsValid():
		if ip.IsLoopback() || l.ips[ip] || isLocalAddr(r, ip) {
			return nil
		}
	case name == "localhost" || strings.HasSuffix(name, ".localhost") || l.names[name]:
		return nil
	}
	return hostError(r.Host)
}

// isLocalAddr reports whether ip is the address of the server's end of
// r's connection: a browser that asks for it by address was not sent
// there by a name that a DNS server of someone else's resolves.
func isLocalAddr(r *http.Request, ip netip.Addr) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil {
		return false
	}
	lip, ok := addrIP(local.String())
	return ok && lip == ip && !lip.IsUnspecified()
}

// validPort reports whether p is a port number.
func validPort(p string) bool {
	if p == "" || len(p) > 5 {
		return false
	}
	for _, c := range p {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseHostName normalises a host without a port: an IP address
// (unmapped, IPv6 without brackets or zone) or a DNS name in lower case
// without a trailing dot. ok is false for anything else.
func parseHostName(h string) (name string, ip netip.Addr, ok bool) {
	if ip, err := netip.ParseAddr(h); err == nil {
		if ip.Zone() != "" {
			return "", netip.Addr{}, false
		}
		return "", ip.Unmap(), true
	}
	name = strings.ToLower(strings.TrimSuffix(h, "."))
	if name == "" || len(name) > 253 {
		return "", netip.Addr{}, false
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", netip.Addr{}, false
		}
		for _, c := range label {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
				return "", netip.Addr{}, false
			}
		}
	}
	return name, netip.Addr{}, true
}
