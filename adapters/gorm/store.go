package outboxgorm

import (
	"fmt"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/sqlstore"
	"gorm.io/gorm"
)

// Open returns the outbox Store of db's database: outboxsql.Open on the
// *sql.DB under GORM (db.DB()), with the dialect taken from GORM's
// dialector ("postgres", "mysql" or "sqlite", whichever database/sql
// driver it uses) unless outboxsql.WithDialect sets it. Like outboxsql.Open
// it does not touch the database: call the Store's Migrate to create the
// table, or apply the Store's Schema in your own migrations.
//
// The Store runs its own statements on that *sql.DB (it never closes it);
// events are written in GORM's transactions through the TxContext that New
// returns. Errors wrap outbox.ErrInvalidConfig.
func Open(db *gorm.DB, opts ...outboxsql.Option) (*outboxsql.Store, error) {
	if db == nil || db.Config == nil || db.Dialector == nil {
		return nil, fmt.Errorf("%w: outboxgorm: nil *gorm.DB", outbox.ErrInvalidConfig)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("%w: outboxgorm: the *gorm.DB has no *sql.DB: %w", outbox.ErrInvalidConfig, err)
	}
	if sqlstore.Apply(opts...).Dialect == nil {
		if d := dialectOf(db); d != nil {
			opts = append([]outboxsql.Option{outboxsql.WithDialect(d)}, opts...)
		}
	}
	store, err := outboxsql.Open(sqlDB, opts...)
	if err != nil {
		return nil, fmt.Errorf("outboxgorm: %w", err)
	}
	return store, nil
}

// dialectOf returns the outbox dialect of GORM's dialector, by its name
// (see sqlstore.LookupDialect), or nil for a dialector it does not know
// (outboxsql.Open then looks at the driver).
func dialectOf(db *gorm.DB) outboxsql.Dialect {
	d, err := sqlstore.LookupDialect(db.Dialector.Name())
	if err != nil {
		return nil
	}
	return d
}
