package outboxtx

import (
	"strings"
	"sync"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxtest"
)

// journal records which callbacks ran, in order.
type journal struct {
	mu  sync.Mutex
	ran []string
}

func (j *journal) fn(name string) func() {
	return func() {
		j.mu.Lock()
		j.ran = append(j.ran, name)
		j.mu.Unlock()
	}
}

// event registers the commit and rollback callbacks of one written event.
func (j *journal) event(s *Scope, name string) {
	s.AfterCommit(j.fn("commit:" + name))
	s.AfterRollback(j.fn("rollback:" + name))
}

func (j *journal) take() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := strings.Join(j.ran, ",")
	j.ran = nil
	return out
}

func expect(t *testing.T, j *journal, when, want string) {
	t.Helper()
	if got := j.take(); got != want {
		t.Errorf("%s: ran %q, want %q", when, got, want)
	}
}

func TestScopeCommitRunsInRegistrationOrder(t *testing.T) {
	var j journal
	s := NewScope(nil)
	j.event(s, "a")
	s.Savepoint("sp1")
	j.event(s, "b")
	s.Release("sp1")
	j.event(s, "c")
	expect(t, &j, "before commit", "")
	s.Commit()
	expect(t, &j, "commit", "commit:a,commit:b,commit:c")
	s.Commit()
	s.Rollback()
	j.event(s, "late")
	expect(t, &j, "after the end", "")
	if !s.Ended() {
		t.Error("Ended() = false after Commit")
	}
}

func TestScopeRollbackRunsEverything(t *testing.T) {
	var j journal
	s := NewScope(nil)
	j.event(s, "a")
	s.Savepoint("sp1")
	j.event(s, "b")
	s.Rollback()
	expect(t, &j, "rollback", "rollback:a,rollback:b")
	s.Commit()
	expect(t, &j, "commit after rollback", "")
}

func TestScopeRollbackToDropsOnlyTheSavepointsWork(t *testing.T) {
	var j journal
	s := NewScope(nil)
	j.event(s, "outer")
	s.Savepoint("sp1")
	j.event(s, "inner")
	s.Savepoint("sp2")
	j.event(s, "innermost")
	s.RollbackTo("sp1")
	expect(t, &j, "rollback to sp1", "rollback:inner,rollback:innermost")
	if d := s.Depth(); d != 1 {
		t.Errorf("depth after ROLLBACK TO sp1 = %d, want 1 (sp1 stays open)", d)
	}
	j.event(s, "retry") // work after the ROLLBACK TO, still inside sp1
	s.Release("sp1")
	j.event(s, "after")
	s.Commit()
	expect(t, &j, "commit", "commit:outer,commit:retry,commit:after")
}

func TestScopeRollbackToTwice(t *testing.T) {
	var j journal
	s := NewScope(nil)
	s.Savepoint("sp")
	j.event(s, "first")
	s.RollbackTo("sp")
	j.event(s, "second")
	s.RollbackTo("sp")
	expect(t, &j, "two rollbacks to sp", "rollback:first,rollback:second")
	j.event(s, "third")
	s.Commit()
	expect(t, &j, "commit", "commit:third")
}

func TestScopeOuterRollbackAfterInnerRelease(t *testing.T) {
	var j journal
	s := NewScope(nil)
	s.Savepoint("sp1")
	j.event(s, "inner")
	s.Release("sp1")
	s.Rollback()
	expect(t, &j, "outer rollback", "rollback:inner")
}

func TestScopeUnknownSavepoint(t *testing.T) {
	var j journal
	s := NewScope(nil)
	j.event(s, "a")
	s.Release("nope") // ignored
	j.event(s, "b")
	s.RollbackTo("never_seen") // conservative: everything so far is undone
	expect(t, &j, "rollback to an unknown savepoint", "rollback:a,rollback:b")
	j.event(s, "c")
	s.Commit()
	expect(t, &j, "commit", "commit:c")
}

func TestScopeDuplicateNamesUseTheInnermost(t *testing.T) {
	var j journal
	s := NewScope(nil)
	s.Savepoint("sp")
	j.event(s, "a")
	s.Savepoint("SP") // unquoted names compare without case
	j.event(s, "b")
	s.RollbackTo("sp")
	expect(t, &j, "rollback to the inner sp", "rollback:b")
	s.Commit()
	expect(t, &j, "commit", "commit:a")
}

