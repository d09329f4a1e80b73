-- Idempotency-key table for SQLite 3.35+.
-- {{table}} is the (validated) table name, {{name}} the same without its
-- schema, {{schema}} the schema followed by a dot, or nothing.
--
-- One row per (scope, key) of a command. The row is inserted in the
-- command's own transaction before the command runs (status 0), and
-- completed in that transaction with the response: status, the headers
-- kept (a JSON object of string arrays, or NULL) and the body. scope and
-- idem_key compare byte-wise (SQLite's BINARY collation). fingerprint is
-- the request's digest (hex). created_at and completed_at are INTEGER Unix
-- microseconds, UTC; the purge deletes by created_at.
CREATE TABLE IF NOT EXISTS {{table}} (
    scope        VARCHAR(255) NOT NULL,
    idem_key     VARCHAR(255) NOT NULL,
    fingerprint  VARCHAR(128) NOT NULL,
    status       INTEGER      NOT NULL DEFAULT 0,
    headers      TEXT,
    body         BLOB,
    created_at   INTEGER      NOT NULL,
    completed_at INTEGER,
    PRIMARY KEY (scope, idem_key)
);
CREATE INDEX IF NOT EXISTS {{schema}}{{name}}_created_idx ON {{name}} (created_at);
