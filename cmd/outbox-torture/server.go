package main

import (
	"context"
	"net"
	"os"
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
