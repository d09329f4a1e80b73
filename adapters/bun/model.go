package outboxbun

import (
	"context"
	"fmt"
	"strings"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/sqlstore"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
)

// SQLiteEvent is the outbox table on SQLite.
type SQLiteEvent struct {
	bun.BaseModel `bun:"table:outbox_event"`
	EventID       string  `bun:"event_id,pk,type:VARCHAR(36)"`
	EventType     string  `bun:"event_type,notnull,type:VARCHAR(128)"`
	AggregateType string  `bun:"aggregate_type,notnull,type:VARCHAR(64)"`
	AggregateID   string  `bun:"aggregate_id,notnull,type:VARCHAR(128),default:''"`
	TenantID      string  `bun:"tenant_id,notnull,type:VARCHAR(64),default:''"`
	SchemaVersion int     `bun:"schema_version,notnull,type:INTEGER,default:1"`
	Payload       *string `bun:"payload,type:TEXT"`
	PayloadBytes  []byte  `bun:"payload_bytes,type:BLOB"`
	Headers       *string `bun:"headers,type:TEXT"`
	Status        int16   `bun:"status,notnull,type:SMALLINT,default:0"`
	Attempts      int32   `bun:"attempts,notnull,type:INTEGER,default:0"`
	OccurredAt    int64   `bun:"occurred_at,notnull,type:INTEGER"`
	AvailableAt   int64   `bun:"available_at,notnull,type:INTEGER"`
	CreatedAt     int64   `bun:"created_at,notnull,type:INTEGER"`
	DoneAt        *int64  `bun:"done_at,type:INTEGER"`
	LastError     *string `bun:"last_error,type:TEXT"`
	LockedBy      *string `bun:"locked_by,type:VARCHAR(64)"`
	LockedAt      *int64  `bun:"locked_at,type:INTEGER"`
	OrderingKey   *string `bun:"ordering_key,type:VARCHAR(255)"`
	Subscribers   *string `bun:"subscribers,type:TEXT"`
}

// PostgresEvent is the outbox table on PostgreSQL.
type PostgresEvent struct {
	bun.BaseModel `bun:"table:outbox_event"`
	EventID       string     `bun:"event_id,pk,type:VARCHAR(36)"` // COLLATE "C", set by AfterCreateTable
	EventType     string     `bun:"event_type,notnull,type:VARCHAR(128)"`
	AggregateType string     `bun:"aggregate_type,notnull,type:VARCHAR(64)"`
	AggregateID   string     `bun:"aggregate_id,notnull,type:VARCHAR(128),default:''"`
	TenantID      string     `bun:"tenant_id,notnull,type:VARCHAR(64),default:''"`
	SchemaVersion int        `bun:"schema_version,notnull,type:INTEGER,default:1"`
	Payload       *string    `bun:"payload,type:JSON"`
	PayloadBytes  []byte     `bun:"payload_bytes,type:BYTEA"`
	Headers       *string    `bun:"headers,type:TEXT"`
	Status        int16      `bun:"status,notnull,type:SMALLINT,default:0"`
	Attempts      int32      `bun:"attempts,notnull,type:INTEGER,default:0"`
	OccurredAt    time.Time  `bun:"occurred_at,notnull,type:TIMESTAMPTZ"`
	AvailableAt   time.Time  `bun:"available_at,notnull,type:TIMESTAMPTZ"`
	CreatedAt     time.Time  `bun:"created_at,notnull,type:TIMESTAMPTZ"`
	DoneAt        *time.Time `bun:"done_at,type:TIMESTAMPTZ"`
	LastError     *string    `bun:"last_error,type:TEXT"`
	LockedBy      *string    `bun:"locked_by,type:VARCHAR(128)"`
	LockedAt      *time.Time `bun:"locked_at,type:TIMESTAMPTZ"`
	OrderingKey   *string    `bun:"ordering_key,type:VARCHAR(255)"` // COLLATE "C", set by AfterCreateTable
	Subscribers   *string    `bun:"subscribers,type:TEXT"`
	Seq           int64      `bun:"seq,notnull,type:BIGSERIAL"`
}

