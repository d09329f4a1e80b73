package inbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/relay"
	"github.com/go-outbox/outbox/core/sqlstore"
)

// ErrInvalidID is wrapped by the error of Process for an event id the
// inbox cannot hold: empty, longer than MaxIDLen bytes, not UTF-8, or with
// a NUL byte.
var ErrInvalidID = errors.New("inbox: invalid event id")

// MaxIDLen is the longest event id, in bytes, that Process accepts.
const MaxIDLen = sqlstore.MaxInboxIDLen

// DefaultTable is the inbox table's name unless Config.Table sets another.
const DefaultTable = sqlstore.DefaultInboxTable

// Config configures an Inbox. New validates it.
type Config struct {
	// Store is a Store of the consumer's database, as outboxsql.Open and
	// the Open of the GORM, bun, sqlx and pgx adapters return it (required).
	// The inbox runs on its pool and speaks its dialect; the Store's own
	// outbox table plays no part and need not exist.
	Store *sqlstore.Store
	// TxContext finds the consumer's transaction in the context given to
	// Process (required): the TxContext the consumer's transactions run
	// under — outboxsql.TxManager, or an adapter's — as for the outbox
	// Client's writes.
	TxContext outbox.TxContext
	// Table is the inbox table's name (default DefaultTable), optionally
	// schema-qualified, validated like the outbox table's name. Consumers
	// that must each apply every event keep one table each.
	Table string
	// Clock stamps the processing time that Purge compares (default
	// outbox.SystemClock).
	Clock outbox.Clock
	// VerifyKeys, when set, are the keys the relaying sinks sign with
	// (their SigningKey; several while a key is changed, each at least
	// relay.MinKeyLen bytes). Messages then go through ProcessMessage,
	// which records an id only for a message whose signature one of them
	// gives (relay.Verify), so that a message forged with an upcoming
	// event's id is refused rather than recorded, and cannot make the real
	// event a duplicate; Process, which sees no message, fails.
	VerifyKeys [][]byte
}

// Inbox records the ids of the events a consumer has processed, in the
// consumer's own transaction, so that a redelivered event changes nothing:
// see Process. It is safe for concurrent use.
type Inbox struct {
	tab   *sqlstore.Inbox
	tc    outbox.TxContext
	clock outbox.Clock
	keys  [][]byte
}

