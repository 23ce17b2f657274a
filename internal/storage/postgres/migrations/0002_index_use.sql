-- 0002: the indexes of SQLite's 0100, by the queries that use them.
-- GET /v1/events?type=… pages by (type, seq) instead of reading every
-- event of the type's scope; the credential list pages by creation and a
-- name lookup is served by the partial unique index of active names; the
-- token sweep reads the whole table whatever the index. The delivery check
-- names the partial index's condition, so that a generic plan uses it.
CREATE INDEX events_type ON events(type, seq);
DROP INDEX IF EXISTS operator_credentials_name;
DROP INDEX IF EXISTS toolbelt_tokens_retention;
