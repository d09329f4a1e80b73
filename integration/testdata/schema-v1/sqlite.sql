-- Outbox table for SQLite 3.35+.
-- {{table}} is the (validated) table name, {{name}} the same without its
-- schema, {{schema}} the schema followed by a dot, or nothing.
-- Timestamps are INTEGER Unix microseconds, UTC.
CREATE TABLE IF NOT EXISTS {{table}} (
    event_id       VARCHAR(36)  NOT NULL PRIMARY KEY,
    event_type     VARCHAR(128) NOT NULL,
    aggregate_type VARCHAR(64)  NOT NULL,
    aggregate_id   VARCHAR(128) NOT NULL DEFAULT '',
    tenant_id      VARCHAR(64)  NOT NULL DEFAULT '',
    payload        TEXT,
    payload_bytes  BLOB,
    headers        TEXT,
    status         SMALLINT     NOT NULL DEFAULT 0,
    attempts       INTEGER      NOT NULL DEFAULT 0,
    occurred_at    INTEGER      NOT NULL,
    available_at   INTEGER      NOT NULL,
    created_at     INTEGER      NOT NULL,
    done_at        INTEGER,
    last_error     TEXT,
    locked_by      VARCHAR(64),
    locked_at      INTEGER,
    CHECK ((payload IS NULL) <> (payload_bytes IS NULL))
);

-- The claim walks pending rows in due order: O(batch) at any backlog.
CREATE INDEX IF NOT EXISTS {{schema}}{{name}}_claim_idx
    ON {{name}} (available_at, event_id) WHERE status IN (0, 2);

-- The purge finds terminal rows by completion time.
CREATE INDEX IF NOT EXISTS {{schema}}{{name}}_purge_idx
    ON {{name}} (COALESCE(done_at, created_at)) WHERE status IN (1, 3);
