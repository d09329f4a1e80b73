package outboxgorm

import (
	"fmt"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/sqlstore"
	"gorm.io/gorm"
)

// SQLiteEvent is the outbox table on SQLite.
type SQLiteEvent struct {
	EventID       string  `gorm:"column:event_id;type:VARCHAR(36);primaryKey;not null;index:outbox_event_due_idx,priority:2;index:outbox_event_tnt_idx,priority:3"`
	EventType     string  `gorm:"column:event_type;type:VARCHAR(128);not null"`
	AggregateType string  `gorm:"column:aggregate_type;type:VARCHAR(64);not null"`
	AggregateID   string  `gorm:"column:aggregate_id;type:VARCHAR(128);not null;default:''"`
	TenantID      string  `gorm:"column:tenant_id;type:VARCHAR(64);not null;default:'';index:outbox_event_tnt_idx,priority:1,where:tenant_id <> ''"`
	SchemaVersion int     `gorm:"column:schema_version;type:INTEGER;not null;default:1"`
	Payload       *string `gorm:"column:payload;type:TEXT;check:(payload IS NULL) <> (payload_bytes IS NULL)"`
	PayloadBytes  []byte  `gorm:"column:payload_bytes;type:BLOB"`
	Headers       *string `gorm:"column:headers;type:TEXT"`
	Status        int16   `gorm:"column:status;type:SMALLINT;not null;default:0;index:outbox_event_tnt_idx,priority:2"`
	Attempts      int32   `gorm:"column:attempts;type:INTEGER;not null;default:0"`
	OccurredAt    int64   `gorm:"column:occurred_at;type:INTEGER;not null"`
	AvailableAt   int64   `gorm:"column:available_at;type:INTEGER;not null;index:outbox_event_due_idx,priority:1,where:status IN (0\\, 2) AND locked_by IS NULL AND ordering_key IS NULL"`
	CreatedAt     int64   `gorm:"column:created_at;type:INTEGER;not null;autoCreateTime:false"`
	DoneAt        *int64  `gorm:"column:done_at;type:INTEGER;index:outbox_event_purge_idx,expression:COALESCE(done_at\\, created_at),where:status IN (1\\, 3)"`
	LastError     *string `gorm:"column:last_error;type:TEXT"`
	LockedBy      *string `gorm:"column:locked_by;type:VARCHAR(64)"`
	LockedAt      *int64  `gorm:"column:locked_at;type:INTEGER;index:outbox_event_lease_idx,where:status IN (0\\, 2) AND locked_at IS NOT NULL"`
	OrderingKey   *string `gorm:"column:ordering_key;type:VARCHAR(255);index:outbox_event_order_idx,where:ordering_key IS NOT NULL AND status IN (0\\, 2\\, 3)"`
	Subscribers   *string `gorm:"column:subscribers;type:TEXT"`
}

// PostgresEvent is the outbox table on PostgreSQL.
type PostgresEvent struct {
	EventID       string     `gorm:"column:event_id;type:VARCHAR(36) COLLATE \"C\";primaryKey;not null;index:outbox_event_due_idx,priority:2;index:outbox_event_tnt_idx,priority:3"`
	EventType     string     `gorm:"column:event_type;type:VARCHAR(128);not null"`
	AggregateType string     `gorm:"column:aggregate_type;type:VARCHAR(64);not null"`
	AggregateID   string     `gorm:"column:aggregate_id;type:VARCHAR(128);not null;default:''"`
	TenantID      string     `gorm:"column:tenant_id;type:VARCHAR(64);not null;default:'';index:outbox_event_tnt_idx,priority:1,where:tenant_id <> ''"`
	SchemaVersion int        `gorm:"column:schema_version;type:INTEGER;not null;default:1"`
	Payload       *string    `gorm:"column:payload;type:JSON;check:(payload IS NULL) <> (payload_bytes IS NULL)"`
	PayloadBytes  []byte     `gorm:"column:payload_bytes;type:BYTEA"`
	Headers       *string    `gorm:"column:headers;type:TEXT"`
	Status        int16      `gorm:"column:status;type:SMALLINT;not null;default:0;index:outbox_event_tnt_idx,priority:2"`
	Attempts      int32      `gorm:"column:attempts;type:INTEGER;not null;default:0"`
	OccurredAt    time.Time  `gorm:"column:occurred_at;type:TIMESTAMPTZ;not null"`
	AvailableAt   time.Time  `gorm:"column:available_at;type:TIMESTAMPTZ;not null;index:outbox_event_due_idx,priority:1,where:status IN (0\\, 2) AND locked_by IS NULL AND ordering_key IS NULL"`
	CreatedAt     time.Time  `gorm:"column:created_at;type:TIMESTAMPTZ;not null;autoCreateTime:false"`
	DoneAt        *time.Time `gorm:"column:done_at;type:TIMESTAMPTZ;index:outbox_event_purge_idx,expression:(COALESCE(done_at\\, created_at)),where:status IN (1\\, 3)"`
	LastError     *string    `gorm:"column:last_error;type:TEXT"`
	LockedBy      *string    `gorm:"column:locked_by;type:VARCHAR(128)"`
	LockedAt      *time.Time `gorm:"column:locked_at;type:TIMESTAMPTZ;index:outbox_event_lease_idx,where:status IN (0\\, 2) AND locked_at IS NOT NULL"`
	OrderingKey   *string    `gorm:"column:ordering_key;type:VARCHAR(255) COLLATE \"C\";index:outbox_event_order_idx,priority:1,where:ordering_key IS NOT NULL AND status IN (0\\, 2\\, 3)"`
	Subscribers   *string    `gorm:"column:subscribers;type:TEXT"`
	Seq           int64      `gorm:"column:seq;autoIncrement;not null;->;index:outbox_event_order_idx,priority:2"`
}

