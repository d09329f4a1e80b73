-- Idempotency-key table for PostgreSQL 9.5+ (INSERT … ON CONFLICT).
-- {{table}} is the (validated) table name, {{name}} the same without its
-- schema. The index is {{name}}_created_idx: keep the table name to 51
-- characters so that it fits PostgreSQL's 63.
--
-- One row per (scope, key) of a command. The row is inserted in the
-- command's own transaction before the command runs (status 0), and
-- completed in that transaction with the response: status, the headers
-- kept (a JSON object of string arrays, or NULL) and the body. scope and
-- idem_key use the "C" collation: they compare byte-wise, as in Go.
-- fingerprint is the request's digest (hex). created_at and completed_at
-- are instants written by the application in UTC; the purge deletes by
-- created_at.
CREATE TABLE IF NOT EXISTS {{table}} (
    scope        VARCHAR(255) COLLATE "C" NOT NULL,
    idem_key     VARCHAR(255) COLLATE "C" NOT NULL,
    fingerprint  VARCHAR(128) NOT NULL,
    status       INTEGER      NOT NULL DEFAULT 0,
    headers      TEXT,
    body         BYTEA,
    created_at   TIMESTAMPTZ  NOT NULL,
    completed_at TIMESTAMPTZ,
    PRIMARY KEY (scope, idem_key)
);
CREATE INDEX IF NOT EXISTS {{name}}_created_idx ON {{table}} (created_at);
