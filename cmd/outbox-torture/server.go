package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"
)

// A dbServer is a database server the harness starts for a fault that
// crashes the database itself, in a temp directory on free loopback ports:
// a PostgreSQL primary, with or without a replica (pgCluster), or a
// MariaDB server (mariaServer). The run keeps its journals in the same
// directory, so that remove takes everything away.
type dbServer interface {
	// writeDSN returns the DSN that reaches the server accepting writes,
	// after a crash too.
	writeDSN() string
	// tempDir returns the directory of the server's files.
	tempDir() string
	// crash kills the server mid-load, as a power cut would, and brings
	// up the one that takes its place. It returns how long the database
	// accepted no writes: from the kill until the new server is ready.
	crash(ctx context.Context) (outage time.Duration, err error)
	// remove stops whatever runs, at once, and deletes the directory.
	remove()
}

// startServer starts the server of c's fault of the database.
func startServer(ctx context.Context, c config) (dbServer, error) {
	if c.dbFault() == faultMariaDBRestart {
		s, err := startMariaDB(ctx)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	cl, err := startCluster(ctx, c.dbFault(), c.pgBin, c.replicaLag)
	if err != nil {
		return nil, err
	}
	return cl, nil
}

// A daemon is a server process the harness started (mariadbd,
// nats-server, the kfake broker), which a fault kills as a crash would and
// starts again.
type daemon struct {
	name   string        // the program, for errors
	log    string        // its log file, whose tail errors show
	proc   *exec.Cmd     // nil while it does not run
	exited chan struct{} // closed once proc has ended
}

// startDaemon starts cmd and waits until ready returns nil, for at most
// wait; it fails if the process ends first, or ctx ends.
func (d *daemon) startDaemon(ctx context.Context, cmd *exec.Cmd, wait time.Duration, ready func(ctx context.Context) error) error {
	dieWithHarness(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", d.name, err)
	}
	d.proc, d.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { _ = cmd.Wait(); close(exited) }(d.exited)
	return d.await(ctx, wait, ready)
}

// await waits until ready returns nil, for at most wait; it fails if the
// process ends first, or ctx ends.
func (d *daemon) await(ctx context.Context, wait time.Duration, ready func(ctx context.Context) error) error {
	var last error
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-d.exited:
			var state *os.ProcessState
			if d.proc != nil {
				state = d.proc.ProcessState
			}
			d.proc = nil
			return fmt.Errorf("%s ended (%v)%s", d.name, state, logTail(d.log))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if last = ready(ctx); last == nil {
			return nil
		}
	}
	return fmt.Errorf("%s not ready within %s: %w%s", d.name, wait, last, logTail(d.log))
}

// kill ends the process with SIGKILL, as a crash would, and waits until
// it has ended.
func (d *daemon) kill() {
	if d.proc == nil {
		return
	}
	_ = d.proc.Process.Kill()
	<-d.exited
	d.proc = nil
}

// logTail returns the last lines of the log file at path, each on a line
// of its own after a newline, for an error message; "" if it has none.
func logTail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return "\n" + strings.Join(lines[max(len(lines)-20, 0):], "\n")
}

// freePort returns a loopback port nothing listens on right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
