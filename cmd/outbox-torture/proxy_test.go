package main

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// liveness bounds the tests' waits for something that must happen: far
// longer than it takes, so that only a hang fails them.
const liveness = time.Minute

// noLeaks fails t if a goroutine started during the test outlives it and
// its cleanups.
func noLeaks(t *testing.T) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
}

// echoServer is an upstream for the proxy that writes back what it reads,
// and counts the connections it accepted.
type echoServer struct {
	ln       net.Listener
	accepted atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.accepted.Add(1)
			e.mu.Lock()
			e.conns = append(e.conns, c)
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				_, _ = io.Copy(c, c)
				_ = c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		e.mu.Lock()
		for _, c := range e.conns {
			_ = c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

// dialProxy connects to p.
func dialProxy(t *testing.T, p *proxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.addr(), liveness)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.SetDeadline(time.Now().Add(liveness)); err != nil {
		t.Fatal(err)
	}
	return c
}

// roundTrip fails the test unless what c sends comes back.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write through the proxy: %v", err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("read through the proxy: %v", err)
	}
	if string(buf) != msg {
		t.Fatalf("read %q through the proxy, want %q", buf, msg)
	}
}

// closedByProxy fails the test unless c ends (EOF or reset) with nothing
// to read: the upstream sends nothing unasked.
func closedByProxy(t *testing.T, c net.Conn, what string) {
	t.Helper()
	n, err := c.Read(make([]byte, 1))
	var ne net.Error
	if n > 0 || err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("%s: read %d bytes, %v; want the connection closed by the proxy", what, n, err)
	}
}

// cut closes every connection through the proxy, both ways; during the
// outage the proxy closes new connections without reaching the upstream,
// and once it is over it lets them through again. close ends every
// connection and goroutine of the proxy.
func TestProxyCut(t *testing.T) {
	noLeaks(t)
	echo := startEcho(t)
	p, err := startProxy(echo.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()

	c1, c2 := dialProxy(t, p), dialProxy(t, p)
	roundTrip(t, c1, "one")
	roundTrip(t, c2, "two")

	type result struct {
		n   int
		err error
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cut := make(chan result, 1)
	go func() {
		n, err := p.cut(ctx, time.Hour) // until cancel
		cut <- result{n, err}
	}()
	closedByProxy(t, c1, "a connection open at the cut")
	closedByProxy(t, c2, "a connection open at the cut")
	closedByProxy(t, dialProxy(t, p), "a connection during the outage")
	if n := echo.accepted.Load(); n != 2 {
		t.Errorf("the upstream accepted %d connections, want 2: none during the outage", n)
	}
	select {
	case r := <-cut:
		t.Fatalf("cut returned (%d, %v) before its outage ended", r.n, r.err)
	default:
	}
	cancel()
	r := <-cut
	if r.n != 2 || !errors.Is(r.err, context.Canceled) {
		t.Errorf("cut returned (%d, %v), want 2 connections cut and context.Canceled", r.n, r.err)
	}

	c3 := dialProxy(t, p)
	roundTrip(t, c3, "three")
	if n, err := p.cut(context.Background(), 0); n != 1 || err != nil {
		t.Errorf("a cut without an outage returned (%d, %v), want (1, nil)", n, err)
	}
	closedByProxy(t, c3, "a connection open at the second cut")
	c4 := dialProxy(t, p)
	roundTrip(t, c4, "four")

	if err := p.close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	closedByProxy(t, c4, "a connection open at close")
	if c, err := net.DialTimeout("tcp", p.addr(), liveness); err == nil {
		_ = c.Close()
		t.Error("the proxy accepts connections after close")
	}
	if err := p.close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}
