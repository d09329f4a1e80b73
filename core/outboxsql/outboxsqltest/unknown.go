package outboxsqltest

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"
)

// UnknownDB returns a *sql.DB, closed at cleanup, whose driver outboxsql
// does not recognize and which cannot connect: an adapter's Open must take
// the dialect of such a database from what the ORM knows, or reject it.
func UnknownDB(t testing.TB) *sql.DB {
	t.Helper()
	db := sql.OpenDB(unknownConnector{})
	t.Cleanup(func() { _ = db.Close() })
	return db
}

var errNotADatabase = errors.New("outboxsqltest: not a database")

type unknownConnector struct{}

func (unknownConnector) Connect(context.Context) (driver.Conn, error) { return nil, errNotADatabase }
func (unknownConnector) Driver() driver.Driver                        { return unknownDriver{} }

type unknownDriver struct{}

func (unknownDriver) Open(string) (driver.Conn, error) { return nil, errNotADatabase }
