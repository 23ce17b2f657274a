-- 0070: approvals, the records of the human extension: a held call (one
-- operation with one input's hash) or a held start of a Work, and what an
-- operator decided. Times are Unix nanoseconds (UTC); 0 means unset. At
-- most one approval of a key is open (not consumed).
CREATE TABLE approvals (
	id          TEXT    PRIMARY KEY,
	scope       TEXT    NOT NULL,
	work        TEXT    NOT NULL,
	binding     TEXT    NOT NULL DEFAULT '',
	kind        TEXT    NOT NULL,
	operation   TEXT    NOT NULL DEFAULT '',
	input_hash  TEXT    NOT NULL DEFAULT '',
	state       TEXT    NOT NULL,
	actor       TEXT    NOT NULL DEFAULT '',
	note        TEXT    NOT NULL DEFAULT '',
	created_at  INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL DEFAULT 0,
	decided_at  INTEGER NOT NULL DEFAULT 0,
	consumed_at INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX approvals_open ON approvals(work, kind, operation, input_hash) WHERE consumed_at = 0;
CREATE INDEX approvals_scope ON approvals(scope, created_at, id);
