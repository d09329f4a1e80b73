package main

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// The books of a crash run come from the journals: concurrent writers of
// one worker, and a worker restarted onto its own journal, must all be
// counted, each line whole.
func TestJournalsCountConcurrentRecords(t *testing.T) {
	dir := t.TempDir()
	const writers, each = 8, 200
	for _, worker := range []int{0, 1, 0} { // worker 0 is restarted onto its journal
		j, err := openJournal(dir, worker)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					id := fmt.Sprintf("w%d-%d-%d", worker, w, i)
					j.note(recAcked, id)
					if err := j.record(recDelivered, id); err != nil {
						t.Error(err)
					}
					if i%10 == 0 {
						j.note(recRolledBack, id+"-rb")
					}
				}
			})
		}
		wg.Wait()
		if err := j.close(); err != nil {
			t.Fatal(err)
		}
	}
	tl, err := readJournals(dir)
	if err != nil {
		t.Fatal(err)
	}
	distinct := 2 * writers * each // worker 0's ids repeat across its restart
	if tl.ackedN != 3*writers*each || len(tl.acked) != distinct || len(tl.delivered) != distinct || len(tl.rolledBack) != 2*writers*each/10 {
		t.Fatalf("acked %d (%d ids), delivered %d ids, rolled back %d ids", tl.ackedN, len(tl.acked), len(tl.delivered), len(tl.rolledBack))
	}
	if n := tl.delivered["w0-3-7"]; n != 2 {
		t.Fatalf("an event of worker 0 delivered %d times, want 2 (once per run)", n)
	}
	if n, err := ackedIn(dir, 0); err != nil || n != 2*writers*each {
		t.Fatalf("worker 0 acknowledged %d (%v), want %d", n, err, 2*writers*each)
	}
	if n, err := ackedIn(dir, 7); err != nil || n != 0 {
		t.Fatalf("a worker without a journal acknowledged %d (%v)", n, err)
	}
	var nilJournal *journal
	nilJournal.note(recAcked, "x") // no journal: nothing to do
	if _, err := os.Stat(journalPath(dir, 7)); !os.IsNotExist(err) {
		t.Fatalf("ackedIn made a journal: %v", err)
	}
}
