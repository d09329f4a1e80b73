package main

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// proxyDialTimeout bounds the proxy's connection to its upstream.
const proxyDialTimeout = 5 * time.Second

// proxy is a TCP proxy on a free loopback port in front of a server the
// run does not own (its upstream), such as the shared RabbitMQ: the workers
// connect through it, and cut takes the server away from them, every
// connection at once, without touching the server itself.
type proxy struct {
	upstream string
	ln       net.Listener
	ctx      context.Context // ends at close: aborts the dials to upstream
	stop     context.CancelFunc
	wg       sync.WaitGroup // the accept loop and the goroutines of every connection

	mu     sync.Mutex        // guards what follows
	conns  map[net.Conn]bool // both ends of every proxied connection, true for the accepted one
	down   int               // cuts in progress: while > 0 a new connection is closed once accepted
	closed bool              // close was called
}

// startProxy starts a proxy to upstream (host:port) on a free port of
// 127.0.0.1.
func startProxy(upstream string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	p := &proxy{upstream: upstream, ln: ln, ctx: ctx, stop: stop, conns: make(map[net.Conn]bool)}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// addr returns the proxy's host:port, which the clients connect to in
// place of the upstream's.
func (p *proxy) addr() string { return p.ln.Addr().String() }

// cut closes every proxied connection, on both sides, at once, and
// returns how many clients it cut off. For outage after that, new
// connections are closed as soon as they are accepted, so that the
// clients find the server away and not merely their connection lost; cut
// returns once the proxy lets connections through again (at once, with
// ctx's error, when ctx ends first).
func (p *proxy) cut(ctx context.Context, outage time.Duration) (int, error) {
	p.mu.Lock()
	p.down++
	n := 0
	for c, accepted := range p.conns {
		_ = c.Close()
		delete(p.conns, c) // cut off already, whenever its goroutine notices
		if accepted {
			n++
		}
	}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.down--
		p.mu.Unlock()
	}()
	if outage > 0 && !sleep(ctx, outage) {
		return n, ctx.Err()
	}
	return n, nil
}

// close stops the proxy: it stops listening, closes every proxied
// connection and returns once every goroutine of the proxy has ended. It
// is idempotent.
func (p *proxy) close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.stop()
	err := p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// accept hands every accepted connection to its own goroutine until the
// listener is closed.
func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil { // out of file descriptors, or the like: try again shortly
			if !sleep(p.ctx, 10*time.Millisecond) {
				return
			}
			continue
		}
		if !p.track(c, true) {
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// track records c among the proxied connections, unless the proxy is cut
// or closed: then it returns false and c must be closed.
func (p *proxy) track(c net.Conn, accepted bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down > 0 || p.closed {
		return false
	}
	p.conns[c] = accepted
	return true
}

// untrack closes c and forgets it.
func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

// serve connects client to the upstream and copies both ways until
// either side closes (or cut or close closes them).
func (p *proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	d := net.Dialer{Timeout: proxyDialTimeout}
	server, err := d.DialContext(p.ctx, "tcp", p.upstream)
	if err != nil {
		return // the client finds its connection closed
	}
	if !p.track(server, false) { // cut or closed while dialing
		_ = server.Close()
		return
	}
	defer p.untrack(server)
	done := make(chan struct{})
	go func() {
		defer close(done)
		splice(server, client)
	}()
	splice(client, server)
	<-done
}

// splice copies from src to dst until either fails, then closes both, so
// that the copy the other way ends too.
func splice(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

// sleep waits for d and reports true, or reports false as soon as ctx
// ends.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