func TestScopeCallbackMayUseTheScope(t *testing.T) {
	s := NewScope(nil)
	done := make(chan struct{})
	s.Savepoint("sp")
	s.AfterRollback(func() {
		s.AfterCommit(func() { close(done) }) // must not deadlock
	})
	s.RollbackTo("sp")
	s.Commit()
	<-done
}

func TestScopePanickingCallbackIsLogged(t *testing.T) {
	logger, buf := outboxtest.NewLogBuffer()
	var j journal
	s := NewScope(logger)
	s.Savepoint("sp")
	s.AfterCommit(func() { panic("callback bug") })
	j.event(s, "next")
	s.Commit()
	expect(t, &j, "commit", "commit:next")
	if !strings.Contains(buf.String(), "callback bug") {
		t.Errorf("panic not logged: %q", buf.String())
	}
}

func TestScopeObserve(t *testing.T) {
	var j journal
	s := NewScope(nil)
	for _, q := range []string{"INSERT INTO t VALUES (1)", "SELECT 1"} {
		if s.Observe(q) {
			t.Errorf("Observe(%q) = true", q)
		}
	}
	j.event(s, "a")
	s.Observe("savepoint sp_1")
	j.event(s, "b")
	s.Observe(`ROLLBACK TO SAVEPOINT SP_1;`)
	s.Observe("RELEASE sp_1")
	if d := s.Depth(); d != 0 {
		t.Errorf("depth = %d, want 0", d)
	}
	s.Commit()
	expect(t, &j, "observed statements", "rollback:b,commit:a")
}

func TestScopeConcurrentRegistration(t *testing.T) {
	s := NewScope(nil)
	var mu sync.Mutex
	n := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				s.AfterCommit(func() { mu.Lock(); n++; mu.Unlock() })
			}
		}()
	}
	wg.Wait()
	s.Commit()
	if n != 800 {
		t.Fatalf("ran %d callbacks, want 800", n)
	}
}

func TestScopeIsAnOutboxTx(t *testing.T) {
	var j journal
	s := NewScope(nil)
	var tx outbox.Tx = s
	tx.AfterCommit(j.fn("c"))
	tx.AfterRollback(j.fn("r"))
	s.Rollback()
	expect(t, &j, "rollback", "r")
}

func TestParseSavepoint(t *testing.T) {
	for _, tc := range []struct {
		query string
		op    Op
		name  string
	}{
		{"SAVEPOINT sp1", OpSavepoint, "sp1"},
		{"  savepoint  sp1 ; ", OpSavepoint, "sp1"},
		{`SAVEPOINT "My Point"`, OpSavepoint, `"My Point"`},
		{"RELEASE SAVEPOINT sp1", OpRelease, "sp1"},
		{"release sp1", OpRelease, "sp1"},
		{"ROLLBACK TO SAVEPOINT sp1", OpRollbackTo, "sp1"},
		{"rollback to sp1", OpRollbackTo, "sp1"},
		{"ROLLBACK WORK TO SAVEPOINT sp1", OpRollbackTo, "sp1"},
		{"ROLLBACK TRANSACTION TO `sp1`", OpRollbackTo, "`sp1`"},
		{"ROLLBACK", OpNone, ""},
		{"COMMIT", OpNone, ""},
		{"SAVEPOINT", OpNone, ""},
		{"SAVEPOINTS x", OpNone, ""},
		{"SAVEPOINT a b", OpNone, ""},
		{"ROLLBACK TO", OpNone, ""},
		{"ROLLBACK sp1", OpNone, ""},
		{"RELEASE", OpNone, ""},
		{"SELECT 'SAVEPOINT x'", OpNone, ""},
		{"SAVEPOINT " + strings.Repeat("x", 300), OpNone, ""},
	} {
		op, name := ParseSavepoint(tc.query)
		if op != tc.op || name != tc.name {
			t.Errorf("ParseSavepoint(%q) = %v %q, want %v %q", tc.query, op, name, tc.op, tc.name)
		}
	}
}

func TestOpString(t *testing.T) {
	for op, want := range map[Op]string{OpNone: "none", OpSavepoint: "SAVEPOINT", OpRelease: "RELEASE", OpRollbackTo: "ROLLBACK TO"} {
		if got := op.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(op), got, want)
		}
	}
}

func TestNormalizeName(t *testing.T) {
	for in, want := range map[string]string{"Sp1": "sp1", `"Sp1"`: "Sp1", "`Sp1`": "Sp1", "[Sp1]": "Sp1", " x ": "x"} {
		if got := normalizeName(in); got != want {
			t.Errorf("normalizeName(%q) = %q, want %q", in, got, want)
		}
	}
}
