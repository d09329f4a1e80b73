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
-- MySQL and MariaDB have no partial indexes. Generated columns play their
-- part: due_at is available_at of unclaimed pending rows, lease_at the
-- claim time of claimed pending rows, purge_at the completion time of
-- terminal rows, each NULL otherwise. Their indexes hold every row, but a
-- range such as due_at <= now skips the NULLs and is read in order: the
-- fresh claim is O(batch) at any backlog and never steps over claimed or
-- finished rows; the recovery of expired claims reads lease_at from the
-- oldest. Tables made with the earlier claim_at column are upgraded by
-- Migrate (see mysqlUpgrade).
--
-- ordering_key is the key of an event written by an ordered Client (NULL
-- for the others), seq numbers the rows at insert: of two events of one
-- key, the one with the lower seq is delivered first. open_key is the key
-- of ordered events that are not DONE: its index lists each key's events
-- in seq order, so the first entry of a key is its head, the one event of
-- the key an ordered claim may take; the claim reads the heads of many
-- keys with a loose index scan (GROUP BY open_key with MIN(seq)). due_at
-- leaves ordered rows out. Migrate adds the columns to tables made before
-- them.
--
-- parked is 1 on a pending ordered event that waits behind a DEAD event
-- of its key (outbox.DeadBlocksKey); walk_key is the key of the pending
-- ordered events that are not parked. The ordered claim walks its index
-- (GROUP BY walk_key with MIN(seq)), so keys whose events all wait behind
-- a DEAD head are not read at all. park_key is the key of the parked
-- events: the ordered claims' periodic sweep of the keys left parked with
-- nothing holding them back reads its index alone. Migrate adds them to
-- tables made before them.
--
-- The purge index leads with status: the purge reads one status by
-- completion time, and Stats counts the pending and DEAD rows in it (the
-- ranges of their statuses, never the DONE ones), the pending ones due
-- and the oldest from the index alone; dead_owes (1 for a DEAD event
-- that owes subscribers) leaves Stats only those DEAD rows to read.
-- Migrate rebuilds a purge index made before it with other columns.
--
-- pending_type is the event type of a pending row. The type index holds
-- the pending rows by it, then due_at (the other rows are under NULL): a
-- claim of some event types only (a Client claims the types it routes)
-- reads the range of each type's due rows in due order (due_at <= now
-- skips the claimed and ordered ones, whose due_at is NULL), from the
-- index alone, and stops after its limit, never the other types' rows
-- that come first; Stats counts the pending rows per type and finds the
-- oldest in it alone. Migrate adds both to tables made before them.
--
-- The tenant index serves the admin queries of one tenant (a list by
-- tenant and status in id order, a count, a purge by tenant, status and
-- age, oldest id first). Without partial indexes it holds every row,
-- those without a tenant ('') too. Migrate adds it to tables made before
-- it (like every KEY of this statement a table lacks).
--
-- subscribers are the names of the subscribers an event still owes (of an
-- event type with several, see Registry.Subscribe), comma-separated, once
-- a delivery to some of them failed; NULL for every other event. Migrate
-- adds it to tables made before it.
CREATE TABLE IF NOT EXISTS {{table}} (
    event_id       VARCHAR(36)  NOT NULL,
    event_type     VARCHAR(128) NOT NULL,
    aggregate_type VARCHAR(64)  NOT NULL,
    aggregate_id   VARCHAR(128) NOT NULL DEFAULT '',
    tenant_id      VARCHAR(64)  NOT NULL DEFAULT '',
    schema_version INT          NOT NULL DEFAULT 1,
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
    ordering_key   VARCHAR(255) NULL,
    subscribers    TEXT         NULL,
    seq            BIGINT       NOT NULL AUTO_INCREMENT,
    parked         TINYINT      NOT NULL DEFAULT 0,
    due_at         DATETIME(6) GENERATED ALWAYS AS (CASE WHEN status IN (0, 2) AND locked_by IS NULL AND ordering_key IS NULL THEN available_at END) VIRTUAL,
    lease_at       DATETIME(6) GENERATED ALWAYS AS (CASE WHEN status IN (0, 2) AND locked_by IS NOT NULL THEN locked_at END) VIRTUAL,
    purge_at       DATETIME(6) GENERATED ALWAYS AS (CASE WHEN status IN (1, 3) THEN COALESCE(done_at, created_at) END) VIRTUAL,
    open_key       VARCHAR(255) GENERATED ALWAYS AS (CASE WHEN status IN (0, 2, 3) THEN ordering_key END) VIRTUAL,
    walk_key       VARCHAR(255) GENERATED ALWAYS AS (CASE WHEN status IN (0, 2) AND parked = 0 THEN ordering_key END) VIRTUAL,
    park_key       VARCHAR(255) GENERATED ALWAYS AS (CASE WHEN status IN (0, 2) AND parked = 1 THEN ordering_key END) VIRTUAL,
    dead_owes      TINYINT GENERATED ALWAYS AS (CASE WHEN status = 3 AND subscribers IS NOT NULL THEN 1 END) VIRTUAL,
    pending_type   VARCHAR(128) GENERATED ALWAYS AS (CASE WHEN status IN (0, 2) THEN event_type END) VIRTUAL,
    PRIMARY KEY (event_id),
    UNIQUE KEY outbox_seq_idx (seq),
    KEY outbox_due_idx (due_at, event_id),
    KEY outbox_type_idx (pending_type, due_at, event_id, created_at),
    KEY outbox_lease_idx (lease_at),
    KEY outbox_purge_idx (status, purge_at, available_at, created_at, dead_owes),
    KEY outbox_order_idx (open_key, seq),
    KEY outbox_walk_idx (walk_key, seq),
    KEY outbox_park_idx (park_key, seq),
    KEY outbox_tnt_idx (tenant_id, status, event_id),
    CHECK ((payload IS NULL) <> (payload_bytes IS NULL))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
