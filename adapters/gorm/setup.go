package outboxgorm

import (
	"context"
	"fmt"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"gorm.io/gorm"
)

// Setup is the quick start in one call: it installs the plugin on db (New,
// with cfg.Logger), opens the Store of db's database (Open, with opts),
// creates the outbox table and its indexes if they do not exist
// (Store.Migrate), and returns outbox.New(cfg) with the Store and the
// TxContext filled in. Register listeners on the Client, Start it, and
// write with client.Write(WithTx(ctx, tx), …) inside db.Transaction.
//
// Services whose schema is managed by a migration tool call New, Open and
// outbox.New themselves and apply Store.Schema in their migrations
// instead.
func Setup(ctx context.Context, db *gorm.DB, cfg outbox.Config, opts ...outboxsql.Option) (*outbox.Client, error) {
	var txOpts []Option
	if cfg.Logger != nil {
		txOpts = append(txOpts, WithLogger(cfg.Logger))
	}
	tc, err := New(db, txOpts...)
	if err != nil {
		return nil, err
	}
	store, err := Open(db, opts...)
	if err != nil {
		return nil, err
	}
	if err := store.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("outboxgorm: %w", err)
	}
	cfg.Store, cfg.TxContext = store, tc
	return outbox.New(cfg)
}
