-- Idempotency-key table for MySQL 8.0+ and MariaDB 10.6+ (InnoDB).
-- {{table}} is the (validated) table name (index names are local to the
-- table).
--
-- One row per (scope, key) of a command. The row is inserted in the
-- command's own transaction before the command runs (status 0), and
-- completed in that transaction with the response: status, the headers
-- kept (a JSON object of string arrays, or NULL) and the body. scope and
-- idem_key are VARBINARY: they compare byte for byte, as in Go, with no
-- collation that would make "a" equal "A" or "a " (PAD SPACE).
-- fingerprint is the request's digest (hex). created_at and completed_at
-- are DATETIME(6) holding UTC, bound by the application; the purge deletes
-- by created_at.
CREATE TABLE IF NOT EXISTS {{table}} (
    scope        VARBINARY(255) NOT NULL,
    idem_key     VARBINARY(255) NOT NULL,
    fingerprint  VARCHAR(128)   NOT NULL,
    status       INT            NOT NULL DEFAULT 0,
    headers      TEXT           NULL,
    body         LONGBLOB       NULL,
    created_at   DATETIME(6)    NOT NULL,
    completed_at DATETIME(6)    NULL,
    PRIMARY KEY (scope, idem_key),
    KEY idempotency_created_idx (created_at)
) ENGINE = InnoDB;
