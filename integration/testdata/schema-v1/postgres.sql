-- Outbox table for PostgreSQL 9.5+ (FOR UPDATE SKIP LOCKED).
-- {{table}} is the (validated) table name, {{name}} the same without its
-- schema. Index names are {{name}}_claim_idx and {{name}}_purge_idx: keep
-- the table name to 53 characters so that they fit PostgreSQL's 63.
--
-- Timestamps are TIMESTAMPTZ: instants, written by the application in UTC
-- and compared as instants whatever the session's TimeZone.
-- payload is JSON, not JSONB: JSON keeps the exact text, so payloads round
-- trip byte for byte and stay readable (and queryable) in SQL.
-- event_id uses the "C" collation: ids sort byte-wise, as in Go.
CREATE TABLE IF NOT EXISTS {{table}} (
    event_id       VARCHAR(36) COLLATE "C" NOT NULL PRIMARY KEY,
    event_type     VARCHAR(128) NOT NULL,
    aggregate_type VARCHAR(64)  NOT NULL,
    aggregate_id   VARCHAR(128) NOT NULL DEFAULT '',
    tenant_id      VARCHAR(64)  NOT NULL DEFAULT '',
    payload        JSON,
    payload_bytes  BYTEA,
    headers        TEXT,
    status         SMALLINT     NOT NULL DEFAULT 0,
    attempts       INTEGER      NOT NULL DEFAULT 0,
    occurred_at    TIMESTAMPTZ  NOT NULL,
    available_at   TIMESTAMPTZ  NOT NULL,
    created_at     TIMESTAMPTZ  NOT NULL,
    done_at        TIMESTAMPTZ,
    last_error     TEXT,
    locked_by      VARCHAR(128),
    locked_at      TIMESTAMPTZ,
    CHECK ((payload IS NULL) <> (payload_bytes IS NULL))
);

-- A partial index of pending rows in due order: the claim reads the first
-- rows of it and stops, O(batch) at any backlog. DONE and DEAD rows are not
-- in it at all.
CREATE INDEX IF NOT EXISTS {{name}}_claim_idx
    ON {{table}} (available_at, event_id) WHERE status IN (0, 2);

-- The purge finds terminal rows by completion time.
CREATE INDEX IF NOT EXISTS {{name}}_purge_idx
    ON {{table}} ((COALESCE(done_at, created_at))) WHERE status IN (1, 3);
