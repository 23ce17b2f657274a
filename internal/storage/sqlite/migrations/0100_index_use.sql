-- 0100: indexes by the queries that use them. GET /v1/events?type=… pages
-- by (type, seq) instead of scanning every event. Two indexes no query can
-- use are dropped, so that no write pays for them: the credential list
-- pages by creation and a name lookup is served by the partial unique
-- index of active names; the token sweep's OR of two columns scans the
-- table whatever the index.
CREATE INDEX events_type ON events(type, seq);
DROP INDEX IF EXISTS operator_credentials_name;
DROP INDEX IF EXISTS toolbelt_tokens_retention;
