package main

import (
	"context"
	"fmt"
)

// The scenarios of ordered delivery (outbox.Config.Ordered):
//
//   - drain-ordered-kK: -drain-rows pending rows spread over K ordering
//     keys (row n on key n mod K, in insertion order) drained by an ordered
//     Client in ModePollerOnly, against the same Client unordered draining
//     the same backlog right before it (same rows, connections and
//     settings): the cost of claiming heads of keys instead of due rows.
//     Key counts below 1000 drain -drain-rows-few-keys rows: a key's events
//     go out one at a time, so few keys drain slowly by design.
//   - drain-ordered-kK-vs-raw (K below 1000): the same ordered drain against
//     the hand-written loop that keeps the order (drainRawOrdered): one
//     durable DONE write per event per key, the keys' writes batched — the
//     ceiling of what the guarantee allows on the database.
//   - e2e-hot-ordered: e2e-hot through an ordered Client (every event on
//     an aggregate of its own, so each takes the hot path after the
//     pending-keys look-up of its write) against the same scenario
//     unordered: rates and commit → listener latency side by side.

// drainOrdered runs drain-ordered for every key count of -ordered-keys.
func (e *env) drainOrdered(ctx context.Context, o options, rep *report) error {
	b, p := e.b, e.p
	conns := o.drainConns
	if conns == 0 {
		conns = 4
	}
	for _, keys := range o.orderedKeys {
		rows := o.drainRows
		if b.family == "mysql" && o.drainRowsMySQL > 0 {
			rows = o.drainRowsMySQL
		}
		if keys < 1000 {
			rows = min(rows, o.drainRowsFewKeys)
		}
		// Few keys: also the hand-written loop that keeps the order
		// (drainRawOrdered), the ordered Client's own baseline.
		names := []string{"framework", "framework-ordered"}
		if keys < 1000 {
			names = append(names, "raw-ordered")
		}
		sides := make([]run, len(names))
		for i, side := range names {
			for _, t := range []string{rawTable, fwTable} {
				if err := b.truncate(ctx, p, t); err != nil {
					return err
				}
			}
			if err := b.bulkLoad(ctx, p, fwTable, rows); err != nil {
				return fmt.Errorf("drain-ordered: bulk load: %w", err)
			}
			if side != "framework" {
				if err := b.setOrderingKeys(ctx, p, fwTable, keys); err != nil {
					return fmt.Errorf("drain-ordered: ordering keys: %w", err)
				}
			}
			if err := b.analyze(ctx, p, fwTable); err != nil {
				return fmt.Errorf("drain-ordered: analyze: %w", err)
			}
			o.orderedKeysNow = keys
			r, err := spawnDrain(ctx, o, b, side, rows, drainShape{batch: o.drainBatch, conns: conns})
			if err != nil {
				return fmt.Errorf("drain-ordered (%s): %w", side, err)
			}
			if r.n != int64(rows) {
				r.note = fmt.Sprintf("done=%d/%d", r.n, rows)
			}
			sides[i] = r
		}
		sides[0].addNote("unordered-framework")
		rep.add(result{db: b.name, scenario: fmt.Sprintf("drain-ordered-k%d", keys), conc: conns, fw: sides[1], raw: sides[0],
			rssKB: sides[1].rssKB, rawRSSKB: sides[0].rssKB})
		if len(sides) == 3 {
			sides[2].addNote("raw-ordered")
			rep.add(result{db: b.name, scenario: fmt.Sprintf("drain-ordered-k%d-vs-raw", keys), conc: conns, fw: sides[1], raw: sides[2],
				rssKB: sides[1].rssKB, rawRSSKB: sides[2].rssKB})
		}
	}
	return nil
}

// setOrderingKeys gives the rows of table, loaded by bulkLoad (aggregate
// ids o-1, o-2, …, in insertion order), the ordering keys k0 … k(keys-1),
// round robin in insertion order.
func (b backend) setOrderingKeys(ctx context.Context, p pool, table string, keys int) error {
	var q string
	switch b.family {
	case "postgres":
		q = fmt.Sprintf("UPDATE %s SET ordering_key = 'k' || (CAST(substr(aggregate_id, 3) AS BIGINT) %% %d)", table, keys)
	case "mysql":
		q = fmt.Sprintf("UPDATE %s SET ordering_key = CONCAT('k', CAST(SUBSTRING(aggregate_id, 3) AS UNSIGNED) %% %d)", table, keys)
	default:
		q = fmt.Sprintf("UPDATE %s SET ordering_key = 'k' || (CAST(substr(aggregate_id, 3) AS INTEGER) %% %d)", table, keys)
	}
	_, err := p.exec(ctx, q)
	return err
}

// e2eOrdered runs e2e-hot-ordered: -pairs pairs of the ordered Client
// and the unordered one, the median pair reported.
func (e *env) e2eOrdered(ctx context.Context, o options, rep *report) error {
	return rep.addPairs(e.b.name, fmt.Sprintf("e2e-hot-ordered-c%d", o.e2eWriters), o.e2eWriters, o.pairs, "ordered", []string{"unordered"}, "unordered-framework",
		func(side string) (run, error) {
			return e.e2eFramework(ctx, o.e2eWriters, o.duration, variant{ordered: side == "ordered"})
		})
}