// New validates cfg and returns an Inbox. It does not touch the database:
// call Migrate (or apply Schema) to create the table. Errors wrap
// outbox.ErrInvalidConfig.
func New(cfg Config) (*Inbox, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: inbox: Config.Store is required (outboxsql.Open or an adapter's Open)", outbox.ErrInvalidConfig)
	}
	if cfg.TxContext == nil {
		return nil, fmt.Errorf("%w: inbox: Config.TxContext is required (the consumer's transactions)", outbox.ErrInvalidConfig)
	}
	keys := make([][]byte, 0, len(cfg.VerifyKeys))
	for i, k := range cfg.VerifyKeys {
		if len(k) == 0 {
			return nil, fmt.Errorf("%w: inbox: VerifyKeys[%d] is empty", outbox.ErrInvalidConfig, i)
		}
		if err := relay.CheckKey(fmt.Sprintf("inbox: VerifyKeys[%d]", i), k); err != nil {
			return nil, err
		}
		keys = append(keys, append([]byte(nil), k...))
	}
	tab, err := sqlstore.NewInbox(cfg.Store, cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	in := &Inbox{tab: tab, tc: cfg.TxContext, clock: cfg.Clock, keys: keys}
	if in.clock == nil {
		in.clock = outbox.SystemClock
	}
	return in, nil
}

// Table returns the inbox table's name.
func (in *Inbox) Table() string { return in.tab.Table() }

// Schema returns the DDL statements that create the inbox table and its
// index, for users who run migrations with their own tools.
func (in *Inbox) Schema() []string { return in.tab.Schema() }

// Migrate creates the inbox table and its index if they do not exist. It
// is safe to run at every start.
func (in *Inbox) Migrate(ctx context.Context) error {
	if err := in.tab.Migrate(ctx); err != nil {
		return fmt.Errorf("inbox: %w", err)
	}
	return nil
}

// Process applies an event once: in the consumer's transaction — the one
// ctx carries, found by Config.TxContext — it records eventID in the inbox
// table and runs fn(ctx), so that fn's writes and the record commit or
// roll back together. If the id is recorded already, fn does not run and
// Process reports duplicate: the event was applied by an earlier delivery
// (acknowledge it to the broker and move on).
//
// Concurrent deliveries of one id in two transactions run fn once: the
// second transaction waits at the record until the first one ends, and is
// then a duplicate (the first committed) or runs fn itself (the first
// rolled back). This holds under READ COMMITTED and stricter isolation on
// PostgreSQL and MySQL/MariaDB, and on SQLite, whose write transactions
// run one at a time. PostgreSQL under REPEATABLE READ or SERIALIZABLE may
// fail the second with a serialization error instead, and InnoDB may end
// one of several transactions waiting for the same id with a deadlock
// error: such errors roll the transaction back, and the delivery is
// retried like any other that failed.
//
// If fn fails, Process takes the id back and returns fn's error (fn's own
// writes are the transaction's to roll back): return the error from the
// transaction's function so that it rolls back, and a redelivery applies
// the event. A panic in fn takes the id back and goes on. A nil fn only
// records the id.
//
// Without a transaction in ctx Process fails with an error wrapping
// outbox.ErrNoTransaction; with an id it cannot hold, ErrInvalidID; with
// Config.VerifyKeys set, relay.ErrSignature (use ProcessMessage). fn does
// not run then, nor when recording fails.
func (in *Inbox) Process(ctx context.Context, eventID string, fn func(ctx context.Context) error) (duplicate bool, err error) {
	if len(in.keys) > 0 {
		return false, fmt.Errorf("inbox: process %s: %w: Config.VerifyKeys is set and an id alone cannot be verified: use ProcessMessage", eventID, relay.ErrSignature)
	}
	return in.process(ctx, eventID, fn)
}

// ProcessMessage is Process for a relayed message: m.Headers (by exact
// name) and m.Payload as the broker delivered them. The event id is the
// relay.HeaderEventID header. With Config.VerifyKeys set, the message must
// carry a signature one of the keys gives (relay.Verify) before its id is
// recorded: a forged or changed message fails with an error wrapping
// relay.ErrSignature, records nothing and runs nothing, so the real
// message, delivered before or after it, is applied. Drop such a message
// (acknowledge it: a redelivery fails the same way) and alert on it.
func (in *Inbox) ProcessMessage(ctx context.Context, m relay.Message, fn func(ctx context.Context) error) (duplicate bool, err error) {
	id := m.Headers[relay.HeaderEventID]
	if len(in.keys) > 0 {
		if err := relay.Verify(in.keys, m.Headers, m.Payload); err != nil {
			return false, fmt.Errorf("inbox: message %q: %w", id, err)
		}
	}
	return in.process(ctx, id, fn)
}

func (in *Inbox) process(ctx context.Context, eventID string, fn func(ctx context.Context) error) (duplicate bool, err error) {
	if err := checkID(eventID); err != nil {
		return false, err
	}
	tx, err := in.tc.Current(ctx)
	if err != nil {
		return false, fmt.Errorf("inbox: process %s: %w", eventID, err)
	}
	stx, ok := tx.(sqlstore.Tx)
	if !ok {
		return false, fmt.Errorf("%w: inbox: the transaction (%T) carries no SQL connection: use the TxContext of outboxsql, of an ORM adapter or of outboxpgx",
			outbox.ErrInvalidConfig, tx)
	}
	conn := stx.Conn()
	fresh, err := in.tab.Record(ctx, conn, eventID, in.clock.Now().UTC())
	if err != nil {
		return false, fmt.Errorf("inbox: %w", err)
	}
	if !fresh {
		return true, nil
	}
	if fn == nil {
		return false, nil
	}
	done := false
	defer func() {
		if !done { // fn panicked: do not leave the id behind
			_ = in.tab.Forget(context.WithoutCancel(ctx), conn, eventID)
		}
	}()
	err = fn(ctx)
	done = true
	if err != nil {
		if fErr := in.tab.Forget(context.WithoutCancel(ctx), conn, eventID); fErr != nil {
			err = errors.Join(err, fmt.Errorf("inbox: the id of the failed event could not be taken back (roll the transaction back): %w", fErr))
		}
		return false, err
	}
	return false, nil
}

// checkID returns an error wrapping ErrInvalidID unless id is an id the
// inbox table holds.
func checkID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: the id is empty", ErrInvalidID)
	case len(id) > MaxIDLen:
		return fmt.Errorf("%w: the id has %d bytes, at most %d are kept", ErrInvalidID, len(id), MaxIDLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: the id %q is not UTF-8", ErrInvalidID, id)
	case strings.IndexByte(id, 0) >= 0:
		// As an envelope's event id: PostgreSQL refuses NUL in text, so
		// every delivery of such a message would fail the same way.
		return fmt.Errorf("%w: the id %q contains NUL", ErrInvalidID, id)
	}
	return nil
}

// Purge deletes at most limit ids processed before before, oldest first,
// and returns how many. A redelivery of a purged id is applied again, so
// keep ids longer than the broker may redeliver an event (its retention,
// or how long a message may wait unacknowledged) and the outbox may relay
// one again (its MaxAttempts of backoff, and replays of DEAD events).
func (in *Inbox) Purge(ctx context.Context, before time.Time, limit int) (int64, error) {
	n, err := in.tab.Purge(ctx, before, limit)
	if err != nil {
		return n, fmt.Errorf("inbox: %w", err)
	}
	return n, nil
}

// Purger returns the inbox as an outbox.Purger, so that the outbox's
// PurgeScheduler purges it after a retention, in bounded batches, at an
// interval:
//
//	purger, err := outbox.NewPurgeScheduler(outbox.PurgeConfig{Purger: in.Purger(), Retention: 14 * 24 * time.Hour})
//	err = purger.Start(ctx)
//	defer purger.Close(ctx)
//
// Its Purge deletes the ids processed before the cutoff for
// outbox.StatusDone (the Retention) and nothing for other statuses (an
// inbox has no dead events: DeadRetention does nothing) or for a tenant
// (the ids carry none).
func (in *Inbox) Purger() outbox.Purger { return purger{in} }

type purger struct{ in *Inbox }

func (p purger) Purge(ctx context.Context, req outbox.PurgeRequest) (int64, error) {
	if req.Status != outbox.StatusDone || req.TenantID != "" { // no dead records, no tenants
		return 0, nil
	}
	return p.in.Purge(ctx, req.Before, req.Limit)
}
