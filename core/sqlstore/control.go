package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	outbox "github.com/go-outbox/outbox/core"
)

var (
	_ outbox.Controls  = (*Store)(nil)
	_ outbox.Overrides = (*Store)(nil)
)

// The control tables (outbox.Controls) live beside the outbox table, in
// its database, named after it: <table>_pauses, <table>_nodes and
// <table>_audit (schema/control_<dialect>.sql). They are part of the
// store's schema: Migrate creates them, Schema lists their DDL.
const (
	pausesSuffix = "_pauses"
	nodesSuffix  = "_nodes"
	auditSuffix  = "_audit"
)

// Bounds of the control tables' columns, in bytes, beside the outbox
// package's (MaxEventTypeLen, MaxActorLen, MaxReasonLen).
const (
	maxNodeOwnerLen = 128 // the width of locked_by
	maxNodeModeLen  = 64
	maxActionLen    = 64
)

// controlSQL holds the statements of the control tables and of the
// overrides, built once by buildControl.
type controlSQL struct {
	pauses, nodes, audit              string // the tables' names
	schema                            []string
	setPause, deletePause, listPauses string
	beat, forget, leave, listNodes    string
	appendAudit, auditPage            string
	// forceDead and skipPending end pending events (see Overrides).
	forceDead, skipPending *idsSQL
}

// endSet is the SET clause, without its status, of a statement that ends
// events undelivered (a skip, a forced DEAD): the completion time and
// the last error, bound in this order, and no claim.
const endSet = "done_at = ?, last_error = ?, locked_by = NULL, locked_at = NULL"

// buildControl returns the control tables' statements and DDL for the
// (validated) outbox table of d. It checks their names as the database
// will hold them: the error wraps outbox.ErrInvalidConfig.
func buildControl(d *dialect, table string) (*controlSQL, error) {
	c := &controlSQL{pauses: table + pausesSuffix, nodes: table + nodesSuffix, audit: table + auditSuffix}
	for _, name := range []string{c.pauses, c.nodes, c.audit} {
		if err := checkDerivedTable(d, table, name); err != nil {
			return nil, err
		}
	}
	spec := *d
	spec.schemaFile = "schema/control_" + d.name + ".sql"
	schema, err := renderSchema(&spec, table)
	if err != nil {
		return nil, err
	}
	c.schema = schema
	c.setPause = d.rebind("INSERT INTO "+c.pauses+" (scope, paused_by, reason, paused_at) VALUES (?, ?, ?, ?)"+
		d.upsert("scope", []string{"paused_by", "reason", "paused_at"}), 1)
	c.deletePause = d.rebind("DELETE FROM "+c.pauses+" WHERE scope = ?", 1)
	c.listPauses = "SELECT scope, paused_by, reason, paused_at FROM " + c.pauses + " ORDER BY scope"
	c.beat = d.rebind("INSERT INTO "+c.nodes+" (owner, mode, types, started_at, seen_at) VALUES (?, ?, ?, ?, ?)"+
		d.upsert("owner", []string{"mode", "types", "started_at", "seen_at"}), 1)
	c.forget = d.rebind("DELETE FROM "+c.nodes+" WHERE seen_at < ?", 1)
	c.leave = d.rebind("DELETE FROM "+c.nodes+" WHERE owner = ?", 1)
	c.listNodes = d.rebind("SELECT owner, mode, types, started_at, seen_at FROM "+c.nodes+" WHERE seen_at >= ? ORDER BY owner", 1)
	c.appendAudit = "INSERT INTO " + c.audit + " (acted_at, actor, action, target, reason, event_count) VALUES (?, ?, ?, ?, ?, ?)"
	if d.lastInsertID == "" {
		c.appendAudit += " RETURNING id"
	}
	c.appendAudit = d.rebind(c.appendAudit, 1)
	c.auditPage = d.rebind("SELECT id, acted_at, actor, action, target, reason, event_count FROM "+c.audit+
		" WHERE id < ? ORDER BY id DESC LIMIT ?", 1)
	c.forceDead = newIDsSQL(d, "UPDATE "+table+" SET status = 3, "+endSet+" WHERE status IN (0, 2) AND ")
	c.skipPending = newIDsSQL(d, "UPDATE "+table+" SET status = 1, "+endSet+" WHERE status IN (0, 2) AND ")
	return c, nil
}