// MySQLEvent is the outbox table on MySQL and MariaDB. Its string columns
// carry utf8mb4_bin themselves (outboxsql's DDL sets it as the table's
// default), so ids and names compare byte-wise as in Go. The generated
// columns due_at, lease_at, purge_at and open_key, which the claim, the
// recovery of expired claims, the purge and the ordered claim are indexed
// by, are added by BeforeCreateTable and not mapped.
type MySQLEvent struct {
	bun.BaseModel `bun:"table:outbox_event"`
	EventID       string     `bun:"event_id,pk,type:VARCHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"`
	EventType     string     `bun:"event_type,notnull,type:VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"`
	AggregateType string     `bun:"aggregate_type,notnull,type:VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"`
	AggregateID   string     `bun:"aggregate_id,notnull,type:VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,default:''"`
	TenantID      string     `bun:"tenant_id,notnull,type:VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,default:''"`
	SchemaVersion int        `bun:"schema_version,notnull,type:INTEGER,default:1"`
	Payload       *string    `bun:"payload,type:LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"`
	PayloadBytes  []byte     `bun:"payload_bytes,type:LONGBLOB"`
	Headers       *string    `bun:"headers,type:LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"`
	Status        int8       `bun:"status,notnull,type:TINYINT,default:0"`
	Attempts      int32      `bun:"attempts,notnull,type:INT,default:0"`
	OccurredAt    time.Time  `bun:"occurred_at,notnull,type:DATETIME(6)"`
	AvailableAt   time.Time  `bun:"available_at,notnull,type:DATETIME(6)"`
	CreatedAt     time.Time  `bun:"created_at,notnull,type:DATETIME(6)"`
	DoneAt        *time.Time `bun:"done_at,type:DATETIME(6)"`
	LastError     *string    `bun:"last_error,type:TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"`
	LockedBy      *string    `bun:"locked_by,type:VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"`
	LockedAt      *time.Time `bun:"locked_at,type:DATETIME(6)"`
	OrderingKey   *string    `bun:"ordering_key,type:VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"`
	Subscribers   *string    `bun:"subscribers,type:TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"`
	Seq           int64      `bun:"seq,notnull,type:BIGINT AUTO_INCREMENT"`
}

var (
	_ bun.BeforeCreateTableHook = (*SQLiteEvent)(nil)
	_ bun.AfterCreateTableHook  = (*SQLiteEvent)(nil)
	_ bun.BeforeCreateTableHook = (*PostgresEvent)(nil)
	_ bun.AfterCreateTableHook  = (*PostgresEvent)(nil)
	_ bun.BeforeCreateTableHook = (*MySQLEvent)(nil)
)

// payloadCheck is the outbox table's constraint: exactly one of the two
// payload columns is set.
const payloadCheck = "CHECK ((payload IS NULL) <> (payload_bytes IS NULL))"

// BeforeCreateTable adds the CHECK constraint.
func (*SQLiteEvent) BeforeCreateTable(_ context.Context, q *bun.CreateTableQuery) error {
	q.ColumnExpr(payloadCheck)
	return nil
}

// AfterCreateTable creates the partial indexes of outboxsql's schema.
func (*SQLiteEvent) AfterCreateTable(ctx context.Context, q *bun.CreateTableQuery) error {
	return createIndexes(ctx, q, outboxsql.SQLite)
}

// BeforeCreateTable adds the CHECK constraint.
func (*PostgresEvent) BeforeCreateTable(_ context.Context, q *bun.CreateTableQuery) error {
	q.ColumnExpr(payloadCheck)
	return nil
}

// AfterCreateTable gives event_id and ordering_key the "C" collation (they
// sort byte-wise, as in Go) and creates the partial indexes of outboxsql's
// schema.
func (*PostgresEvent) AfterCreateTable(ctx context.Context, q *bun.CreateTableQuery) error {
	const collate = `ALTER TABLE ` + sqlstore.DefaultTable + ` ALTER COLUMN event_id TYPE VARCHAR(36) COLLATE "C",` +
		` ALTER COLUMN ordering_key TYPE VARCHAR(255) COLLATE "C"`
	if _, err := q.DB().ExecContext(ctx, collate); err != nil {
		return fmt.Errorf("outboxbun: collation of event_id: %w", err)
	}
	return createIndexes(ctx, q, outboxsql.PostgreSQL)
}

