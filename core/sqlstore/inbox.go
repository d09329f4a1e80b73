package sqlstore

import (
	"context"
	"fmt"
	"time"
)

// DefaultInboxTable is the inbox table's name unless NewInbox is given
// another.
const DefaultInboxTable = "outbox_inbox"

// MaxInboxIDLen is the longest event id, in bytes, an inbox table holds.
const MaxInboxIDLen = 255

// Inbox is a consumer inbox table: the ids of the events a consumer has
// processed, each with the time it was processed. Record adds an id in the
// consumer's transaction and reports whether it was new; Purge forgets ids
// processed before a cutoff. Package inbox builds the consumer's API on it;
// most users never use it directly.
//
// The table lives in the database of a Store and is reached through that
// Store's pool and dialect; the Store's own table plays no part. Its DDL
// is embedded per dialect (schema/inbox_<dialect>.sql). An Inbox is safe
// for concurrent use.
type Inbox struct {
	sideTable
	// record inserts an id, skipping an existing one without failing the
	// statement where the dialect can (see dialect.onConflict); forget
	// deletes one id; purge deletes the oldest ids before a cutoff.
	record, forget, purge string
}

// NewInbox returns the inbox table named table (DefaultInboxTable when
// empty; validated like the outbox table's, see ValidateTableName) in the
// database of s. It does not touch the database: Migrate creates the
// table. Errors wrap outbox.ErrInvalidConfig.
func NewInbox(s *Store, table string) (*Inbox, error) {
	t, err := newSideTable(s, table, DefaultInboxTable, "inbox", "inbox")
	if err != nil {
		return nil, err
	}
	table = t.tab.table
	i := &Inbox{sideTable: t}
	i.record = s.d.rebind("INSERT INTO "+table+" (event_id, processed_at) VALUES (?, ?)"+s.d.skipConflict("event_id"), 1)
	i.forget = s.d.rebind("DELETE FROM "+table+" WHERE event_id = ?", 1)
	i.purge = inboxPurgeSQL(s.d, table)
	return i, nil
}

// inboxPurgeSQL returns the statement that deletes the ids processed
// before a cutoff, oldest first, at most a limit: its arguments are the
// cutoff and the limit.
func inboxPurgeSQL(d *dialect, table string) string {
	if d.limitedDelete {
		return "DELETE FROM " + table + " WHERE processed_at < ? ORDER BY processed_at LIMIT ?"
	}
	return d.rebind("DELETE FROM "+table+" WHERE "+d.inSubquery("SELECT event_id FROM "+table+
		" WHERE processed_at < ? ORDER BY processed_at LIMIT ?"), 1)
}

// Record adds id, processed at now, to the inbox through c — the
// consumer's transaction — and reports whether it was new. An id recorded
// already (committed, or written earlier in the same transaction) returns
// false and leaves the transaction usable on every database. While another
// transaction holds the same uncommitted id, Record waits for it to end:
// its commit makes the id a duplicate, its rollback makes it new. id must
// be 1 to MaxInboxIDLen bytes long.
func (i *Inbox) Record(ctx context.Context, c Conn, id string, now time.Time) (bool, error) {
	fresh, err := i.tab.insertNew(ctx, c, i.record, id, i.tab.t(now))
	if err != nil {
		return false, fmt.Errorf("sqlstore: inbox %s: record %s: %w", i.tab.table, id, i.tab.explain(err))
	}
	return fresh, nil
}

// Forget deletes id from the inbox through c, the transaction that
// recorded it, so that a later delivery of the event is new again.
func (i *Inbox) Forget(ctx context.Context, c Conn, id string) error {
	if _, err := c.Exec(ctx, i.forget, id); err != nil {
		return fmt.Errorf("sqlstore: inbox %s: forget %s: %w", i.tab.table, id, i.tab.explain(err))
	}
	return nil
}

// Purge deletes at most limit ids processed before before, oldest first,
// on the pool, and returns how many.
func (i *Inbox) Purge(ctx context.Context, before time.Time, limit int) (int64, error) {
	if limit <= 0 {
		return 0, nil
	}
	n, err := i.tab.w.Exec(ctx, i.purge, i.tab.t(before), limit)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: purge inbox %s: %w", i.tab.table, i.tab.explain(err))
	}
	return n, nil
}
