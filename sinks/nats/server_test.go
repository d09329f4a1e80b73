package outboxnats_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-outbox/outbox/core/outboxtest"
	"github.com/go-outbox/outbox/core/relay/relaytest"
)

// server is a nats-server with JetStream of the test's own, on a free
// loopback port with its store in a temp dir, so that a test can kill and
// restart it (never the shared server on 4222).
type server struct {
	bin, dir string
	port     int
	out      outboxtest.LogBuffer // the server's output, for failure messages

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// startServer starts a server, or skips the test (fails it under
// OUTBOX_TEST_REQUIRE_BROKERS=1) when nats-server is not installed. It is
// killed when the test ends.
func startServer(t testing.TB) *server {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		bin, err = exec.LookPath("/usr/sbin/nats-server")
	}
	if err != nil {
		relaytest.Unavailable(t, "the nats-server binary", err)
	}
	s := &server{bin: bin, dir: t.TempDir(), port: freePort(t)}
	t.Cleanup(s.kill)
	s.start(t)
	return s
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (s *server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// start runs the server on its port and store and waits until it accepts
// connections.
func (s *server) start(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := exec.Command(s.bin, "-js", "-sd", s.dir, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port))
	cmd.Stdout, cmd.Stderr = &s.out, &s.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	addr := fmt.Sprintf("127.0.0.1:%d", s.port)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("nats-server exited:\n%s", s.out.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		cancel()
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server does not accept connections on %s: %v\n%s", addr, err, s.out.String())
		}
	}
}

// kill ends the server at once (SIGKILL), as a crash would, and waits
// for it to exit.
func (s *server) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}
