package sqlstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

var _ outbox.Waker = (*Store)(nil)

// Wake-ups between the instances on a table (outbox.Waker).
//
// PostgreSQL sends them with NOTIFY on a channel named after the table,
// <table>_wake, after the commit that left the events, on the store's own
// pool; the listeners hear them on a connection of their own (Listener).
// A NOTIFY inside the writer's transaction would be delivered at its
// commit too, but PostgreSQL serializes the commits of the transactions
// that notify (they take one lock on the notification queue): a NOTIFY
// of its own after the commit keeps the writers' commits apart, and a
// Client sends at most one at a time (outbox.Waker).
//
// MySQL, MariaDB and SQLite have no notifications. Their cheapest honest
// wake-up is one row, <table>_wake: a sender raises its counter; every
// listener reads it by primary key every WakeInterval, and polls when it
// moved. Reads of one row, answered from the buffer pool (InnoDB) or the
// page cache, cost the database far less than the claims of an idle poller
// polling as often; the writes are spaced by half a WakeInterval per Store,
// since no listener would tell two closer ones apart.

// DefaultWakeInterval is how often a listener on MySQL, MariaDB or SQLite
// reads the wake-up signal unless WithWakeInterval sets another interval.
const DefaultWakeInterval = 50 * time.Millisecond

// Bounds of WithWakeInterval.
const (
	MinWakeInterval = 5 * time.Millisecond
	// MaxWakeInterval keeps a Wake's wait for its turn (half the interval)
	// well within the time a Client gives one Wake (5 s).
	MaxWakeInterval = 5 * time.Second
)

// wakeSuffix names the wake-up channel (PostgreSQL) or the signal table.
const wakeSuffix = "_wake"

// Listener listens for PostgreSQL notifications on a connection of its
// own: LISTEN holds a session, so it cannot go through a pooler in
// transaction mode (PgBouncer's, for one) — give it a direct connection.
// Package outboxpgx has one on pgx (outboxpgx.NewListener, and outboxpgx.Open
// sets one on its pool); WithListener sets it on any PostgreSQL Store.
type Listener interface {
	// Listen runs LISTEN channel, calls listening once it listens, then
	// notify with the payload of each notification on channel, from the
	// goroutine that called Listen, until ctx ends (it returns ctx's
	// error) or the connection fails (it returns the failure).
	Listen(ctx context.Context, channel string, listening func(), notify func(payload string)) error
}

// WithListener sets the Listener of a PostgreSQL Store's wake-ups. Without
// one, a PostgreSQL Store sends wake-ups but does not hear them.
func WithListener(l Listener) Option {
	return func(o *Options) { o.Listener = l }
}

// WithWakeInterval sets how often a listener on MySQL, MariaDB or SQLite
// reads the wake-up signal (default DefaultWakeInterval, between
// MinWakeInterval and MaxWakeInterval): the longest a wake-up waits to be
// heard.
func WithWakeInterval(d time.Duration) Option {
	return func(o *Options) { o.WakeInterval = d }
}

// wakeState is a Store's wake-up statements and the time of its last
// signal.
type wakeState struct {
	listener Listener
	every    time.Duration
	// channel is the NOTIFY channel (PostgreSQL); table the signal table.
	channel, table string
	notify         string // PostgreSQL
	raise, read    string // the others
	mu             sync.Mutex
	last           time.Time // the last raise
}

// newWakeState returns the wake-up statements of the (validated) table
// of d, with the options o.
func newWakeState(d *dialect, table string, o Options) (*wakeState, error) {
	every := o.WakeInterval
	if every == 0 {
		every = DefaultWakeInterval
	}
	if every < MinWakeInterval || every > MaxWakeInterval {
		return nil, fmt.Errorf("%w: sqlstore: wake interval %v is outside [%v, %v]", outbox.ErrInvalidConfig, every, MinWakeInterval, MaxWakeInterval)
	}
	w := &wakeState{listener: o.Listener, every: every}
	if d.notifies {
		w.channel = wakeChannel(table, d.maxIdent)
		w.notify = d.rebind("SELECT pg_notify(?, ?)", 1)
		return w, nil
	}
	w.table = table + wakeSuffix
	if err := checkDerivedTable(d, table, w.table); err != nil {
		return nil, err
	}
	w.raise = d.rebind("UPDATE "+w.table+" SET n = n + 1, by_owner = ? WHERE id = 1", 1)
	w.read = "SELECT n, by_owner FROM " + w.table + " WHERE id = 1"
	return w, nil
}

// wakeChannel is the NOTIFY channel of table: <table>_wake when it fits
// PostgreSQL's identifiers, else a name made of its hash.
func wakeChannel(table string, maxIdent int) string {
	if name := table + wakeSuffix; len(name) <= maxIdent {
		return name
	}
	sum := sha256.Sum256([]byte(table))
	return "outbox_wake_" + hex.EncodeToString(sum[:12])
}

// WakeChannel returns the channel of the store's wake-ups on PostgreSQL
// (NOTIFY), "" on the other databases.
func (s *Store) WakeChannel() string { return s.wk.channel }

// Wake tells the instances listening on the table that events wait in it
// (outbox.Waker): NOTIFY on PostgreSQL, a raise of the signal row
// elsewhere, at most one every half WakeInterval per Store (a Wake waits
// for its turn).
func (s *Store) Wake(ctx context.Context, from string) error {
	if s.d.notifies {
		_, err := s.db.Exec(ctx, s.wk.notify, s.wk.channel, from)
		return err
	}
	s.wk.mu.Lock()
	wait := time.Until(s.wk.last.Add(s.wk.every / 2))
	s.wk.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	_, err := s.w.Exec(ctx, s.wk.raise, from)
	s.wk.mu.Lock()
	s.wk.last = time.Now()
	s.wk.mu.Unlock()
	if err != nil {
		return s.controlErr("wake the other instances", s.wk.table, err)
	}
	return nil
}

// Listen hears the other instances' wake-ups (outbox.Waker) until ctx
// ends: through the Listener on PostgreSQL (an error wrapping
// errors.ErrUnsupported without one), by reading the signal row every
// WakeInterval elsewhere.
func (s *Store) Listen(ctx context.Context, wake func(from string)) error {
	if s.d.notifies {
		if s.wk.listener == nil {
			return fmt.Errorf("sqlstore: %s hears wake-ups through a Listener (outboxpgx.Open sets one; or WithListener): %w",
				s.d.title, errors.ErrUnsupported)
		}
		return s.wk.listener.Listen(ctx, s.wk.channel, func() { wake("") }, wake)
	}
	n, _, err := s.readWake(ctx)
	if err != nil {
		return err
	}
	wake("")
	t := time.NewTicker(s.wk.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		m, by, err := s.readWake(ctx)
		if err != nil {
			return err
		}
		switch m {
		case n:
		case n + 1: // one raise: its sender is known
			wake(by)
		default:
			wake("")
		}
		n = m
	}
}

// readWake reads the signal row: its counter and who raised it last.
func (s *Store) readWake(ctx context.Context) (n int64, by string, err error) {
	rows, err := s.db.Query(ctx, s.wk.read)
	if err != nil {
		return 0, "", s.controlErr("read the wake-up signal", s.wk.table, err)
	}
	defer rows.Close()
	if rows.Next() {
		err = rows.Scan(&n, &by)
	}
	if err == nil {
		err = rows.Err()
	}
	if err != nil {
		return 0, "", s.controlErr("read the wake-up signal", s.wk.table, err)
	}
	return n, by, nil
}
