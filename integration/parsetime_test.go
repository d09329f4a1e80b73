package integration

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
)

// TestMySQLWithoutParseTime: a pool whose DSN lacks parseTime=true, so that
// the driver returns DATETIME columns as text, opens, migrates and delivers
// an event whose first delivery fails: the retry is claimed by the poller
// (the claim reads the row's timestamps) and the event ends DONE after two
// attempts, with timestamps read back as the UTC instants written.
func TestMySQLWithoutParseTime(t *testing.T) {
	outboxsqltest.RunAll(t, func(t *testing.T, b outboxsqltest.Backend) {
		if b.Dialect != outboxsql.MySQL {
			t.Skip("a MySQL DSN option")
		}
		ctx := context.Background()
		db := openDSN(t, b, withoutDSNParam(b.DSN(t), "parseTime"))
		f := fixtureOn(t, b, db)
		var calls atomic.Int32
		startNode(t, f, outbox.Config{
			PollInterval: 20 * time.Millisecond,
			RetryPolicy:  outbox.RetryPolicyFunc(func(int) time.Duration { return time.Millisecond }),
		}, func(context.Context, outbox.Envelope) error {
			if calls.Add(1) == 1 {
				return errors.New("the first delivery fails")
			}
			return nil
		})
		e := pingEvent(t)
		written := time.Now().UTC()
		if err := f.InTx(ctx, func(ctx context.Context) error {
			tx, err := f.TxContext.Current(ctx)
			if err != nil {
				return err
			}
			return f.Store.Insert(ctx, tx, written, "", []outbox.Envelope{e})
		}); err != nil {
			t.Fatal(err)
		}
		var rec outbox.Record
		outboxtest.Eventually(t, 30*time.Second, "the event DONE after a retry", func() bool {
			recs, err := f.Store.List(ctx, outbox.Query{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if r.ID == e.ID() && r.Status == outbox.StatusDone {
					rec = r
					return true
				}
			}
			return false
		})
		if n := calls.Load(); n != 2 {
			t.Fatalf("DONE after %d deliveries, want 2", n)
		}
		if want := written.Truncate(time.Microsecond); !rec.CreatedAt.Equal(want) || rec.CreatedAt.Location() != time.UTC {
			t.Fatalf("created_at reads %v, want %v in UTC", rec.CreatedAt, want)
		}
	})
}