// checkDerivedTable checks name, a table named after the outbox table
// table (a valid name with a suffix of letters and underscores, which no
// database reserves), against the dialect's identifier limit, as
// checkIdentifiers checks the index names.
func checkDerivedTable(d *dialect, table, name string) error {
	part := name[strings.IndexByte(name, '.')+1:]
	if d.maxIdent > 0 && len(part) > d.maxIdent {
		return fmt.Errorf("%w: sqlstore: table name %q is too long for %s: its control table %s would have %d characters, %s keeps %d (shorten the table name by %d)",
			outbox.ErrInvalidConfig, table, d.name, part, len(part), d.name, d.maxIdent, len(part)-d.maxIdent)
	}
	return nil
}

// excludedUpsert is dialect.upsert of PostgreSQL and SQLite.
func excludedUpsert(key string, cols []string) string {
	set := make([]string, len(cols))
	for i, c := range cols {
		set[i] = c + " = excluded." + c
	}
	return " ON CONFLICT (" + key + ") DO UPDATE SET " + strings.Join(set, ", ")
}

// mysqlUpsert is dialect.upsert of MySQL and MariaDB (VALUES(col), which
// both read; MariaDB lacks MySQL's row alias).
func mysqlUpsert(_ string, cols []string) string {
	set := make([]string, len(cols))
	for i, c := range cols {
		set[i] = c + " = VALUES(" + c + ")"
	}
	return " ON DUPLICATE KEY UPDATE " + strings.Join(set, ", ")
}

// ControlTables returns the names of the control tables beside the
// outbox table: the pauses, the nodes, the audit trail and, on the
// databases without notifications, the wake-up signal (see Wake).
func (s *Store) ControlTables() []string {
	tables := []string{s.ctl.pauses, s.ctl.nodes, s.ctl.audit}
	if s.wk.table != "" {
		tables = append(tables, s.wk.table)
	}
	return tables
}

// controlErr wraps err, an error of the control table table, with what
// failed; a missing table wraps ErrNoTable with a hint.
func (s *Store) controlErr(what, table string, err error) error {
	if s.d.missingTable != nil && s.d.missingTable(err) {
		err = &noTableError{table: table, err: err}
	}
	return fmt.Errorf("sqlstore: %s in %s: %w", what, table, err)
}

// textField is a value written into a control table: what names it in
// errors, max bounds it in bytes.
type textField struct {
	what, v string
	max     int
}

// checkTexts checks values written into a control table: valid UTF-8
// without NUL (which some databases refuse in text), each at most its
// bound. The outbox package writes only such values; the error wraps
// outbox.ErrInvalidConfig.
func checkTexts(fields ...textField) error {
	for _, f := range fields {
		if len(f.v) > f.max || !utf8.ValidString(f.v) || strings.IndexByte(f.v, 0) >= 0 {
			return fmt.Errorf("%w: sqlstore: %s must be valid UTF-8 text without NUL of at most %d bytes (got %d bytes)",
				outbox.ErrInvalidConfig, f.what, f.max, len(f.v))
		}
	}
	return nil
}

// SetPause stores p, replacing the pause of its scope if there is one.
func (s *Store) SetPause(ctx context.Context, p outbox.Pause) error {
	if err := checkTexts(textField{"a pause's scope", p.Scope, outbox.MaxEventTypeLen},
		textField{"a pause's actor", p.By, outbox.MaxActorLen}, textField{"a pause's reason", p.Reason, outbox.MaxReasonLen}); err != nil {
		return err
	}
	if _, err := s.w.Exec(ctx, s.ctl.setPause, p.Scope, p.By, p.Reason, s.t(p.At)); err != nil {
		return s.controlErr(fmt.Sprintf("pause %q", p.Scope), s.ctl.pauses, err)
	}
	return nil
}

// DeletePause removes the pause of scope and reports whether there was one.
func (s *Store) DeletePause(ctx context.Context, scope string) (bool, error) {
	n, err := s.w.Exec(ctx, s.ctl.deletePause, scope)
	if err != nil {
		return false, s.controlErr(fmt.Sprintf("resume %q", scope), s.ctl.pauses, err)
	}
	return n > 0, nil
}

// Pauses returns every stored pause, by scope.
func (s *Store) Pauses(ctx context.Context) ([]outbox.Pause, error) {
	var out []outbox.Pause
	err := s.eachRow(ctx, s.ctl.listPauses, nil, func(rows Rows) error {
		var scope, by, reason nullBytes
		at := timeCol{d: s.d}
		if err := rows.Scan(&scope, &by, &reason, &at); err != nil {
			return err
		}
		if at.err != nil {
			return at.err
		}
		out = append(out, outbox.Pause{Scope: scope.s, By: by.s, Reason: reason.s, At: at.t})
		return nil
	})
	if err != nil {
		return nil, s.controlErr("list the pauses", s.ctl.pauses, err)
	}
	return out, nil
}

