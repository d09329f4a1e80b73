package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	outboxpgx "github.com/go-outbox/outbox/adapters/pgx"
	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/sqlstore"
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/lib/pq"
	_ "modernc.org/sqlite"
)

// Table names: the framework writes fwTable through its Store, the
// baselines write rawTable with hand-written SQL. Both are created by the
// same Migrate, so they have the same columns and indexes.
const (
	fwTable  = "bench_outbox"
	rawTable = "bench_raw"
)

// backend is one database reached through one driver.
type backend struct {
	key     string // as selected by -db: sqlite, pgx, pgx-native, pq, mysql
	name    string // as printed: sqlite, postgres/pgx, postgres/pgx-native, postgres/pq, mariadb
	family  string // the dialect's name: sqlite, postgres or mysql
	driver  string // database/sql driver name; "" for native pgx (pgxpool)
	dialect sqlstore.Dialect
	dsn     string // for SQLite, the file path
}

// backends returns the backends selected by list (comma-separated names:
// sqlite, postgres (= pgx, pgx-native and pq), pgx, pgx-native, pq, mysql
// or mariadb, all).
func backends(list, pgDSN, myDSN, sqlitePath string) ([]backend, error) {
	all := map[string]backend{
		"sqlite":     {key: "sqlite", name: "sqlite", dialect: sqlstore.SQLite, driver: "sqlite", dsn: sqlitePath},
		"pgx":        {key: "pgx", name: "postgres/pgx", dialect: sqlstore.PostgreSQL, driver: "pgx", dsn: pgDSN},
		"pgx-native": {key: "pgx-native", name: "postgres/pgx-native", dialect: sqlstore.PostgreSQL, dsn: pgDSN},
		"pq":         {key: "pq", name: "postgres/pq", dialect: sqlstore.PostgreSQL, driver: "postgres", dsn: pgDSN},
		"mysql":      {key: "mysql", name: "mariadb", dialect: sqlstore.MySQL, driver: "mysql", dsn: myDSN},
	}
	for k, b := range all {
		b.family = b.dialect.Name()
		all[k] = b
	}
	var out []backend
	seen := map[string]bool{}
	add := func(keys ...string) {
		for _, k := range keys {
			if !seen[k] {
				seen[k] = true
				out = append(out, all[k])
			}
		}
	}
	for _, name := range strings.Split(list, ",") {
		switch strings.TrimSpace(name) {
		case "all":
			add("sqlite", "pgx", "pgx-native", "pq", "mysql")
		case "sqlite":
			add("sqlite")
		case "postgres", "pg":
			add("pgx", "pgx-native", "pq")
		case "pgx":
			add("pgx")
		case "pgx-native":
			add("pgx-native")
		case "pq":
			add("pq")
		case "mysql", "mariadb":
			add("mysql")
		case "":
		default:
			return nil, fmt.Errorf("unknown -db %q: use sqlite, postgres, pgx, pgx-native, pq, mysql or all", name)
		}
	}
	return out, nil
}

// open connects with a pool of at most conns connections.
func (b backend) open(ctx context.Context, conns int) (pool, error) {
	if b.driver == "" {
		return openPgxPool(ctx, b.dsn, conns)
	}
	src, err := sqlstore.ParseDSN(b.dialect, b.dsn)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open(b.driver, src.DSN)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to %s: %w", b.name, err)
	}
	p := newSQLPool(db)
	if b.family == "postgres" {
		p.listen = outboxpgx.NewListener(b.dsn)
	}
	return p, nil
}

// resetSQLite removes the SQLite database file and its WAL.
func (b backend) resetSQLite() error {
	if b.family != "sqlite" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(b.dsn), 0o755); err != nil {
		return err
	}
	for _, s := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(b.dsn + s); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// version returns the server's version string.
func (b backend) version(ctx context.Context, p pool) string {
	q := "SELECT version()"
	if b.family == "sqlite" {
		q = "SELECT 'SQLite ' || sqlite_version()"
	}
	vals, err := p.query(ctx, q)
	if err != nil || len(vals) != 1 {
		return fmt.Sprintf("unknown (%v)", err)
	}
	v := fmt.Sprint(vals[0])
	if i := strings.Index(v, " on "); i > 0 && b.family == "postgres" {
		v = v[:i]
	}
	if b.family == "mysql" {
		v = "MariaDB/MySQL " + v
	}
	return v
}

// setup recreates both tables and returns the framework's store; the raw
// table comes from the same Migrate, so that both tables are identical.
func (b backend) setup(ctx context.Context, p pool) (*sqlstore.Store, error) {
	var fw *sqlstore.Store
	for _, t := range []string{fwTable, rawTable} {
		if _, err := p.exec(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
			return nil, err
		}
		s, err := p.store(t)
		if err != nil {
			return nil, err
		}
		if err := s.Migrate(ctx); err != nil {
			return nil, err
		}
		if t == fwTable {
			fw = s
		}
	}
	return fw, nil
}

// truncate empties a table between runs so every run starts from the same
// state.
func (b backend) truncate(ctx context.Context, p pool, table string) error {
	q := "TRUNCATE TABLE " + table
	if b.family == "sqlite" {
		q = "DELETE FROM " + table
	}
	_, err := p.exec(ctx, q)
	return err
}

