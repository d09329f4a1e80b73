-- Outbox table for PostgreSQL 9.5+ (FOR UPDATE SKIP LOCKED).
-- {{table}} is the (validated) table name, {{name}} the same without its
-- schema. Index names are {{name}}_due_idx, {{name}}_type_idx, {{name}}_lease_idx,
-- {{name}}_purge_idx, {{name}}_owed_idx, {{name}}_order_idx and {{name}}_tnt_idx: keep the
-- table name to 53 characters so that they fit PostgreSQL's 63.
--
-- Timestamps are TIMESTAMPTZ: instants, written by the application in UTC
-- and compared as instants whatever the session's TimeZone.
-- payload is JSON, not JSONB: JSON keeps the exact text, so payloads round
-- trip byte for byte and stay readable (and queryable) in SQL.
-- event_id and ordering_key use the "C" collation: they sort byte-wise,
-- as in Go.
-- ordering_key is the key of an event written by an ordered Client (NULL
-- for the others), seq numbers the rows at insert: of two events of one
-- key, the one with the lower seq is delivered first. Migrate adds both
-- to tables made before them (see pgUpgrade).
-- subscribers are the names of the subscribers an event still owes (of an
-- event type with several, see Registry.Subscribe), comma-separated, once
-- a delivery to some of them failed; NULL for every other event. Migrate
-- adds it to tables made before it.
-- parked is 1 on a pending ordered event that waits behind a DEAD event
-- of its key (outbox.DeadBlocksKey): the walk index leaves it out, so that
-- a blocked key costs the ordered claim nothing. Migrate adds it to
-- tables made before it.
CREATE TABLE IF NOT EXISTS {{table}} (
    event_id       VARCHAR(36) COLLATE "C" NOT NULL PRIMARY KEY,
    event_type     VARCHAR(128) NOT NULL,
    aggregate_type VARCHAR(64)  NOT NULL,
    aggregate_id   VARCHAR(128) NOT NULL DEFAULT '',
    tenant_id      VARCHAR(64)  NOT NULL DEFAULT '',
    schema_version INTEGER      NOT NULL DEFAULT 1,
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
    ordering_key   VARCHAR(255) COLLATE "C",
    subscribers    TEXT,
    seq            BIGSERIAL,
    parked         SMALLINT     NOT NULL DEFAULT 0,
    CHECK ((payload IS NULL) <> (payload_bytes IS NULL))
);

-- Two partial indexes of pending rows. The due index holds the unclaimed
-- unordered ones in due order: the fresh claim reads its first rows and stops,
-- O(batch) at any backlog, and a row leaves it when it is claimed, so no
-- claim steps over rows being delivered. The lease index holds the claimed
-- ones by claim time: the recovery of expired claims reads it from the
-- oldest and stops at the first live one. DONE and DEAD rows are in
-- neither. (Tables made before these indexes had one claim index.)
-- The lease index is partial on locked_at, which is set and cleared with
-- locked_by: the fenced updates by owner (acks, heartbeats, releases)
-- cannot use it (their "locked_by = owner" would imply a predicate on
-- locked_by), so they always find their rows by primary key.
DROP INDEX IF EXISTS {{schema}}{{name}}_claim_idx;
CREATE INDEX IF NOT EXISTS {{name}}_due_idx
    ON {{table}} (available_at, event_id) WHERE status IN (0, 2) AND locked_by IS NULL AND ordering_key IS NULL;
CREATE INDEX IF NOT EXISTS {{name}}_lease_idx
    ON {{table}} (locked_at) WHERE status IN (0, 2) AND locked_at IS NOT NULL;

-- The type index holds the rows of the due index by event type, then due
-- order: a claim of some event types only (a Client claims the types it
-- routes) reads each type's due rows in order and stops after its limit,
-- never the other types' rows that come first. Its condition names
-- locked_at where the due index's names locked_by (they are set and
-- cleared together), so that the filtered claim's condition cannot use
-- the due index, in generic plans too. Migrate adds it to tables made
-- before it.
CREATE INDEX IF NOT EXISTS {{name}}_type_idx
    ON {{table}} (event_type, available_at, event_id) WHERE status IN (0, 2) AND locked_at IS NULL AND ordering_key IS NULL;

-- The purge finds terminal rows by status and completion time; Stats
-- counts the DEAD ones in it (a range of status 3, never the DONE ones).
-- (Purge indexes made before it had no status: Migrate rebuilds them.)
CREATE INDEX IF NOT EXISTS {{name}}_purge_idx
    ON {{table}} (status, (COALESCE(done_at, created_at))) WHERE status IN (1, 3);

-- The owed index holds the DEAD events that still owe subscribers (of
-- an event type with several): Stats reads their lists, and counts the
-- other DEAD events in the purge index alone.
CREATE INDEX IF NOT EXISTS {{name}}_owed_idx
    ON {{table}} (event_id) WHERE status = 3 AND subscribers IS NOT NULL;

-- The order index holds the ordered events that are not DONE by key, in
-- seq order: the first entry of a key is its head, the one event of the
-- key that an ordered claim may take. The claim walks it from key to key
-- (one index descent per key); the hot path asks it whether a key has an
-- event pending. Rows of unordered Clients (no key) are not in it. (Due
-- indexes made before it also held ordered rows: Migrate rebuilds them.)
CREATE INDEX IF NOT EXISTS {{name}}_order_idx
    ON {{table}} (ordering_key, seq) WHERE ordering_key IS NOT NULL AND status IN (0, 2, 3);

-- The walk index holds the pending ordered events that are not parked, by
-- key in seq order: the ordered claim (outbox.DeadBlocksKey) walks it from
-- key to key, so keys whose events all wait behind a DEAD head (parked)
-- are not read at all. DEAD events are not in it.
CREATE INDEX IF NOT EXISTS {{name}}_walk_idx
    ON {{table}} (ordering_key, seq) WHERE ordering_key IS NOT NULL AND status IN (0, 2) AND parked = 0;

-- The park index holds the parked events: the ordered claims' periodic
-- sweep of the keys left parked with nothing holding them back reads them
-- alone (nothing, while no key is blocked).
CREATE INDEX IF NOT EXISTS {{name}}_park_idx
    ON {{table}} (ordering_key, seq) WHERE ordering_key IS NOT NULL AND status IN (0, 2) AND parked = 1;

-- The tenant index serves the admin queries of one tenant (Query.TenantID,
-- PurgeRequest.TenantID): a list by tenant and status in id order, read
-- from the page's first id and stopped after it; a count by tenant and
-- status; a purge by tenant, status and age, oldest id first. It holds
-- only the events that carry a tenant: a table without tenants pays
-- nothing for it. (The queries write "tenant_id <> ''" out, so that the
-- planner can use it in generic plans too.)
CREATE INDEX IF NOT EXISTS {{name}}_tnt_idx
    ON {{table}} (tenant_id, status, event_id) WHERE tenant_id <> '';