// Beat records n (by its Owner) as seen at n.Seen, and forgets the nodes
// last seen before forgetBefore (none when it is zero). Of n.Types it
// keeps at most outbox.MaxNodeTypes, sorted: a node with more is kept as
// routing every type (nil).
func (s *Store) Beat(ctx context.Context, n outbox.Node, forgetBefore time.Time) error {
	fields := []textField{{"a node's owner", n.Owner, maxNodeOwnerLen}, {"a node's mode", n.Mode, maxNodeModeLen}}
	types := nodeTypes(n.Types)
	for _, t := range types {
		fields = append(fields, textField{"a node's event type", t, outbox.MaxEventTypeLen})
	}
	if err := checkTexts(fields...); err != nil {
		return err
	}
	var list any // NULL: every type
	if types != nil {
		b, err := json.Marshal(types)
		if err != nil {
			return fmt.Errorf("sqlstore: beat of %q: %w", n.Owner, err)
		}
		list = string(b)
	}
	if _, err := s.w.Exec(ctx, s.ctl.beat, n.Owner, n.Mode, list, s.t(n.Started), s.t(n.Seen)); err != nil {
		return s.controlErr(fmt.Sprintf("beat of %q", n.Owner), s.ctl.nodes, err)
	}
	if forgetBefore.IsZero() {
		return nil
	}
	if _, err := s.w.Exec(ctx, s.ctl.forget, s.t(forgetBefore)); err != nil {
		return s.controlErr("forget the nodes gone", s.ctl.nodes, err)
	}
	return nil
}

// nodeTypes returns the event types the control tables keep of a node
// that routes types: sorted, without repeats; nil (every type) for nil or
// more than outbox.MaxNodeTypes.
func nodeTypes(types []string) []string {
	if types == nil || len(types) > outbox.MaxNodeTypes {
		return nil
	}
	out := slices.Clone(types)
	slices.Sort(out)
	return slices.Compact(out)
}

// Leave forgets the node owner (its Client closed).
func (s *Store) Leave(ctx context.Context, owner string) error {
	if _, err := s.w.Exec(ctx, s.ctl.leave, owner); err != nil {
		return s.controlErr(fmt.Sprintf("leave of %q", owner), s.ctl.nodes, err)
	}
	return nil
}

// Nodes returns the nodes seen at or after since, by owner.
func (s *Store) Nodes(ctx context.Context, since time.Time) ([]outbox.Node, error) {
	var out []outbox.Node
	err := s.eachRow(ctx, s.ctl.listNodes, []any{s.t(since)}, func(rows Rows) error {
		var owner, mode, types nullBytes
		started, seen := timeCol{d: s.d}, timeCol{d: s.d}
		if err := rows.Scan(&owner, &mode, &types, &started, &seen); err != nil {
			return err
		}
		if err := errors.Join(started.err, seen.err); err != nil {
			return err
		}
		n := outbox.Node{Owner: owner.s, Mode: mode.s, Started: started.t, Seen: seen.t}
		if types.valid {
			n.Types = []string{}
			if err := json.Unmarshal([]byte(types.s), &n.Types); err != nil {
				return fmt.Errorf("the types of node %q: %w", owner.s, err)
			}
			n.Types = nodeTypes(n.Types) // as Beat keeps them, whoever wrote the row
		}
		out = append(out, n)
		return nil
	})
	if err != nil {
		return nil, s.controlErr("list the nodes", s.ctl.nodes, err)
	}
	return out, nil
}