// analyze refreshes the planner's statistics (and, on PostgreSQL, the
// visibility map) after a bulk load.
func (b backend) analyze(ctx context.Context, p pool, table string) error {
	var err error
	switch b.family {
	case "sqlite":
		_, err = p.exec(ctx, "ANALYZE")
	case "postgres":
		if _, err = p.exec(ctx, "VACUUM ANALYZE "+table); err == nil {
			// Flush the load's dirty pages now: a checkpoint that the
			// load's WAL would otherwise start during the run costs the
			// side that happens to run then.
			_, err = p.exec(ctx, "CHECKPOINT")
		}
	case "mysql":
		_, err = p.query(ctx, "ANALYZE TABLE "+table) // it returns a result set
	}
	return err
}

// rebind turns ? placeholders into the dialect's ($n on PostgreSQL).
func (b backend) rebind(q string) string { return sqlstore.Rebind(b.dialect, q) }

// timeArg binds a timestamp the way the sqlstore dialect does, so the
// baseline writes the same column values.
func (b backend) timeArg(t time.Time) any { return sqlstore.TimeArg(b.dialect, t) }

// in returns head followed by " IN (?, …)" with k placeholders, in the
// backend's placeholder style: the raw loops' statements by id.
func (b backend) in(head string, k int) string {
	return b.rebind(head + " IN (?" + strings.Repeat(", ?", k-1) + ")")
}

// rawInsertColumns are the columns a hand-written INSERT of an outbox row
// names; the others take their defaults (status 0, attempts 0, NULLs), which
// is what the framework writes for an unclaimed row.
const rawInsertColumns = "event_id, event_type, aggregate_type, aggregate_id, payload, headers, occurred_at, available_at, created_at"

// rawInsertSQL returns a multi-row INSERT of n rows into the raw table.
func (b backend) rawInsertSQL(n int) string {
	var sb strings.Builder
	sb.WriteString("INSERT INTO " + rawTable + " (" + rawInsertColumns + ") VALUES ")
	for i := range n {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
	}
	return b.rebind(sb.String())
}

// The event every scenario writes: the same type, aggregate, header and
// payload on both sides.
const (
	eventType     = "OrderPlaced"
	aggregateType = "Order"
	headerKey     = "trace-id"
	headerValue   = "4bf92f3577b34da6a3ce929d0e0e4736"
	headersJSON   = `{"trace-id":"4bf92f3577b34da6a3ce929d0e0e4736"}`
	payloadJSON   = `{"order":"o-1","amount":1200,"currency":"EUR","lines":[{"sku":"A-1","qty":2}]}`
)

var payloadBytes = []byte(payloadJSON)

// newEvent builds the framework's envelope for one order.
func newEvent(orderID string) (outbox.Envelope, error) {
	return outbox.NewEnvelope(outbox.EventName(eventType),
		outbox.WithAggregate(outbox.AggregateName(aggregateType), orderID),
		outbox.WithHeader(headerKey, headerValue), outbox.WithJSON(payloadBytes))
}

// appendRawRow appends the baseline's arguments for one row: what the
// framework stores for the same event.
func (b backend) appendRawRow(args []any, orderID string, now time.Time) []any {
	ts := b.timeArg(now)
	return append(args, outbox.NewULID(), eventType, aggregateType, orderID, payloadJSON, headersJSON, ts, ts, ts)
}

// bulkLoad inserts n pending rows into table with one server-side
// statement: generate_series on PostgreSQL, the SEQUENCE engine's
// seq_1_to_N on MariaDB, a recursive CTE on SQLite. Ids sort in creation
// order, like ULIDs; all rows are due.
func (b backend) bulkLoad(ctx context.Context, p pool, table string, n int) error {
	base := time.Now().Add(-time.Hour).UTC()
	cols := rawInsertColumns
	var q string
	switch b.family {
	case "postgres":
		q = fmt.Sprintf(`INSERT INTO %s (%s)
SELECT '01BENCH' || lpad(g::text, 19, '0'), '%s', '%s', 'o-' || g, '%s'::json, '%s',
       $1::timestamptz + g * interval '1 microsecond', $1::timestamptz + g * interval '1 microsecond', $1::timestamptz + g * interval '1 microsecond'
FROM generate_series(1, %d) AS g`, table, cols, eventType, aggregateType, payloadJSON, headersJSON, n)
		_, err := p.exec(ctx, q, base)
		return err
	case "mysql":
		// Chunks keep the transaction (and the undo log) moderate.
		const chunk = 200_000
		for from := 1; from <= n; from += chunk {
			to := min(from+chunk-1, n)
			q = fmt.Sprintf(`INSERT INTO %s (%s)
SELECT CONCAT('01BENCH', LPAD(seq, 19, '0')), '%s', '%s', CONCAT('o-', seq), '%s', '%s',
       ? + INTERVAL seq MICROSECOND, ? + INTERVAL seq MICROSECOND, ? + INTERVAL seq MICROSECOND
FROM seq_%d_to_%d`, table, cols, eventType, aggregateType, payloadJSON, headersJSON, from, to)
			ts := b.timeArg(base)
			if _, err := p.exec(ctx, q, ts, ts, ts); err != nil {
				return err
			}
		}
		return nil
	default:
		q = fmt.Sprintf(`INSERT INTO %s (%s)
WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < %d)
SELECT '01BENCH' || printf('%%019d', x), '%s', '%s', 'o-' || x, '%s', '%s', ? + x, ? + x, ? + x FROM g`,
			table, cols, n, eventType, aggregateType, payloadJSON, headersJSON)
		ts := base.UnixMicro()
		_, err := p.exec(ctx, q, ts, ts, ts)
		return err
	}
}

// countStatus returns how many rows of table have the given status.
func countStatus(ctx context.Context, p pool, table string, status int) (int64, error) {
	return queryInt(ctx, p, fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE status = %d", table, status))
}
