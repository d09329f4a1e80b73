package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A mariaServer is a MariaDB server the harness starts for
// -mariadb-restart: a datadir in a temp directory, a free loopback port,
// InnoDB with its durable defaults (innodb_flush_log_at_trx_commit=1: a
// commit returns once its redo log is on disk) and no privilege checks
// (--skip-grant-tables: root without a password, loopback only). crash
// SIGKILLs mariadbd and starts it again on the same datadir and port, through
// InnoDB's crash recovery.
type mariaServer struct {
	dir, data, log string
	bin            string
	port           int
	dsn            string
	proc           *exec.Cmd     // nil while it does not run
	exited         chan struct{} // closed once proc has ended
}

// faultMariaDBRestart names -mariadb-restart on the line.
const faultMariaDBRestart = "mariadb-restart"

// errNoMariaDB is returned when the MariaDB server binary is not found.
var errNoMariaDB = errors.New("MariaDB server binary (mariadbd, mysqld) not found in /usr/sbin or on PATH")

// mariadbdPath returns the path of mariadbd (or mysqld).
func mariadbdPath() (string, error) {
	for _, name := range []string{"mariadbd", "mysqld"} {
		if p := filepath.Join("/usr/sbin", name); isExec(p) {
			return p, nil
		}
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errNoMariaDB
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// startMariaDB creates the datadir with its database test and starts the
// server. On error everything it started is removed.
func startMariaDB(ctx context.Context) (s *mariaServer, err error) {
	bin, err := mariadbdPath()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "outbox-torture-mariadb-")
	if err != nil {
		return nil, err
	}
	s = &mariaServer{dir: dir, data: filepath.Join(dir, "data"), log: filepath.Join(dir, "mariadbd.log"), bin: bin}
	defer func() {
		if err != nil {
			s.remove()
			s = nil
		}
	}()
	if err := os.Mkdir(s.data, 0o755); err != nil {
		return s, err
	}
	// The bootstrap creates the system tablespace and the database, and
	// shuts down cleanly: a server SIGKILLed in the first moments after
	// it created its tablespace may not start again (MariaDB 10.11:
	// "Header page consists of zero bytes in datafile: ./ibdata1"), which
	// is not the crash this run is about.
	boot := exec.CommandContext(ctx, bin, s.args("--bootstrap")...)
	boot.Stdin = strings.NewReader("CREATE DATABASE test;\n")
	if out, err := boot.CombinedOutput(); err != nil {
		return s, fmt.Errorf("mariadbd --bootstrap: %w\n%s%s", err, out, s.logTail())
	}
	if s.port, err = freePort(); err != nil {
		return s, err
	}
	s.dsn = fmt.Sprintf("root@tcp(127.0.0.1:%d)/test?parseTime=true&timeout=3s", s.port)
	return s, s.start(ctx)
}

// args returns mariadbd's arguments: the settings of every start, then
// extra.
func (s *mariaServer) args(extra ...string) []string {
	a := []string{"--no-defaults", "--datadir=" + s.data, "--log-error=" + s.log, "--innodb-flush-log-at-trx-commit=1",
		// utf8mb4, as Debian's packages configure it: with the compiled-in
		// latin1 the harness's tables would compare their ids with the
		// outbox's utf8mb4 ones without an index.
		"--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci"}
	if os.Geteuid() == 0 {
		a = append(a, "--user=root") // mariadbd refuses root otherwise
	}
	return append(a, extra...)
}

func (s *mariaServer) writeDSN() string { return s.dsn }
func (s *mariaServer) tempDir() string  { return s.dir }

// start starts mariadbd and waits until it accepts connections, at most a
// minute.
func (s *mariaServer) start(ctx context.Context) error {
	cmd := exec.Command(s.bin, s.args("--port="+strconv.Itoa(s.port), "--bind-address=127.0.0.1",
		"--socket="+filepath.Join(s.dir, "mysqld.sock"), "--pid-file="+filepath.Join(s.dir, "mysqld.pid"),
		"--skip-grant-tables", "--skip-name-resolve", "--max-connections=200")...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start mariadbd: %w", err)
	}
	s.proc, s.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { _ = cmd.Wait(); close(exited) }(s.exited)
	db, err := sql.Open("mysql", s.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-s.exited:
			s.proc = nil
			return fmt.Errorf("mariadbd ended (%v)%s", cmd.ProcessState, s.logTail())
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if db.PingContext(ctx) == nil {
			return nil
		}
	}
	return fmt.Errorf("mariadbd did not accept connections within a minute%s", s.logTail())
}

// kill ends mariadbd with SIGKILL, as a crash would, and waits until it
// has ended.
func (s *mariaServer) kill() {
	if s.proc == nil {
		return
	}
	_ = s.proc.Process.Kill()
	<-s.exited
	s.proc = nil
}

// crash kills mariadbd and starts it again on the same datadir and port:
// InnoDB recovers from its redo log what the commits acknowledged.
func (s *mariaServer) crash(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	s.kill()
	err := s.start(ctx)
	return time.Since(start), err
}

func (s *mariaServer) remove() {
	s.kill()
	if err := os.RemoveAll(s.dir); err != nil {
		fmt.Fprintln(os.Stderr, "torture: remove the server's directory:", err)
	}
}

// logTail returns the last lines of the server's error log (see logTail).
func (s *mariaServer) logTail() string { return logTail(s.log) }
