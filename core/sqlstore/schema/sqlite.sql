-- Outbox table for SQLite 3.35+.
-- {{table}} is the (validated) table name, {{name}} the same without its
-- schema, {{schema}} the schema followed by a dot, or nothing.
-- Timestamps are INTEGER Unix microseconds, UTC.
-- ordering_key is the key of an event written by an ordered Client (NULL
-- for the others); the rowid numbers the rows at insert (writes are
-- serialized, so it follows the commit order): of two events of one key,
-- the one with the lower rowid is delivered first. Migrate adds the
-- column to tables made before it (see sqliteUpgrade).
-- subscribers are the names of the subscribers an event still owes (of an
-- event type with several, see Registry.Subscribe), comma-separated, once
-- a delivery to some of them failed; NULL for every other event. Migrate
-- adds it to tables made before it.
-- parked is 1 on a pending ordered event that waits behind a DEAD event
-- of its key (outbox.DeadBlocksKey): the walk index leaves it out, so that
-- a blocked key costs the ordered claim nothing. Migrate adds it to
-- tables made before it.
CREATE TABLE IF NOT EXISTS {{table}} (
    event_id       VARCHAR(36)  NOT NULL PRIMARY KEY,
    event_type     VARCHAR(128) NOT NULL,
    aggregate_type VARCHAR(64)  NOT NULL,
    aggregate_id   VARCHAR(128) NOT NULL DEFAULT '',
    tenant_id      VARCHAR(64)  NOT NULL DEFAULT '',
    schema_version INTEGER      NOT NULL DEFAULT 1,
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
    ordering_key   VARCHAR(255),
    subscribers    TEXT,
    parked         SMALLINT     NOT NULL DEFAULT 0,
    CHECK ((payload IS NULL) <> (payload_bytes IS NULL))
);

-- The fresh claim walks unclaimed unordered pending rows in due order (O(batch) at
-- any backlog; a claimed row leaves this index); the recovery of expired
-- claims walks claimed pending rows by claim time. (Tables made before
-- these indexes had one claim index.)
DROP INDEX IF EXISTS {{schema}}{{name}}_claim_idx;
CREATE INDEX IF NOT EXISTS {{schema}}{{name}}_due_idx
    ON {{name}} (available_at, event_id) WHERE status IN (0, 2) AND locked_by IS NULL AND ordering_key IS NULL;
CREATE INDEX IF NOT EXISTS {{schema}}{{name}}_lease_idx
    ON {{name}} (locked_at) WHERE status IN (0, 2) AND locked_at IS NOT NULL;

-- The type index holds the rows of the due index by event type, then due
-- order: a claim of some event types only (a Client claims the types it
-- routes) reads each type's due rows in order and stops after its limit,
-- never the other types' rows that come first. Its condition names
-- locked_at where the due index's names locked_by (they are set and
-- cleared together), so that the filtered claim's condition cannot use
-- the due index, in generic plans too. Migrate adds it to tables made
-- before it.
CREATE INDEX IF NOT EXISTS {{schema}}{{name}}_type_idx
    ON {{name}} (event_type, available_at, event_id) WHERE status IN (0, 2) AND locked_at IS NULL AND ordering_key IS NULL;

-- The purge finds terminal rows by status and completion time; Stats
-- counts the DEAD ones in it (a range of status 3, never the DONE ones).
-- (Purge indexes made before it had no status: Migrate rebuilds them.)
CREATE INDEX IF NOT EXISTS {{schema}}{{name}}_purge_idx
    ON {{name}} (status, COALESCE(done_at, created_at)) WHERE status IN (1, 3);

-- The owed index holds the DEAD events that still owe subscribers (of
-- an event type with several): Stats reads their lists, and counts the
-- other DEAD events in the purge index alone.
CREATE INDEX IF NOT EXISTS {{schema}}{{name}}_owed_idx
    ON {{name}} (event_id) WHERE status = 3 AND subscribers IS NOT NULL;

-- The order index holds the ordered events that are not DONE by key, in
-- rowid order (every index ends with the rowid): the first entry of a key
-- is its head, the one event of the key an ordered claim may take.
CREATE INDEX IF NOT EXISTS {{schema}}{{name}}_order_idx
    ON {{name}} (ordering_key) WHERE ordering_key IS NOT NULL AND status IN (0, 2, 3);

-- The walk index holds the pending ordered events that are not parked, by
-- key in rowid order: the ordered claim (outbox.DeadBlocksKey) walks it
-- from key to key, so keys whose events all wait behind a DEAD head
-- (parked) are not read at all. DEAD events are not in it.
CREATE INDEX IF NOT EXISTS {{schema}}{{name}}_walk_idx
    ON {{name}} (ordering_key) WHERE ordering_key IS NOT NULL AND status IN (0, 2) AND parked = 0;

-- The park index holds the parked events: the ordered claims' periodic
-- sweep of the keys left parked with nothing holding them back reads them
-- alone (nothing, while no key is blocked).
CREATE INDEX IF NOT EXISTS {{schema}}{{name}}_park_idx
    ON {{name}} (ordering_key) WHERE ordering_key IS NOT NULL AND status IN (0, 2) AND parked = 1;

-- The tenant index serves the admin queries of one tenant (a list by
-- tenant and status in id order, a count, a purge by tenant, status and
-- age). It holds only the events that carry a tenant.
CREATE INDEX IF NOT EXISTS {{schema}}{{name}}_tnt_idx
    ON {{name}} (tenant_id, status, event_id) WHERE tenant_id <> '';
