package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The journal records, outside the database, what a crash of the database
// cannot take back (-failover, -unsafe-commit): the commits acknowledged to
// the writers, the business transactions they rolled back on purpose, and
// every delivery the listener completed — its side effect, as a message a
// broker took. Each worker appends to a file of its own, one line per
// record, with one write each: a SIGKILL of the worker loses at most the
// record of what it was doing, and the file outlives the process.
type journal struct{ f *os.File }

// Record kinds: the first byte of a journal line.
const (
	recAcked      = 'C' // the writer's commit returned without error
	recRolledBack = 'R' // the writer rolled its transaction back on purpose
	recDelivered  = 'D' // the listener completed a delivery
)

func journalPath(dir string, worker int) string {
	return filepath.Join(dir, fmt.Sprintf("worker-%d.journal", worker))
}

// openJournal opens the journal of worker in dir for appending.
func openJournal(dir string, worker int) (*journal, error) {
	f, err := os.OpenFile(journalPath(dir, worker), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &journal{f: f}, nil
}

// record appends one line; concurrent calls do not interleave (O_APPEND,
// one write of a few dozen bytes).
func (j *journal) record(kind byte, id string) error {
	_, err := j.f.Write([]byte(string(kind) + " " + id + "\n"))
	return err
}

// note records what a writer did, if j is not nil; a failed write is
// reported on stderr (the worker's log).
func (j *journal) note(kind byte, id string) {
	if j == nil {
		return
	}
	if err := j.record(kind, id); err != nil {
		fmt.Fprintln(os.Stderr, "journal:", err)
	}
}

func (j *journal) close() error { return j.f.Close() }

// tally is what the journals of a run say.
type tally struct {
	acked, rolledBack map[string]bool
	delivered         map[string]int // deliveries per event
	ackedN            int            // acknowledged commits
}

func newTally() tally {
	return tally{acked: map[string]bool{}, rolledBack: map[string]bool{}, delivered: map[string]int{}}
}

// readJournals reads every journal in dir.
func readJournals(dir string) (tally, error) {
	t := newTally()
	files, err := filepath.Glob(filepath.Join(dir, "*.journal"))
	if err != nil {
		return t, err
	}
	for _, path := range files {
		if err := t.read(path); err != nil {
			return t, err
		}
	}
	return t, nil
}

// ackedIn counts the acknowledged commits in worker's journal.
func ackedIn(dir string, worker int) (int, error) {
	t := newTally()
	err := t.read(journalPath(dir, worker))
	if os.IsNotExist(err) {
		return 0, nil
	}
	return t.ackedN, err
}

// read adds the records of the journal at path.
func (t *tally) read(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		kind, id, ok := strings.Cut(sc.Text(), " ")
		if !ok || len(kind) != 1 {
			continue
		}
		switch kind[0] {
		case recAcked:
			t.acked[id] = true
			t.ackedN++
		case recRolledBack:
			t.rolledBack[id] = true
		case recDelivered:
			t.delivered[id]++
		}
	}
	return sc.Err()
}
