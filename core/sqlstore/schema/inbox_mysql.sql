-- Consumer inbox table for MySQL 8.0+ and MariaDB 10.6+ (InnoDB).
-- {{table}} is the (validated) table name (index names are local to the
-- table).
--
-- One row per processed event id. event_id is VARBINARY: ids compare byte
-- for byte, as in Go, with no collation that would make "a" equal "A" or
-- "a " (PAD SPACE). processed_at is DATETIME(6) holding UTC, bound by the
-- application; the purge deletes by it.
CREATE TABLE IF NOT EXISTS {{table}} (
    event_id     VARBINARY(255) NOT NULL,
    processed_at DATETIME(6)    NOT NULL,
    PRIMARY KEY (event_id),
    KEY inbox_processed_idx (processed_at)
) ENGINE = InnoDB;
