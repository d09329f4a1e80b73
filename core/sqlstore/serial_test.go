package sqlstore

import (
	"context"
	"errors"
	"testing"
	"time"
)

// oneRow is a Conn whose statements succeed; its Query returns rows that
// record whether they were closed.
type oneRow struct{}

func (oneRow) Exec(context.Context, string, ...any) (int64, error) { return 1, nil }
func (oneRow) Query(context.Context, string, ...any) (Rows, error) { return &closedRows{}, nil }

type closedRows struct{ closed int }

func (*closedRows) Next() bool        { return false }
func (*closedRows) Scan(...any) error { return nil }
func (*closedRows) Err() error        { return nil }
func (r *closedRows) Close() error    { r.closed++; return nil }

// A Query holds the turn until its rows are closed; a statement waiting
// for the turn gives up when its context ends, and runs once the rows are
// closed (closing them twice gives the turn back once).
func TestSerialConnTakesTurns(t *testing.T) {
	ctx := context.Background()
	s := newSerialConn(oneRow{})
	rows, err := s.Query(ctx, "UPDATE …")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := s.Exec(short, "UPDATE …"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Exec while a Query's rows are open = %v; want it to wait until its deadline", err)
	}
	if _, err := s.Query(short, "UPDATE …"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Query while a Query's rows are open = %v; want it to wait until its deadline", err)
	}
	ran := make(chan error, 1)
	go func() { _, err := s.Exec(ctx, "UPDATE …"); ran <- err }()
	select {
	case err := <-ran:
		t.Fatalf("Exec ran (%v) while a Query's rows were open", err)
	case <-time.After(20 * time.Millisecond):
	}
	for range 2 {
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if got := rows.(*serialRows).Rows.(*closedRows).closed; got != 2 {
		t.Fatalf("rows closed %d times, want 2", got)
	}
	// The turn is free again (a second give on the second Close would
	// have blocked on the empty channel).
	if _, err := s.Exec(ctx, "UPDATE …"); err != nil {
		t.Fatal(err)
	}
	if len(s.turn) != 0 {
		t.Fatalf("the turn is held after every statement ended")
	}
}
