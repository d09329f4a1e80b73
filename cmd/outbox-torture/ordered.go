package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
)

// skipNote is the reason the coordinator gives for the DEAD events it
// skips under -ordered.
const skipNote = "outbox-torture: the operator skips a DEAD event that blocks its key"

// operator plays the operator of an ordered outbox: it skips, through the
// dead-letter API, every DEAD event that blocks its key — except the
// poison probe, which must stay DEAD — so that the events behind it go on.
type operator struct {
	c      config
	client *outbox.Client
	mu     sync.Mutex
	ids    map[string]bool // skipped
	stop   context.CancelFunc
	done   chan struct{}
}

func startOperator(ctx context.Context, c config, db *sql.DB) (*operator, error) {
	store, err := outboxsql.Open(db, outboxsql.WithTable(outboxTable))
	if err != nil {
		return nil, err
	}
	client, err := outbox.New(outbox.Config{Store: store, TxContext: outboxsql.NewTxManager(db), Mode: outbox.ModeWriterOnly, Ordered: true})
	if err != nil {
		return nil, err
	}
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	o := &operator{c: c, client: client, ids: map[string]bool{}, stop: cancel, done: make(chan struct{})}
	go o.run(ctx)
	return o, nil
}

func (o *operator) run(ctx context.Context) {
	defer close(o.done)
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		blocking, err := o.client.Dead().List(ctx, outbox.Query{Blocking: true, Limit: 500})
		if err != nil {
			continue // connections are being cut: next time
		}
		for _, r := range blocking {
			if r.ID == o.c.poisonID {
				continue
			}
			if err := o.client.Dead().Skip(ctx, r.ID, skipNote); err == nil {
				o.mu.Lock()
				o.ids[r.ID] = true
				o.mu.Unlock()
			}
		}
	}
}

// close stops the operator and returns the ids it skipped.
func (o *operator) close(ctx context.Context) map[string]bool {
	o.stop()
	<-o.done
	_ = o.client.Close(ctx)
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ids
}

// orderViolations counts the ordered events with a delivery that started
// before the event written before them on their key (by the table's
// sequence) was DONE, or while it was not DONE at all. Skipped events are
// DONE at their skip. -1 if it cannot tell.
func (co *coordinator) orderViolations(ctx context.Context) int {
	store, err := outboxsql.Open(co.db, outboxsql.WithTable(outboxTable))
	if err != nil {
		fmt.Fprintln(os.Stderr, "torture: order check:", err)
		return -1
	}
	byKey := map[string][]outbox.Record{}
	q := outbox.Query{Limit: 1000}
	for {
		recs, err := store.List(ctx, q)
		if err != nil {
			fmt.Fprintln(os.Stderr, "torture: order check: list:", err)
			return -1
		}
		for _, r := range recs {
			if r.Err == nil && r.Envelope.OrderingKey() != "" { // by aggregate: so that an unordered run would show violations
				byKey[r.Envelope.OrderingKey()] = append(byKey[r.Envelope.OrderingKey()], r)
			}
		}
		if len(recs) < q.Limit {
			break
		}
		q.AfterID = recs[len(recs)-1].ID
	}
	starts := map[string][]int64{}
	rows, err := co.db.QueryContext(ctx, "SELECT event_id, start_us FROM "+startsTable)
	if err != nil {
		fmt.Fprintln(os.Stderr, "torture: order check: starts:", err)
		return -1
	}
	for rows.Next() {
		var id string
		var us int64
		if err := rows.Scan(&id, &us); err != nil {
			rows.Close()
			fmt.Fprintln(os.Stderr, "torture: order check: starts:", err)
			return -1
		}
		starts[id] = append(starts[id], us)
	}
	rows.Close()
	violations := 0
	for key, recs := range byKey {
		slices.SortFunc(recs, func(a, b outbox.Record) int { return int(a.Seq - b.Seq) })
		for i := 1; i < len(recs); i++ {
			x, y := recs[i-1], recs[i]
			for _, us := range starts[y.ID] {
				if x.Status != outbox.StatusDone || us < x.DoneAt.UnixMicro() {
					violations++
					if violations <= 5 {
						fmt.Fprintf(os.Stderr, "torture: order violation on key %s: %s (seq %d) started at %s while %s (seq %d) was %s (done at %s)\n",
							key, y.ID, y.Seq, time.UnixMicro(us).UTC().Format(time.RFC3339Nano), x.ID, x.Seq, x.Status, x.DoneAt.Format(time.RFC3339Nano))
					}
					break
				}
			}
		}
	}
	return violations
}
