package outboxbun_test

import (
	"context"
	"errors"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
	"github.com/uptrace/bun"

	outboxbun "github.com/go-outbox/outbox/adapters/bun"
)

func TestCurrentErrors(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		outboxtest.WantNoTransaction(t, ctx, e.tc, "outboxbun.WithTx")

		// The caller's context, not the transaction's.
		err := e.db.RunInTx(ctx, nil, func(_ context.Context, tx bun.Tx) error {
			outboxtest.WantNoTransaction(t, outboxbun.WithTx(ctx, tx), e.tc, "db.WithQueryHook")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}

		// A database without the hook.
		bare := bun.NewDB(e.sqlDB, dialect(t, b))
		err = bare.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			outboxtest.WantNoTransaction(t, outboxbun.WithTx(ctx, tx), e.tc, "db.WithQueryHook")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}

		// The context of one transaction carrying another (of another
		// database: SQLite runs one write transaction at a time).
		otherDB := newEnv(t, b).db
		err = e.db.RunInTx(ctx, nil, func(ctx1 context.Context, tx1 bun.Tx) error {
			if _, err := e.tc.Current(outboxbun.WithTx(ctx1, tx1)); err != nil {
				return err
			}
			other, err := otherDB.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer other.Rollback()
			outboxtest.WantNoTransaction(t, outboxbun.WithTx(ctx1, other), e.tc, "not the one its context began")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}

		// A transaction that ended.
		txCtx, tx, err := e.tc.BeginTx(ctx, e.db, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		outboxtest.WantNoTransaction(t, txCtx, e.tc, "already ended")
	})
}

func TestBeginTxNeedsTheHook(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		bare := bun.NewDB(e.sqlDB, dialect(t, b))
		if _, _, err := e.tc.BeginTx(ctx, bare, nil); !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("BeginTx on a database without the hook = %v, want ErrInvalidConfig", err)
		}
		txCtx, tx, err := e.tc.BeginTx(ctx, e.db, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, _, err := e.tc.BeginTx(txCtx, tx, nil); !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("BeginTx on a bun.Tx (a savepoint) = %v, want ErrInvalidConfig", err)
		}
	})
}

// TestConnRunInTx runs a transaction on a dedicated bun.Conn.
func TestConnRunInTx(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		conn, err := e.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		committed := 0
		err = e.tc.RunInTx(ctx, conn, nil, func(ctx context.Context, _ bun.Tx) error {
			cur, err := e.tc.Current(ctx)
			if err != nil {
				return err
			}
			cur.AfterCommit(func() { committed++ })
			return nil
		})
		if err != nil || committed != 1 {
			t.Fatalf("RunInTx on a bun.Conn = %v with %d after-commit calls, want nil and 1", err, committed)
		}
	})
}

// TestRunInTxAfterEnd: a context that carries a transaction that ended
// carries none, so RunInTx begins a new transaction instead of nesting.
func TestRunInTxAfterEnd(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		e := newEnv(t, b)
		outboxtest.WantNewTxAfterEnd(t, e.tc, func(ctx context.Context, fn func(context.Context) error) error {
			return e.tc.RunInTx(ctx, e.db, nil, func(ctx context.Context, _ bun.Tx) error { return fn(ctx) })
		})
	})
}