// BeforeCreateTable adds the generated columns due_at, lease_at, purge_at
// and open_key, their indexes, the tenant index, the key of the sequence and the CHECK
// constraint: MySQL and MariaDB have no partial indexes, these columns are
// NULL for the rows the indexes need not hold.
func (*MySQLEvent) BeforeCreateTable(_ context.Context, q *bun.CreateTableQuery) error {
	q.ColumnExpr("due_at DATETIME(6) GENERATED ALWAYS AS (CASE WHEN status IN (0, 2) AND locked_by IS NULL AND ordering_key IS NULL THEN available_at END) VIRTUAL").
		ColumnExpr("lease_at DATETIME(6) GENERATED ALWAYS AS (CASE WHEN status IN (0, 2) AND locked_by IS NOT NULL THEN locked_at END) VIRTUAL").
		ColumnExpr("purge_at DATETIME(6) GENERATED ALWAYS AS (CASE WHEN status IN (1, 3) THEN COALESCE(done_at, created_at) END) VIRTUAL").
		ColumnExpr("open_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin GENERATED ALWAYS AS (CASE WHEN status IN (0, 2, 3) THEN ordering_key END) VIRTUAL").
		ColumnExpr("UNIQUE KEY outbox_seq_idx (seq)").
		ColumnExpr("KEY outbox_due_idx (due_at, event_id)").
		ColumnExpr("KEY outbox_lease_idx (lease_at)").
		ColumnExpr("KEY outbox_purge_idx (purge_at)").
		ColumnExpr("KEY outbox_order_idx (open_key, seq)").
		ColumnExpr("KEY outbox_tnt_idx (tenant_id, status, event_id)").
		ColumnExpr(payloadCheck)
	return nil
}

// createIndexes runs the CREATE INDEX statements of outboxsql's schema for
// dialect d and the default table.
func createIndexes(ctx context.Context, q *bun.CreateTableQuery, d outboxsql.Dialect) error {
	store, err := outboxsql.Open(q.DB().DB, outboxsql.WithDialect(d))
	if err != nil {
		return err
	}
	for _, stmt := range store.Schema() {
		if !strings.HasPrefix(strings.ToUpper(strings.TrimSpace(stmt)), "CREATE INDEX") {
			continue
		}
		if _, err := q.DB().ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("outboxbun: create the outbox table's indexes: %w", err)
		}
	}
	return nil
}

// Model returns a new outbox table model for db's dialect (SQLiteEvent,
// PostgresEvent or MySQLEvent), for applications that create their tables
// with bun:
//
//	model, err := outboxbun.Model(db)
//	if err == nil {
//		_, err = db.NewCreateTable().Model(model).IfNotExists().Exec(ctx)
//	}
//
// Each model produces exactly the table outboxsql's DDL creates
// (Store.Migrate): the same columns, types, defaults, constraints and
// indexes. What bun's struct tags cannot say is added by the models'
// BeforeCreateTable and AfterCreateTable hooks: the CHECK constraint and
// MySQL's generated columns and their indexes as extra column definitions,
// then the partial indexes (the very statements of outboxsql's schema) and
// PostgreSQL's "C" collation of event_id, run on the *bun.DB after the
// table exists — so create the table outside a transaction. outboxsql's
// Store reads and writes the rows; the models can read them too. Timestamps
// are UTC (SQLite: Unix microseconds).
//
// The models know the default table name sqlstore.DefaultTable only. For
// another name, create the table with outboxsql's Store.Migrate, or run its
// Store.Schema statements in a migration.
//
// Model fails with an error wrapping outbox.ErrInvalidConfig for another
// dialect.
func Model(db bun.IDB) (any, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: outboxbun: nil database", outbox.ErrInvalidConfig)
	}
	switch name := db.Dialect().Name(); name {
	case dialect.SQLite:
		return &SQLiteEvent{}, nil
	case dialect.PG:
		return &PostgresEvent{}, nil
	case dialect.MySQL:
		return &MySQLEvent{}, nil
	default:
		return nil, fmt.Errorf("%w: outboxbun: no outbox model for the %s dialect; create the table with outboxsql's Store.Migrate", outbox.ErrInvalidConfig, name)
	}
}
