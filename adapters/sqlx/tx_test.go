package outboxsqlx_test

import (
	"context"
	"database/sql/driver"
	"strings"
	"testing"

	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
	"github.com/jmoiron/sqlx"

	outboxsqlx "github.com/go-outbox/outbox/adapters/sqlx"
)

func TestCurrentErrors(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		outboxtest.WantNoTransaction(t, ctx, e.tc, "outboxsqlx.WithTx")

		// A transaction of a database not opened through outboxsqlx.
		tx := e.plain.MustBegin()
		outboxtest.WantNoTransaction(t, outboxsqlx.WithTx(ctx, tx), e.tc, "does not report its commit")
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}

		// A transaction that ended.
		tx = e.db.MustBegin()
		txCtx := outboxsqlx.WithTx(ctx, tx)
		if _, err := e.tc.Current(txCtx); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		outboxtest.WantNoTransaction(t, txCtx, e.tc, "already ended")

		// Transactions that ended before Current first saw them, of a
		// database opened through outboxsqlx and of one that is not.
		for _, db := range []*sqlx.DB{e.db, e.plain} {
			tx = db.MustBegin()
			txCtx = outboxsqlx.WithTx(ctx, tx)
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			outboxtest.WantNoTransaction(t, txCtx, e.tc, "already ended")
		}
	})
}

// TestInTxAfterEnd: a context that carries a transaction that ended
// carries none, so InTx begins a new transaction instead of nesting.
func TestInTxAfterEnd(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		e := newEnv(t, b)
		for _, db := range []*sqlx.DB{e.db, e.plain} {
			outboxtest.WantNewTxAfterEnd(t, e.tc, func(ctx context.Context, fn func(context.Context) error) error {
				return outboxsqlx.NewTxManager(db, outboxsqlx.WithLogger(quietLogger)).InTx(ctx, fn)
			})
		}
	})
}

// TestBeginxCommitRunsCallbacks uses sqlx's Beginx and database/sql's own
// BeginTx, then Commit and Rollback, with no helper.
func TestBeginxCommitRunsCallbacks(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		var got []string
		tx, err := e.db.Beginx()
		if err != nil {
			t.Fatal(err)
		}
		cur, err := e.tc.Current(outboxsqlx.WithTx(ctx, tx))
		if err != nil {
			t.Fatal(err)
		}
		cur.AfterCommit(func() { got = append(got, "commit") })
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		sqlTx, err := e.db.DB.BeginTx(ctx, nil) // database/sql's own
		if err != nil {
			t.Fatal(err)
		}
		_ = sqlTx.Rollback()
		tx = e.db.MustBeginTx(ctx, nil)
		cur, err = e.tc.Current(outboxsqlx.WithTx(ctx, tx))
		if err != nil {
			t.Fatal(err)
		}
		cur.AfterRollback(func() { got = append(got, "rollback") })
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, ",") != "commit,rollback" {
			t.Fatalf("callbacks ran %v, want commit then rollback", got)
		}
	})
}

func TestOpenDB(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		db := openTracked(t, b)
		if _, err := outboxsql.Open(db.DB); err != nil {
			t.Errorf("outboxsql.Open on a database opened through outboxsqlx: %v", err)
		}
		conn, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		err = conn.Raw(func(dc any) error {
			u, ok := dc.(interface{ Unwrap() driver.Conn })
			if !ok || u.Unwrap() == nil {
				t.Errorf("the raw connection %T does not unwrap to the driver's", dc)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.PingContext(context.Background()); err != nil {
			t.Errorf("ping: %v", err)
		}
	})
	if _, err := outboxsqlx.OpenDB("no-such-driver", ""); err == nil {
		t.Error("OpenDB with an unknown driver succeeded")
	}
	if _, err := outboxsqlx.Connect(context.Background(), "mysql", "root@tcp(127.0.0.1:1)/none"); err == nil {
		t.Error("Connect to a closed port succeeded")
	}
}
