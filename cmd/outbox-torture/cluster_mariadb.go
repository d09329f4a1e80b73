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
	daemon
	dir, data string
	bin       string
	port      int
	dsn       string
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
	s = &mariaServer{daemon: daemon{name: "mariadbd", log: filepath.Join(dir, "mariadbd.log")}, dir: dir, data: filepath.Join(dir, "data"), bin: bin}
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
		return s, fmt.Errorf("mariadbd --bootstrap: %w\n%s%s", err, out, logTail(s.log))
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
	db, err := sql.Open("mysql", s.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return s.startDaemon(ctx, cmd, time.Minute, db.PingContext)
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
