-- 0080: egress connection records, one per connection an execution opened
-- (or tried to) through the daemon's egress proxy: where to, whether it was
-- allowed (and why not), the bytes each way, and when it started and ended
-- (Unix nanoseconds, UTC; ended_at 0 while open).
CREATE TABLE egress_connections (
	id         TEXT    PRIMARY KEY,
	execution  TEXT    NOT NULL,
	host       TEXT    NOT NULL DEFAULT '',
	port       INTEGER NOT NULL DEFAULT 0,
	allowed    INTEGER NOT NULL,
	reason     TEXT    NOT NULL DEFAULT '',
	bytes_up   INTEGER NOT NULL DEFAULT 0,
	bytes_down INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	ended_at   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX egress_connections_execution ON egress_connections(execution, created_at, id);
