-- Outbox table for MySQL 8.0+ and MariaDB 10.6+ (InnoDB, FOR UPDATE
-- SKIP LOCKED, indexed generated columns). {{table}} is the (validated)
-- table name (index names are local to the table).
--
-- Timestamps are DATETIME(6) holding UTC wall-clock time: the application
-- binds them in UTC and never calls NOW(), so the session time_zone does
-- not matter. Read them with parseTime=true and the default loc=UTC.
-- payload is LONGTEXT, not JSON: MySQL's JSON type normalizes the text;
-- LONGTEXT keeps it byte for byte, readable in SQL.
-- utf8mb4_bin: ids and names compare byte-wise (case-sensitive), as in Go.
--
-- MySQL and MariaDB have no partial indexes. The generated columns claim_at
-- (available_at of pending rows, NULL otherwise) and purge_at (completion
-- time of terminal rows, NULL otherwise) play their part: their indexes
-- hold every row, but the claim's range claim_at <= now skips the NULLs of
-- DONE and DEAD rows and is read in order, O(batch) at any backlog.
CREATE TABLE IF NOT EXISTS {{table}} (
    event_id       VARCHAR(36)  NOT NULL,
    event_type     VARCHAR(128) NOT NULL,
    aggregate_type VARCHAR(64)  NOT NULL,
    aggregate_id   VARCHAR(128) NOT NULL DEFAULT '',
    tenant_id      VARCHAR(64)  NOT NULL DEFAULT '',
    payload        LONGTEXT,
    payload_bytes  LONGBLOB,
    headers        LONGTEXT,
    status         TINYINT      NOT NULL DEFAULT 0,
    attempts       INT          NOT NULL DEFAULT 0,
    occurred_at    DATETIME(6)  NOT NULL,
    available_at   DATETIME(6)  NOT NULL,
    created_at     DATETIME(6)  NOT NULL,
    done_at        DATETIME(6)  NULL,
    last_error     TEXT,
    locked_by      VARCHAR(128) NULL,
    locked_at      DATETIME(6)  NULL,
    claim_at       DATETIME(6) GENERATED ALWAYS AS (CASE WHEN status IN (0, 2) THEN available_at END) VIRTUAL,
    purge_at       DATETIME(6) GENERATED ALWAYS AS (CASE WHEN status IN (1, 3) THEN COALESCE(done_at, created_at) END) VIRTUAL,
    PRIMARY KEY (event_id),
    KEY outbox_claim_idx (claim_at, event_id),
    KEY outbox_purge_idx (purge_at),
    CHECK ((payload IS NULL) <> (payload_bytes IS NULL))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
