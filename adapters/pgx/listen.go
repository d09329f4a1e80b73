package outboxpgx

import (
	"context"
	"fmt"
	"time"

	"github.com/go-outbox/outbox/core/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// NewListener returns a sqlstore.Listener that hears the wake-ups of an
// outbox table (outbox.Waker) on a connection of its own to connString, a
// pgx connection string (a URL or key=value pairs). LISTEN needs a session
// of its own: give it a direct connection to the server, not one through a
// pooler in transaction mode, even when the Store's pool goes through one.
//
// It serves the stores of database/sql too, lib/pq's included:
//
//	store, err := outboxsql.Open(db, sqlstore.WithListener(outboxpgx.NewListener(directDSN)))
func NewListener(connString string) sqlstore.Listener { return dsnListener(connString) }

// WithListenConnString makes Open's Store listen for wake-ups on a
// connection of its own to connString (see NewListener) rather than on a
// connection taken from its pool: for a pool that goes through a pooler in
// transaction mode.
func WithListenConnString(connString string) Option {
	return sqlstore.WithListener(NewListener(connString))
}

// dsnListener listens on a connection it opens to its connection string.
type dsnListener string

func (l dsnListener) Listen(ctx context.Context, channel string, listening func(), notify func(string)) error {
	conn, err := pgx.Connect(ctx, string(l))
	if err != nil {
		return fmt.Errorf("outboxpgx: listen: connect: %w", err)
	}
	defer closeConn(ctx, conn)
	return listen(ctx, conn, channel, listening, notify)
}

// poolListener listens on a connection taken out of its pool for good (a
// connection that listens must not go back to the pool: it would keep
// collecting notifications that nobody reads).
type poolListener struct{ pool *pgxpool.Pool }

func (l poolListener) Listen(ctx context.Context, channel string, listening func(), notify func(string)) error {
	c, err := l.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("outboxpgx: listen: acquire a connection: %w", err)
	}
	conn := c.Hijack()
	defer closeConn(ctx, conn)
	return listen(ctx, conn, channel, listening, notify)
}

// closeConn closes conn, waiting at most closeTimeout for the server.
func closeConn(ctx context.Context, conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	_ = conn.Close(ctx) // the connection is dropped either way
}

// closeTimeout bounds the close of a listening connection.
const closeTimeout = 5 * time.Second

// listen runs LISTEN channel on conn and hands each notification's payload
// to notify until ctx ends or the connection fails.
func listen(ctx context.Context, conn *pgx.Conn, channel string, listening func(), notify func(string)) error {
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return fmt.Errorf("outboxpgx: listen on %s: %w", channel, err)
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("outboxpgx: listen on %s: %w", channel, err)
		}
		notify(n.Payload)
	}
}
