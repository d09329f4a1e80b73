-- Consumer inbox table for SQLite 3.35+.
-- {{table}} is the (validated) table name, {{name}} the same without its
-- schema, {{schema}} the schema followed by a dot, or nothing.
--
-- One row per processed event id, stored in the primary key's B-tree
-- (WITHOUT ROWID). processed_at is INTEGER Unix microseconds, UTC; the
-- purge deletes by it.
CREATE TABLE IF NOT EXISTS {{table}} (
    event_id     VARCHAR(255) NOT NULL PRIMARY KEY,
    processed_at INTEGER      NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {{schema}}{{name}}_processed_idx ON {{name}} (processed_at);
