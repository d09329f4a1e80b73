package inbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/inbox"
	"github.com/go-outbox/outbox/core/outboxmem"
	"github.com/go-outbox/outbox/core/relay"
	"github.com/go-outbox/outbox/core/sqlstore"
)

// The tests here need no database: they cover what Process and New refuse
// before any SQL runs. The inbox on real databases is tested by the suite
// of package inboxtest, which the integration module and every adapter run.

// noSQL is a sqlstore.DB that refuses to run anything.
type noSQL struct{ t *testing.T }

func (d noSQL) Exec(context.Context, string, ...any) (int64, error) {
	d.t.Error("no SQL may run")
	return 0, errors.New("no SQL")
}

func (d noSQL) Query(context.Context, string, ...any) (sqlstore.Rows, error) {
	d.t.Error("no SQL may run")
	return nil, errors.New("no SQL")
}

func (d noSQL) ReadCommitted(context.Context, func(sqlstore.Conn) error) error {
	d.t.Error("no SQL may run")
	return errors.New("no SQL")
}

func store(t *testing.T) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.New(noSQL{t}, sqlstore.WithDialect(sqlstore.PostgreSQL))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// txContext is a TxContext that must not be asked.
type txContext struct{ t *testing.T }

func (tc txContext) Current(context.Context) (outbox.Tx, error) {
	tc.t.Error("no transaction may be looked up")
	return nil, outbox.ErrNoTransaction
}

func TestNewValidates(t *testing.T) {
	for name, cfg := range map[string]inbox.Config{
		"no Store":            {TxContext: txContext{t}},
		"no TxContext":        {Store: store(t)},
		"bad table name":      {Store: store(t), TxContext: txContext{t}, Table: "inbox; DROP TABLE orders"},
		"the outbox table":    {Store: store(t), TxContext: txContext{t}, Table: sqlstore.DefaultTable},
		"index name too long": {Store: store(t), TxContext: txContext{t}, Table: strings.Repeat("x", 60)},
		"short VerifyKeys":    {Store: store(t), TxContext: txContext{t}, VerifyKeys: [][]byte{key, key[:31]}},
		"empty VerifyKeys":    {Store: store(t), TxContext: txContext{t}, VerifyKeys: [][]byte{nil}},
	} {
		if in, err := inbox.New(cfg); in != nil || !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("%s: New = %v, %v; want ErrInvalidConfig", name, in, err)
		}
	}
	in, err := inbox.New(inbox.Config{Store: store(t), TxContext: txContext{t}})
	if err != nil {
		t.Fatal(err)
	}
	if in.Table() != inbox.DefaultTable || len(in.Schema()) != 2 || !strings.Contains(in.Schema()[0], inbox.DefaultTable) {
		t.Fatalf("defaults: table %q, schema %q", in.Table(), in.Schema())
	}
}

func TestProcessRefusesInvalidIDs(t *testing.T) {
	in, err := inbox.New(inbox.Config{Store: store(t), TxContext: txContext{t}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", strings.Repeat("x", inbox.MaxIDLen+1), "\xff", "id\x00with-nul"} {
		dup, err := in.Process(context.Background(), id, func(context.Context) error {
			t.Errorf("the consumer ran for the id %q", id)
			return nil
		})
		if dup || !errors.Is(err, inbox.ErrInvalidID) {
			t.Errorf("Process(%q) = %v, %v; want ErrInvalidID", id, dup, err)
		}
	}
}

// key is a signing key of the relaying sinks.
var key = []byte("0123456789abcdef0123456789abcdef")

// TestVerifyingInboxRefusesUnverifiedMessages: with VerifyKeys, a message
// whose signature no key gives, and a bare id (Process), are refused
// before any SQL runs, and the consumer does not run.
func TestVerifyingInboxRefusesUnverifiedMessages(t *testing.T) {
	in, err := inbox.New(inbox.Config{Store: store(t), TxContext: txContext{t}, VerifyKeys: [][]byte{key}})
	if err != nil {
		t.Fatal(err)
	}
	consumer := func(context.Context) error {
		t.Error("the consumer ran")
		return nil
	}
	e := outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithJSON([]byte(`{}`)))
	m, err := relay.NATS.Message(e, nil, []byte(strings.Repeat("o", relay.MinKeyLen)))
	if err != nil {
		t.Fatal(err)
	}
	unsigned, err := relay.NATS.Message(e, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]relay.Message{"another key": m, "unsigned": unsigned} {
		if dup, err := in.ProcessMessage(context.Background(), m, consumer); dup || !errors.Is(err, relay.ErrSignature) {
			t.Errorf("%s: ProcessMessage = %v, %v; want relay.ErrSignature", name, dup, err)
		}
	}
	if dup, err := in.Process(context.Background(), e.ID(), consumer); dup || !errors.Is(err, relay.ErrSignature) {
		t.Errorf("Process = %v, %v; want relay.ErrSignature", dup, err)
	}
}

func TestProcessNeedsASQLTransaction(t *testing.T) {
	mem := outboxmem.New()
	in, err := inbox.New(inbox.Config{Store: store(t), TxContext: mem})
	if err != nil {
		t.Fatal(err)
	}
	consumer := func(context.Context) error {
		t.Error("the consumer ran")
		return nil
	}
	if _, err := in.Process(context.Background(), "evt-1", consumer); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Errorf("Process without a transaction = %v, want ErrNoTransaction", err)
	}
	err = mem.InTx(context.Background(), func(ctx context.Context) error {
		_, err := in.Process(ctx, "evt-1", consumer)
		return err
	})
	if !errors.Is(err, outbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "no SQL connection") {
		t.Errorf("Process in a transaction without SQL = %v, want ErrInvalidConfig", err)
	}
}

func TestPurgerPurgesOnlyDone(t *testing.T) {
	in, err := inbox.New(inbox.Config{Store: store(t), TxContext: txContext{t}})
	if err != nil {
		t.Fatal(err)
	}
	// DEAD and a zero limit run no SQL (noSQL fails the test if they did).
	for _, status := range []outbox.Status{outbox.StatusDead, outbox.StatusNew} {
		if n, err := in.Purger().Purge(context.Background(), outbox.PurgeRequest{Status: status, Before: time.Now(), Limit: 10}); n != 0 || err != nil {
			t.Errorf("Purge(%s) = %d, %v; want 0", status, n, err)
		}
	}
	if n, err := in.Purge(context.Background(), time.Now(), 0); n != 0 || err != nil {
		t.Errorf("Purge with limit 0 = %d, %v", n, err)
	}
}
