package main

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"testing"
)

// The MariaDB server of -mariadb-restart: a commit it acknowledged is still
// there after its crash (SIGKILL, then InnoDB's crash recovery), the server
// accepts writes again on the same DSN, and remove leaves nothing behind.
func TestMariaServerKeepsCommitsThroughItsCrash(t *testing.T) {
	if _, err := mariadbdPath(); errors.Is(err, errNoMariaDB) {
		t.Skip("no MariaDB server binary on this machine:", err)
	}
	ctx := context.Background()
	s, err := startMariaDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	removed := false
	defer func() {
		if !removed {
			s.remove()
		}
	}()
	db, err := sql.Open("mysql", s.writeDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{"CREATE TABLE kept (id INT PRIMARY KEY) ENGINE=InnoDB", "INSERT INTO kept VALUES (1)"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	outage, err := s.crash(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if outage <= 0 {
		t.Errorf("outage %s, want the time from the kill until the restart", outage)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO kept VALUES (2)"); err != nil {
		t.Fatalf("write after the restart: %v", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM kept").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("%d rows after the crash and one more insert, want 2", n)
	}
	db.Close()
	s.remove()
	removed = true
	if _, err := os.Stat(s.tempDir()); !os.IsNotExist(err) {
		t.Errorf("the server's directory is still there after remove (%v)", err)
	}
}

// A fault of the database runs on its own server and database.
func TestCheckDBFaultFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    config
		set  map[string]bool
		ok   bool
	}{
		{"mariadb-restart on mysql", config{db: "mysql", restartMaria: true, crashAtPct: 50}, nil, true},
		{"mariadb-restart on postgres", config{db: "postgres", restartMaria: true, crashAtPct: 50}, nil, false},
		{"unsafe-commit on mysql", config{db: "mysql", unsafeCommit: true, crashAtPct: 50}, nil, false},
		{"two faults", config{db: "mysql", restartMaria: true, unsafeCommit: true, crashAtPct: 50}, nil, false},
		{"mariadb-restart with a dsn", config{db: "mysql", restartMaria: true, crashAtPct: 50}, map[string]bool{"dsn": true}, false},
		{"mariadb-restart crash at 100 %", config{db: "mysql", restartMaria: true, crashAtPct: 100}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			c.poison, c.hung = true, true
			err := checkDBFault(&c, tc.set)
			if (err == nil) != tc.ok {
				t.Fatalf("checkDBFault: %v, want ok=%v", err, tc.ok)
			}
			if tc.ok && (c.poison || c.hung) {
				t.Error("the probes are still on")
			}
		})
	}
}
