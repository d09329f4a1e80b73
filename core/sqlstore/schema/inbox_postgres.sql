-- Consumer inbox table for PostgreSQL 9.5+ (INSERT … ON CONFLICT).
-- {{table}} is the (validated) table name, {{name}} the same without its
-- schema. The index is {{name}}_processed_idx: keep the table name to 49
-- characters so that it fits PostgreSQL's 63.
--
-- One row per processed event id. processed_at is an instant written by
-- the application in UTC; the purge deletes by it.
-- event_id uses the "C" collation: ids compare byte-wise, as in Go.
CREATE TABLE IF NOT EXISTS {{table}} (
    event_id     VARCHAR(255) COLLATE "C" NOT NULL PRIMARY KEY,
    processed_at TIMESTAMPTZ  NOT NULL
);
CREATE INDEX IF NOT EXISTS {{name}}_processed_idx ON {{table}} (processed_at);
