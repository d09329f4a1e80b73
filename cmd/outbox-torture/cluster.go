package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A pgCluster is a PostgreSQL server the harness starts for a fault that
// crashes the database itself (-failover, -unsafe-commit): a primary on a
// free loopback port in a temp directory and, for -failover, a streaming
// replica of it on another. crash kills the primary as a power cut would
// (pg_ctl stop -m immediate: no checkpoint, no last WAL flush or send) and
// then promotes the replica, or restarts the primary into crash recovery.
// remove stops whatever runs and deletes the directory.
type pgCluster struct {
	dir   string
	bin   string
	asPG  bool // euid 0: initdb and pg_ctl run as the postgres user
	fault string
	lag   time.Duration // -replica-lag
	nodes []*pgNode     // the primary first
	// dsn reaches the node that accepts writes: both hosts with
	// target_session_attrs=read-write for -failover.
	dsn string
}

type pgNode struct {
	name, data, log string
	port            int
	opts            string // -o of pg_ctl start: settings of this node only
	running         bool
}

// Fault names of the line's fault= field.
const (
	faultFailoverSync  = "failover-sync"
	faultFailoverAsync = "failover-async"
	faultUnsafeCommit  = "unsafe-commit"
)

// errNoPostgres is returned when the PostgreSQL server binaries are not found.
var errNoPostgres = errors.New("PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup) not found: set -pg-bin")

// pgBinDir returns dir if set, else the newest /usr/lib/postgresql/*/bin,
// else the directory of initdb on PATH.
func pgBinDir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return va - vb
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errNoPostgres
}

// startCluster initdbs and starts the server of fault: with a streaming
// replica for the failover faults (commits waiting for it with
// failover-sync; lag: see crash), alone with synchronous_commit=off for
// unsafe-commit. On error everything it started is removed.
func startCluster(ctx context.Context, fault, binDir string, lag time.Duration) (cl *pgCluster, err error) {
	bin, err := pgBinDir(binDir)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "outbox-torture-pg-")
	if err != nil {
		return nil, err
	}
	cl = &pgCluster{dir: dir, bin: bin, asPG: os.Geteuid() == 0, fault: fault, lag: lag}
	defer func() {
		if err != nil {
			cl.remove()
			cl = nil
		}
	}()
	if cl.asPG {
		u, err := user.Lookup("postgres")
		if err != nil {
			return cl, fmt.Errorf("initdb refuses root and there is no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return cl, err
		}
	}
	primary, err := cl.node("primary")
	if err != nil {
		return cl, err
	}
	if err := cl.run(ctx, "initdb", "-D", primary.data, "-U", "postgres", "-A", "trust", "--no-sync"); err != nil {
		return cl, err
	}
	// Settings both nodes share (pg_basebackup copies them); the port and
	// the primary-only settings go on each node's command line.
	conf := fmt.Sprintf("listen_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nmax_wal_senders = 4\nwal_level = replica\nhot_standby = on\nmax_connections = 200\n", dir)
	if err := appendFile(filepath.Join(primary.data, "postgresql.conf"), conf); err != nil {
		return cl, err
	}
	if err := appendFile(filepath.Join(primary.data, "pg_hba.conf"), "host replication postgres 127.0.0.1/32 trust\nhost all postgres 127.0.0.1/32 trust\n"); err != nil {
		return cl, err
	}
	switch fault {
	case faultFailoverSync:
		// Every commit waits until the replica has flushed it.
		primary.opts += " -c synchronous_standby_names=*"
	case faultUnsafeCommit:
		primary.opts += " -c synchronous_commit=off"
	}
	if err := cl.start(ctx, primary); err != nil {
		return cl, err
	}
	cl.dsn = fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable connect_timeout=3", primary.port)
	if fault == faultUnsafeCommit {
		return cl, nil
	}
	replica, err := cl.node("replica")
	if err != nil {
		return cl, err
	}
	if err := cl.run(ctx, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.port), "-U", "postgres",
		"-D", replica.data, "-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		return cl, err
	}
	if err := cl.start(ctx, replica); err != nil {
		return cl, err
	}
	if err := cl.awaitStreaming(ctx, primary, fault == faultFailoverSync); err != nil {
		return cl, err
	}
	cl.dsn = fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d user=postgres dbname=postgres sslmode=disable connect_timeout=3 target_session_attrs=read-write",
		primary.port, replica.port)
	return cl, nil
}

func (cl *pgCluster) writeDSN() string { return cl.dsn }
func (cl *pgCluster) tempDir() string  { return cl.dir }

// node adds a node named name on a free loopback port.
func (cl *pgCluster) node(name string) (*pgNode, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	n := &pgNode{name: name, data: filepath.Join(cl.dir, name), log: filepath.Join(cl.dir, name+".log"), port: port,
		opts: "-p " + strconv.Itoa(port)}
	cl.nodes = append(cl.nodes, n)
	return n, nil
}

