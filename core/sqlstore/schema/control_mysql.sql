-- Control tables for MySQL 8.0+ and MariaDB 10.6+ (InnoDB), beside the
-- outbox table {{table}} (validated; every name here is derived from it):
-- the stored pauses, the instances delivering from the table, the
-- operators' audit trail (see outbox.Controls) and the wake-up signal
-- (outbox.Waker). Migrate creates them with the outbox table, and on a
-- table made before them.
--
-- Timestamps are DATETIME(6) holding UTC, bound by the application, never
-- the database's clock. The keys (scope, owner) are VARBINARY: they
-- compare byte for byte, as in Go, with no collation that would make "a"
-- equal "A" or "a " (PAD SPACE), and hold the outbox package's bounds in
-- bytes. The text columns are utf8mb4, whose VARCHAR(n) counts characters
-- (any text of n bytes fits) and whose TEXT holds 65535 bytes.

-- One row per paused scope: an event type, or * for every type.
CREATE TABLE IF NOT EXISTS {{table}}_pauses (
    scope     VARBINARY(128) NOT NULL,
    paused_by VARCHAR(255)   NOT NULL,
    reason    TEXT           NOT NULL,
    paused_at DATETIME(6)    NOT NULL,
    PRIMARY KEY (scope)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- One row per live instance, by owner id, as its last heartbeat left it.
-- types is a JSON array of the event types it routes, NULL for every type
-- (at most outbox.MaxNodeTypes types). Rows last seen long ago are
-- deleted by the heartbeats of the others.
CREATE TABLE IF NOT EXISTS {{table}}_nodes (
    owner      VARBINARY(128) NOT NULL,
    mode       VARCHAR(64)    NOT NULL,
    types      MEDIUMTEXT     NULL,
    started_at DATETIME(6)    NOT NULL,
    seen_at    DATETIME(6)    NOT NULL,
    PRIMARY KEY (owner)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- One row per operator action, numbered in the order they were recorded.
-- The trail is kept: nothing deletes its rows (an operator prunes it in
-- SQL if they wish, by acted_at).
CREATE TABLE IF NOT EXISTS {{table}}_audit (
    id          BIGINT       NOT NULL AUTO_INCREMENT,
    acted_at    DATETIME(6)  NOT NULL,
    actor       VARCHAR(255) NOT NULL,
    action      VARCHAR(64)  NOT NULL,
    target      TEXT         NOT NULL,
    reason      TEXT         NOT NULL,
    event_count BIGINT       NOT NULL,
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The wake-up signal (outbox.Waker): one row, whose counter an instance
-- raises after it left events in the table for the others' pollers, and
-- which every listening instance reads every WakeInterval. by_owner is who
-- raised it last.
CREATE TABLE IF NOT EXISTS {{table}}_wake (
    id       INT            NOT NULL,
    n        BIGINT         NOT NULL,
    by_owner VARBINARY(128) NOT NULL,
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
INSERT IGNORE INTO {{table}}_wake (id, n, by_owner) VALUES (1, 0, '');
