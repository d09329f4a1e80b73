package outboxbun

import (
	"fmt"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/sqlstore"
	"github.com/uptrace/bun"
)

// Open returns the outbox Store of db's database: outboxsql.Open on the
// *sql.DB under bun, with the dialect taken from bun's (pgdialect,
// mysqldialect or sqlitedialect, whichever database/sql driver it uses)
// unless outboxsql.WithDialect sets it. Like outboxsql.Open it does not
// touch the database: call the Store's Migrate to create the table, or
// apply the Store's Schema in your own migrations.
//
// The Store runs its own statements on that *sql.DB (it never closes it);
// events are written in bun's transactions through a TxContext installed
// on db. Errors wrap outbox.ErrInvalidConfig.
func Open(db *bun.DB, opts ...outboxsql.Option) (*outboxsql.Store, error) {
	if db == nil || db.DB == nil {
		return nil, fmt.Errorf("%w: outboxbun: nil *bun.DB", outbox.ErrInvalidConfig)
	}
	if sqlstore.Apply(opts...).Dialect == nil {
		if d := dialectOf(db); d != nil {
			opts = append([]outboxsql.Option{outboxsql.WithDialect(d)}, opts...)
		}
	}
	store, err := outboxsql.Open(db.DB, opts...)
	if err != nil {
		return nil, fmt.Errorf("outboxbun: %w", err)
	}
	return store, nil
}

// dialectOf returns the outbox dialect of bun's dialect, by its name ("pg",
// "mysql", "sqlite": see sqlstore.LookupDialect), or nil for one it does
// not know (outboxsql.Open then looks at the driver).
func dialectOf(db *bun.DB) outboxsql.Dialect {
	d, err := sqlstore.LookupDialect(db.Dialect().Name().String())
	if err != nil {
		return nil
	}
	return d
}
