package relaytest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy on a loopback port in front of a broker. Cut takes
// the broker away from whoever connects through the proxy without touching
// the broker itself: every proxied connection is closed and new ones are
// closed as soon as they are accepted, until Restore.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu     sync.Mutex
	cut    bool
	closed bool
	conns  map[net.Conn]struct{}
}

// NewProxy starts a proxy on 127.0.0.1 to target (host:port); it is closed
// when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := StartProxy(target)
	if err != nil {
		t.Fatalf("relaytest: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// StartProxy starts a proxy on 127.0.0.1 to target (host:port), outside a
// test (a fault harness): Close stops it.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	p := &Proxy{target: target, ln: ln, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's address (host:port): connect there instead of
// to the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every proxied connection and closes new ones at once until
// Restore. It returns how many clients it cut off.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	clients := 0
	for c := range p.conns {
		if c.LocalAddr().String() == p.ln.Addr().String() { // accepted here, not dialed to the target
			clients++
		}
		_ = c.Close()
	}
	return clients
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Close stops the proxy, closes its connections and waits for its
// goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	err := p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// track registers c unless the proxy is cut or closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut || p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if !p.track(in) {
			_ = in.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(in)
	}
}

func (p *Proxy) serve(in net.Conn) {
	defer p.wg.Done()
	defer p.untrack(in)
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(out) {
		_ = out.Close()
		return
	}
	defer p.untrack(out)
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(out, in)
		_ = out.Close()
		close(done)
	}()
	_, _ = io.Copy(in, out)
	_ = in.Close()
	<-done
}