// run runs one of the server's programs, as the postgres user when root.
func (cl *pgCluster) run(ctx context.Context, prog string, args ...string) error {
	path := filepath.Join(cl.bin, prog)
	var cmd *exec.Cmd
	if cl.asPG {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = cl.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", prog, strings.Join(args, " "), err, out)
	}
	return nil
}

func (cl *pgCluster) start(ctx context.Context, n *pgNode) error {
	if err := cl.run(ctx, "pg_ctl", "-D", n.data, "-l", n.log, "-w", "-t", "60", "-o", n.opts, "start"); err != nil {
		log, _ := os.ReadFile(n.log)
		return fmt.Errorf("start the %s: %w\n%s", n.name, err, log)
	}
	n.running = true
	return nil
}

// kill ends n at once, as a crash would: no checkpoint, and the WAL not yet
// written, flushed or sent stays unwritten, unflushed or unsent.
func (cl *pgCluster) kill(ctx context.Context, n *pgNode) error {
	n.running = false
	return cl.run(ctx, "pg_ctl", "-D", n.data, "-m", "immediate", "-w", "stop")
}

// walSender returns the pid of the primary's WAL sender.
func (cl *pgCluster) walSender(ctx context.Context, primary *pgNode) (int, error) {
	db, err := sql.Open("pgx", fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable", primary.port))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var pid int
	if err := db.QueryRowContext(ctx, "SELECT pid FROM pg_stat_replication LIMIT 1").Scan(&pid); err != nil {
		return 0, fmt.Errorf("find the WAL sender: %w", err)
	}
	return pid, nil
}

// awaitGone waits until the file at path is gone (a postmaster's lock
// file: the postmaster has ended), at most a minute.
func awaitGone(path string) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); os.IsNotExist(err) {
			return nil
		}
	}
	return fmt.Errorf("%s still there after a minute", path)
}

// awaitStreaming waits until the primary streams to its replica (as a
// synchronous standby if sync), at most a minute.
func (cl *pgCluster) awaitStreaming(ctx context.Context, primary *pgNode, sync bool) error {
	db, err := sql.Open("pgx", fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable", primary.port))
	if err != nil {
		return err
	}
	defer db.Close()
	q := "SELECT COUNT(*) FROM pg_stat_replication WHERE state = 'streaming'"
	if sync {
		q += " AND sync_state = 'sync'"
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var n int
		if err := db.QueryRowContext(ctx, q).Scan(&n); err == nil && n > 0 {
			return nil
		}
	}
	return errors.New("the replica did not start streaming within a minute")
}

// crash kills the primary mid-load and brings up the server that takes its
// place: the promoted replica (-failover) or the primary again, through
// crash recovery (-unsafe-commit). With -failover and a lag the replica
// lags behind first: the primary's WAL sender is stopped (SIGSTOP) for lag
// and killed with the primary, so the replica never gets what the primary
// wrote meanwhile — as a replica behind a slow or broken link. It returns
// how long the database accepted no writes, from the kill until the server
// that takes over is ready.
func (cl *pgCluster) crash(ctx context.Context) (time.Duration, error) {
	primary := cl.nodes[0]
	var sender int
	if cl.fault != faultUnsafeCommit && cl.lag > 0 {
		var err error
		if sender, err = cl.walSender(ctx, primary); err != nil {
			return 0, err
		}
		if err := syscall.Kill(sender, syscall.SIGSTOP); err != nil {
			return 0, fmt.Errorf("stop the WAL sender: %w", err)
		}
		time.Sleep(cl.lag)
	}
	start := time.Now()
	if sender == 0 {
		if err := cl.kill(ctx, primary); err != nil {
			return 0, err
		}
	} else {
		// The immediate shutdown first (-W: pg_ctl returns once it has
		// signalled the postmaster), then the stopped sender's SIGKILL: it
		// sends nothing more, and the postmaster, shutting down, does not
		// restart after it.
		primary.running = false
		if err := cl.run(ctx, "pg_ctl", "-D", primary.data, "-m", "immediate", "-W", "stop"); err != nil {
			return 0, err
		}
		if err := syscall.Kill(sender, syscall.SIGKILL); err != nil {
			return 0, fmt.Errorf("kill the WAL sender: %w", err)
		}
		if err := awaitGone(filepath.Join(primary.data, "postmaster.pid")); err != nil {
			return 0, err
		}
	}
	var err error
	if cl.fault == faultUnsafeCommit {
		err = cl.start(ctx, primary)
	} else {
		err = cl.run(ctx, "pg_ctl", "-D", cl.nodes[1].data, "-w", "-t", "60", "promote")
	}
	return time.Since(start), err
}

// remove stops every node it started, at once, and deletes the directory.
func (cl *pgCluster) remove() {
	for _, n := range cl.nodes {
		if _, err := os.Stat(filepath.Join(n.data, "postmaster.pid")); n.running || err == nil {
			if err := cl.kill(context.Background(), n); err != nil {
				fmt.Fprintln(os.Stderr, "torture: stop the", n.name+":", err)
			}
		}
	}
	if err := os.RemoveAll(cl.dir); err != nil {
		fmt.Fprintln(os.Stderr, "torture: remove the server's directory:", err)
	}
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