// AppendAudit records e, assigning its ID, and returns it.
func (s *Store) AppendAudit(ctx context.Context, e outbox.AuditEntry) (int64, error) {
	if err := checkTexts(textField{"an audit entry's actor", e.Actor, outbox.MaxActorLen}, textField{"an audit entry's action", e.Action, maxActionLen},
		textField{"an audit entry's target", e.Target, outbox.MaxReasonLen}, textField{"an audit entry's reason", e.Reason, outbox.MaxReasonLen}); err != nil {
		return 0, err
	}
	args := []any{s.t(e.At), e.Actor, e.Action, e.Target, e.Reason, e.Count}
	var id int64
	var err error
	if s.d.lastInsertID == "" {
		id, err = scanInt(ctx, s.w, s.ctl.appendAudit, args...)
	} else {
		// The id generated on the connection of the INSERT.
		err = s.db.ReadCommitted(ctx, func(tx Conn) error {
			if _, err := tx.Exec(ctx, s.ctl.appendAudit, args...); err != nil {
				return err
			}
			id, err = scanInt(ctx, tx, s.d.lastInsertID)
			return err
		})
	}
	if err != nil {
		return 0, s.controlErr(fmt.Sprintf("record %q", e.Action), s.ctl.audit, err)
	}
	return id, nil
}

// DefaultAuditLimit is how many entries Audit returns when
// AuditQuery.Limit is zero.
const DefaultAuditLimit = 100

// Audit returns the entries q selects, newest first: at most q.Limit
// (DefaultAuditLimit when zero), with an id below q.BeforeID when set.
// The trail is kept: no purge deletes it.
func (s *Store) Audit(ctx context.Context, q outbox.AuditQuery) ([]outbox.AuditEntry, error) {
	before, limit := q.BeforeID, q.Limit
	if before <= 0 {
		before = math.MaxInt64
	}
	if limit <= 0 {
		limit = DefaultAuditLimit
	}
	var out []outbox.AuditEntry
	err := s.eachRow(ctx, s.ctl.auditPage, []any{before, limit}, func(rows Rows) error {
		var e outbox.AuditEntry
		var actor, action, target, reason nullBytes
		at := timeCol{d: s.d}
		if err := rows.Scan(&e.ID, &at, &actor, &action, &target, &reason, &e.Count); err != nil {
			return err
		}
		if at.err != nil {
			return at.err
		}
		e.At, e.Actor, e.Action, e.Target, e.Reason = at.t, actor.s, action.s, target.s, reason.s
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, s.controlErr("read the audit trail", s.ctl.audit, err)
	}
	return out, nil
}

// scanInt runs query, which returns one integer, on c.
func scanInt(ctx context.Context, c Conn, query string, args ...any) (int64, error) {
	rows, err := c.Query(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	var n int64
	if !rows.Next() {
		err = errors.New("no row returned")
	} else {
		err = rows.Scan(&n)
	}
	return n, errors.Join(err, rows.Err(), rows.Close())
}

// ForceDead moves pending events (NEW or RETRY, claimed or not) to DEAD
// at now, recording note (truncated to outbox.MaxErrorLen characters) as
// their last error, and returns how many rows changed. Their claims are
// dropped, so that a delivery running meanwhile stores no outcome. Like
// MarkDead's, a forced DEAD event of an ordering key holds back the
// events behind it (outbox.DeadBlocksKey): the ordered claim parks them
// when its walk meets them.
func (s *Store) ForceDead(ctx context.Context, ids []string, now time.Time, note string) (int64, error) {
	n, err := s.execIDs(ctx, s.ctl.forceDead, []any{s.t(now), outbox.TruncateError(note)}, ids)
	if err != nil {
		return n, fmt.Errorf("sqlstore: force dead in %s: %w", s.table, s.explain(err))
	}
	return n, nil
}

// Remove deletes events in any status and returns how many rows it
// removed. Like Delete, it reparks their keys: the events a removed DEAD
// event held back are claimable again.
func (s *Store) Remove(ctx context.Context, ids []string) (int64, error) {
	n, err := s.endingDead(ctx, ids, func() (int64, error) { return s.execIDs(ctx, s.q.undoInsert, nil, ids) })
	if err != nil {
		return n, fmt.Errorf("sqlstore: remove from %s: %w", s.table, s.explain(err))
	}
	return n, nil
}

// SkipPending moves pending events (claimed or not) to DONE at now
// without delivering them, records note (truncated to outbox.MaxErrorLen
// characters) as their last error, and returns how many rows changed.
// Like Skip, it reparks their keys: the later events of a skipped head go
// on.
func (s *Store) SkipPending(ctx context.Context, ids []string, now time.Time, note string) (int64, error) {
	n, err := s.endingDead(ctx, ids, func() (int64, error) {
		return s.execIDs(ctx, s.ctl.skipPending, []any{s.t(now), outbox.TruncateError(note)}, ids)
	})
	if err != nil {
		return n, fmt.Errorf("sqlstore: skip pending in %s: %w", s.table, s.explain(err))
	}
	return n, nil
}
