package outboxsqlx

import (
	"fmt"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/sqlstore"
	"github.com/jmoiron/sqlx"
)

// Open returns the outbox Store of db's database: outboxsql.Open on the
// *sql.DB under sqlx. The dialect is detected from the driver as
// outboxsql.Open does, else taken from the driver name db was opened with
// (such as "sqlite3" for mattn/go-sqlite3, see sqlstore.LookupDialect),
// unless outboxsql.WithDialect
// sets it. Like outboxsql.Open it does not touch the database: call the
// Store's Migrate to create the table.
//
// The Store runs its own statements on db (it never closes it); events are
// written in sqlx's transactions through a TxContext. db may have been
// opened with sqlx itself or through this package (OpenDB, Connect,
// NewDb). Errors wrap outbox.ErrInvalidConfig.
func Open(db *sqlx.DB, opts ...outboxsql.Option) (*outboxsql.Store, error) {
	if db == nil || db.DB == nil {
		return nil, fmt.Errorf("%w: outboxsqlx: nil *sqlx.DB", outbox.ErrInvalidConfig)
	}
	if sqlstore.Apply(opts...).Dialect == nil {
		if _, err := outboxsql.DetectDialect(db.DB); err != nil {
			d, lookupErr := sqlstore.LookupDialect(db.DriverName())
			if lookupErr != nil {
				return nil, fmt.Errorf("outboxsqlx: driver name %q: %w", db.DriverName(), err)
			}
			opts = append([]outboxsql.Option{outboxsql.WithDialect(d)}, opts...)
		}
	}
	store, err := outboxsql.Open(db.DB, opts...)
	if err != nil {
		return nil, fmt.Errorf("outboxsqlx: %w", err)
	}
	return store, nil
}
