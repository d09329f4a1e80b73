package sqlstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

var _ outbox.HorizonReporter = (*Store)(nil)

// Horizon reads the state of the table's storage for the horizon guard
// (see outbox.HorizonReporter): on PostgreSQL its tuples, vacuums and
// size from the statistics and catalogs, and the oldest transaction,
// prepared transaction and replication slot that hold the vacuum horizon
// back; two statements that read no row of the table. On MySQL and SQLite,
// whose storage has no such horizon, it returns an error wrapping
// outbox.ErrUnsupported.
//
// It reads what the store's role may read: the transactions of other
// roles' sessions are hidden without pg_read_all_stats, and counted in
// Horizon.Hidden (the catalogs and views it reads are open to every
// role). A table that does not exist is an error wrapping
// outbox.ErrNotFound.
func (s *Store) Horizon(ctx context.Context) (outbox.Horizon, error) {
	var h outbox.Horizon
	if s.d.horizonTable == "" {
		return h, fmt.Errorf("sqlstore: horizon of %s: %s has no vacuum horizon: %w", s.table, s.d.title, outbox.ErrUnsupported)
	}
	vacuum, auto := timeCol{d: s.d}, timeCol{d: s.d}
	var hidden int64
	found := false
	err := s.eachRow(ctx, s.d.horizonTable, []any{s.table}, func(rows Rows) error {
		found = true
		return rows.Scan(&h.LiveTuples, &h.DeadTuples, &vacuum, &auto, &h.TableSize, &hidden)
	})
	if err == nil && !found {
		err = fmt.Errorf("%w: the table does not exist (run Migrate)", outbox.ErrNotFound)
	}
	if err != nil {
		return h, fmt.Errorf("sqlstore: horizon of %s: %w", s.table, s.explain(err))
	}
	h.LastVacuum, h.LastAutovacuum, h.Hidden = vacuum.t, auto.t, int(hidden)
	err = s.eachRow(ctx, s.d.horizonHolders, nil, func(rows Rows) error {
		var ho outbox.HorizonHolder
		var pid, ageMS int64
		var xmin string
		if err := rows.Scan(&ho.Kind, &pid, &ho.Name, &ho.State, &ageMS, &ho.XIDAge, &xmin); err != nil {
			return err
		}
		ho.PID, ho.Name, ho.State = int(pid), outbox.HolderText(ho.Name), outbox.HolderText(ho.State)
		if ageMS > 0 {
			ho.Age = time.Duration(ageMS) * time.Millisecond
		}
		ho.XMin, _ = strconv.ParseInt(xmin, 10, 64)
		h.Holders = append(h.Holders, ho)
		return nil
	})
	if err != nil {
		return h, fmt.Errorf("sqlstore: horizon of %s: holders: %w", s.table, s.explain(err))
	}
	return h, nil
}
