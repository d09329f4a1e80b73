package sqlstore

import "context"

// serialConn runs one statement at a time on a Conn: the store's own
// writes on a database with one write lock (SQLite). Without it, the
// claims, the two acknowledgement writers, the heartbeats and the outcomes
// of one Client would wait for one another in the database's busy handler,
// which does not hand the lock over when it is released: it sleeps (1, 2,
// 5, 10 ms and longer) and tries again. Taking turns in the process
// instead, a statement starts as soon as the one before it ends. Writes of
// other processes and business transactions still meet the busy handler.
//
// A statement waits for its turn until its context ends. The turn of a
// Query is held until its Rows are closed: an UPDATE … RETURNING holds the
// write lock until then.
type serialConn struct {
	c    Conn
	turn chan struct{} // holds a token while a statement runs
}

func newSerialConn(c Conn) *serialConn {
	return &serialConn{c: c, turn: make(chan struct{}, 1)}
}

// take waits for the turn.
func (s *serialConn) take(ctx context.Context) error {
	select {
	case s.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (s *serialConn) give() { <-s.turn }

func (s *serialConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	if err := s.take(ctx); err != nil {
		return 0, err
	}
	defer s.give()
	return s.c.Exec(ctx, query, args...)
}

func (s *serialConn) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	if err := s.take(ctx); err != nil {
		return nil, err
	}
	rows, err := s.c.Query(ctx, query, args...)
	if err != nil {
		s.give()
		return nil, err
	}
	return &serialRows{Rows: rows, give: s.give}, nil
}

// serialRows gives the turn back when the rows are closed (once: Close
// may be called again, as queryRecords does).
type serialRows struct {
	Rows
	give func()
}

func (r *serialRows) Close() error {
	err := r.Rows.Close()
	if r.give != nil {
		r.give()
		r.give = nil
	}
	return err
}
