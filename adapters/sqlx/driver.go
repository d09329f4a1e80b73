package outboxsqlx

import (
	"context"
	"database/sql/driver"
	"errors"
	"log/slog"
	"sync"

	"github.com/go-outbox/outbox/core/outboxtx"
)

// connector wraps a driver.Connector so that every connection it opens
// reports its transactions (begin, savepoints, commit, rollback) to a Scope.
// A *sql.Tx commits through its connection's driver.Tx, so this observes
// the real commit of every transaction, however it was begun: sqlx's
// Beginx, MustBegin, BeginTxx, or database/sql's own.
type connector struct {
	inner  driver.Connector
	logger *slog.Logger
}

func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &conn{inner: dc, logger: c.logger}, nil
}

// Driver returns the wrapped driver, so that code detecting the database
// from the driver's type (outboxsql.Open) sees the real one.
func (c *connector) Driver() driver.Driver { return c.inner.Driver() }

// dsnConnector is the connector of a driver that has no OpenConnector.
type dsnConnector struct {
	dsn string
	drv driver.Driver
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

// conn wraps a driver.Conn. It implements every optional interface
// database/sql looks for and hands each call to the wrapped connection, or
// does what database/sql does when the wrapped connection lacks it.
type conn struct {
	inner  driver.Conn
	logger *slog.Logger
	mu     sync.Mutex
	tx     *tx // the transaction running on the connection, if any
}

var (
	_ driver.Conn               = (*conn)(nil)
	_ driver.ConnBeginTx        = (*conn)(nil)
	_ driver.ConnPrepareContext = (*conn)(nil)
	_ driver.ExecerContext      = (*conn)(nil)
	_ driver.QueryerContext     = (*conn)(nil)
	_ driver.Pinger             = (*conn)(nil)
	_ driver.SessionResetter    = (*conn)(nil)
	_ driver.Validator          = (*conn)(nil)
	_ driver.NamedValueChecker  = (*conn)(nil)
)

// Unwrap returns the driver's own connection, for code that reaches it
// through sql.Conn.Raw.
func (c *conn) Unwrap() driver.Conn { return c.inner }

func (c *conn) current() *tx {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tx
}

func (c *conn) setTx(t *tx) {
	c.mu.Lock()
	c.tx = t
	c.mu.Unlock()
}

func (c *conn) endTx(t *tx) {
	c.mu.Lock()
	if c.tx == t {
		c.tx = nil
	}
	c.mu.Unlock()
}

func (c *conn) Prepare(query string) (driver.Stmt, error) { return c.inner.Prepare(query) }

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := c.inner.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.inner.Prepare(query)
}

func (c *conn) Close() error { return c.inner.Close() }

// Begin is the legacy entry point; database/sql calls BeginTx.
func (c *conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	var (
		inner driver.Tx
		err   error
	)
	if b, ok := c.inner.(driver.ConnBeginTx); ok {
		inner, err = b.BeginTx(ctx, opts)
	} else {
		if opts.Isolation != driver.IsolationLevel(0) {
			return nil, errors.New("outboxsqlx: the driver does not support non-default isolation levels")
		}
		if opts.ReadOnly {
			return nil, errors.New("outboxsqlx: the driver does not support read-only transactions")
		}
		inner, err = c.inner.Begin() //nolint:staticcheck // the driver has nothing newer
	}
	if err != nil {
		return nil, err
	}
	t := &tx{inner: inner, conn: c, scope: outboxtx.NewScope(c.logger)}
	c.setTx(t)
	return t, nil
}

// probeKey marks the context of the statement with which TxContext finds
// the Scope of a *sql.Tx: the connection answers it without running it.
type probeKey struct{}

// probe receives the Scope of the transaction running on the connection.
type probe struct{ scope *outboxtx.Scope }

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if p, ok := ctx.Value(probeKey{}).(*probe); ok {
		if t := c.current(); t != nil {
			p.scope = t.scope
		}
		return driver.RowsAffected(0), nil
	}
	var (
		res driver.Result
		err error
	)
	switch e := c.inner.(type) {
	case driver.ExecerContext:
		res, err = e.ExecContext(ctx, query, args)
	case driver.Execer: //nolint:staticcheck // legacy drivers
		var values []driver.Value
		if values, err = plainValues(args); err == nil {
			if err = ctx.Err(); err == nil {
				res, err = e.Exec(query, values)
			}
		}
	default:
		return nil, driver.ErrSkip
	}
	if err == nil {
		c.observe(query)
	}
	return res, err
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	var (
		rows driver.Rows
		err  error
	)
	switch q := c.inner.(type) {
	case driver.QueryerContext:
		rows, err = q.QueryContext(ctx, query, args)
	case driver.Queryer: //nolint:staticcheck // legacy drivers
		var values []driver.Value
		if values, err = plainValues(args); err == nil {
			if err = ctx.Err(); err == nil {
				rows, err = q.Query(query, values)
			}
		}
	default:
		return nil, driver.ErrSkip
	}
	if err == nil {
		c.observe(query)
	}
	return rows, err
}

// observe reports a statement that succeeded to the running transaction,
// which tracks its savepoints.
func (c *conn) observe(query string) {
	if t := c.current(); t != nil {
		t.scope.Observe(query)
	}
}

func (c *conn) Ping(ctx context.Context) error {
	if p, ok := c.inner.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *conn) ResetSession(ctx context.Context) error {
	if r, ok := c.inner.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *conn) IsValid() bool {
	if v, ok := c.inner.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// CheckNamedValue hands the check to the driver; ErrSkip makes
// database/sql apply its default conversion, as if this method did not exist.
func (c *conn) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := c.inner.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func plainValues(args []driver.NamedValue) ([]driver.Value, error) {
	values := make([]driver.Value, len(args))
	for i, a := range args {
		if a.Name != "" {
			return nil, errors.New("outboxsqlx: the driver does not support named parameters")
		}
		values[i] = a.Value
	}
	return values, nil
}

// tx is a transaction of conn; its Commit and Rollback end the Scope.
type tx struct {
	inner driver.Tx
	conn  *conn
	scope *outboxtx.Scope
}

// Commit commits, then runs the after-commit callbacks; a failed commit
// runs the after-rollback callbacks instead.
func (t *tx) Commit() error {
	err := t.inner.Commit()
	t.conn.endTx(t)
	if err != nil {
		t.scope.Rollback()
		return err
	}
	t.scope.Commit()
	return nil
}

// Rollback rolls back, then runs the after-rollback callbacks.
func (t *tx) Rollback() error {
	err := t.inner.Rollback()
	t.conn.endTx(t)
	t.scope.Rollback()
	return err
}