// MySQLEvent is the outbox table on MySQL and MariaDB. Its string columns
// carry utf8mb4_bin themselves (outboxsql's DDL sets it as the table's
// default), so ids and names compare byte-wise as in Go. DueAt, LeaseAt,
// PurgeAt and OpenKey are the generated columns the claim, the recovery of
// expired claims, the purge and the ordered claim are indexed by; they and
// Seq (AUTO_INCREMENT) are read-only.
type MySQLEvent struct {
	EventID       string     `gorm:"column:event_id;type:VARCHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;primaryKey;not null;index:outbox_due_idx,priority:2;index:outbox_tnt_idx,priority:3"`
	EventType     string     `gorm:"column:event_type;type:VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;not null"`
	AggregateType string     `gorm:"column:aggregate_type;type:VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;not null"`
	AggregateID   string     `gorm:"column:aggregate_id;type:VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;not null;default:''"`
	TenantID      string     `gorm:"column:tenant_id;type:VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;not null;default:'';index:outbox_tnt_idx,priority:1"`
	SchemaVersion int        `gorm:"column:schema_version;type:INTEGER;not null;default:1"`
	Payload       *string    `gorm:"column:payload;type:LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;check:(payload IS NULL) <> (payload_bytes IS NULL)"`
	PayloadBytes  []byte     `gorm:"column:payload_bytes;type:LONGBLOB"`
	Headers       *string    `gorm:"column:headers;type:LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"`
	Status        int8       `gorm:"column:status;type:TINYINT;not null;default:0;index:outbox_tnt_idx,priority:2"`
	Attempts      int32      `gorm:"column:attempts;type:INT;not null;default:0"`
	OccurredAt    time.Time  `gorm:"column:occurred_at;type:DATETIME(6);not null"`
	AvailableAt   time.Time  `gorm:"column:available_at;type:DATETIME(6);not null"`
	CreatedAt     time.Time  `gorm:"column:created_at;type:DATETIME(6);not null;autoCreateTime:false"`
	DoneAt        *time.Time `gorm:"column:done_at;type:DATETIME(6)"`
	LastError     *string    `gorm:"column:last_error;type:TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"`
	LockedBy      *string    `gorm:"column:locked_by;type:VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"`
	LockedAt      *time.Time `gorm:"column:locked_at;type:DATETIME(6)"`
	OrderingKey   *string    `gorm:"column:ordering_key;type:VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"`
	Subscribers   *string    `gorm:"column:subscribers;type:TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"`
	Seq           int64      `gorm:"column:seq;->;type:BIGINT AUTO_INCREMENT;not null;uniqueIndex:outbox_seq_idx;index:outbox_order_idx,priority:2"`
	DueAt         *time.Time `gorm:"column:due_at;->;precision:6;type:DATETIME(6) GENERATED ALWAYS AS (CASE WHEN status IN (0, 2) AND locked_by IS NULL AND ordering_key IS NULL THEN available_at END) VIRTUAL;index:outbox_due_idx,priority:1"`
	LeaseAt       *time.Time `gorm:"column:lease_at;->;precision:6;type:DATETIME(6) GENERATED ALWAYS AS (CASE WHEN status IN (0, 2) AND locked_by IS NOT NULL THEN locked_at END) VIRTUAL;index:outbox_lease_idx"`
	PurgeAt       *time.Time `gorm:"column:purge_at;->;precision:6;type:DATETIME(6) GENERATED ALWAYS AS (CASE WHEN status IN (1, 3) THEN COALESCE(done_at, created_at) END) VIRTUAL;index:outbox_purge_idx"`
	OpenKey       *string    `gorm:"column:open_key;->;type:VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin GENERATED ALWAYS AS (CASE WHEN status IN (0, 2, 3) THEN ordering_key END) VIRTUAL;index:outbox_order_idx,priority:1"`
}

// TableName returns sqlstore.DefaultTable.
func (SQLiteEvent) TableName() string { return sqlstore.DefaultTable }

// TableName returns sqlstore.DefaultTable.
func (PostgresEvent) TableName() string { return sqlstore.DefaultTable }

// TableName returns sqlstore.DefaultTable.
func (MySQLEvent) TableName() string { return sqlstore.DefaultTable }

// Model returns a new outbox table model for db's dialect (SQLiteEvent,
// PostgresEvent or MySQLEvent), for applications that create their tables
// with db.AutoMigrate. Each model produces exactly the table outboxsql's
// DDL creates (Store.Migrate): the same columns, types, defaults,
// constraints and indexes. outboxsql's Store reads and writes the rows; the
// models can read them too. Timestamps are UTC (SQLite: Unix microseconds).
//
// The models know the default table name sqlstore.DefaultTable only (index
// names are fixed in their tags). For another name, create the table with
// outboxsql's Store.Migrate, or run its Store.Schema statements in a
// migration.
//
//	model, err := outboxgorm.Model(db)
//	if err == nil {
//		err = db.AutoMigrate(&Order{}, model)
//	}
//
// It fails with an error wrapping outbox.ErrInvalidConfig for another
// dialect.
func Model(db *gorm.DB) (any, error) {
	if db == nil || db.Dialector == nil {
		return nil, fmt.Errorf("%w: outboxgorm: nil *gorm.DB", outbox.ErrInvalidConfig)
	}
	switch name := db.Dialector.Name(); name {
	case "sqlite":
		return &SQLiteEvent{}, nil
	case "postgres":
		return &PostgresEvent{}, nil
	case "mysql":
		return &MySQLEvent{}, nil
	default:
		return nil, fmt.Errorf("%w: outboxgorm: no outbox model for the %s dialect; create the table with outboxsql's Store.Migrate", outbox.ErrInvalidConfig, name)
	}
}
