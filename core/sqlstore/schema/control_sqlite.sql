-- Control tables for SQLite 3.35+, beside the outbox table {{table}}
-- (validated; every name here is derived from it): the stored pauses, the
-- instances delivering from the table, the operators' audit trail (see
-- outbox.Controls) and the wake-up signal (outbox.Waker). Migrate creates
-- them with the outbox table, and on a table made before them.
--
-- Timestamps are INTEGER Unix microseconds, UTC, written by the
-- application, never the database's clock. Text compares byte-wise
-- (SQLite's BINARY collation).

-- One row per paused scope: an event type, or * for every type.
CREATE TABLE IF NOT EXISTS {{table}}_pauses (
    scope     VARCHAR(128) NOT NULL PRIMARY KEY,
    paused_by VARCHAR(255) NOT NULL,
    reason    TEXT         NOT NULL,
    paused_at INTEGER      NOT NULL
) WITHOUT ROWID;

-- One row per live instance, by owner id, as its last heartbeat left it.
-- types is a JSON array of the event types it routes, NULL for every type
-- (at most outbox.MaxNodeTypes types). Rows last seen long ago are
-- deleted by the heartbeats of the others.
CREATE TABLE IF NOT EXISTS {{table}}_nodes (
    owner      VARCHAR(128) NOT NULL PRIMARY KEY,
    mode       VARCHAR(64)  NOT NULL,
    types      TEXT,
    started_at INTEGER      NOT NULL,
    seen_at    INTEGER      NOT NULL
) WITHOUT ROWID;

-- One row per operator action, numbered in the order they were recorded
-- (AUTOINCREMENT: a number is never given twice). The trail is kept:
-- nothing deletes its rows (an operator prunes it in SQL if they wish, by
-- acted_at).
CREATE TABLE IF NOT EXISTS {{table}}_audit (
    id          INTEGER      NOT NULL PRIMARY KEY AUTOINCREMENT,
    acted_at    INTEGER      NOT NULL,
    actor       VARCHAR(255) NOT NULL,
    action      VARCHAR(64)  NOT NULL,
    target      TEXT         NOT NULL,
    reason      TEXT         NOT NULL,
    event_count INTEGER      NOT NULL
);

-- The wake-up signal (outbox.Waker): one row, whose counter an instance
-- raises after it left events in the table for the others' pollers, and
-- which every listening instance reads every WakeInterval. by_owner is who
-- raised it last.
CREATE TABLE IF NOT EXISTS {{table}}_wake (
    id       INTEGER      NOT NULL PRIMARY KEY,
    n        INTEGER      NOT NULL,
    by_owner VARCHAR(128) NOT NULL
);
INSERT INTO {{table}}_wake (id, n, by_owner) VALUES (1, 0, '') ON CONFLICT (id) DO NOTHING;
