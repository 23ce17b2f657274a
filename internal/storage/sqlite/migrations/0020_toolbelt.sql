-- 0020: the toolbelt's records. Numbered apart from the kernel's 000x
-- migrations. Times are Unix nanoseconds (UTC); 0 means unset.

-- Execution tokens: only the SHA-256 digest of a token is kept, never its
-- text. The digest and id indexes go with the row when the sweep deletes it.
CREATE TABLE toolbelt_tokens (
	id          TEXT    PRIMARY KEY,
	digest      BLOB    NOT NULL UNIQUE,
	execution   TEXT    NOT NULL,
	scope       TEXT    NOT NULL,
	work        TEXT    NOT NULL,
	binding     TEXT    NOT NULL,
	generation  INTEGER NOT NULL,
	epoch       INTEGER NOT NULL,
	operations  TEXT    NOT NULL DEFAULT '[]',
	issued_at   INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL,
	revoked_at  INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX toolbelt_tokens_execution ON toolbelt_tokens(execution, epoch);
CREATE INDEX toolbelt_tokens_retention ON toolbelt_tokens(revoked_at, expires_at);

-- Request records: one per (execution, request id), for replay and
-- conflict. execution '' marks a record written before records named their
-- execution; the sweep keeps those.
CREATE TABLE toolbelt_replays (
	execution     TEXT    NOT NULL,
	request_id    TEXT    NOT NULL,
	operation     TEXT    NOT NULL,
	input_hash    TEXT    NOT NULL,
	state         TEXT    NOT NULL CHECK (state IN ('claimed', 'done')),
	result        TEXT,
	error_code    TEXT    NOT NULL DEFAULT '',
	error_message TEXT    NOT NULL DEFAULT '',
	created_at    INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL,
	PRIMARY KEY (execution, request_id)
);
CREATE INDEX toolbelt_replays_created ON toolbelt_replays(created_at);

-- Call records: toolbelt.called / toolbelt.rejected with toolbelt.result.
-- No token, digest, input value or secret is ever written here.
CREATE TABLE toolbelt_calls (
	id          TEXT    PRIMARY KEY,
	kind        TEXT    NOT NULL CHECK (kind IN ('toolbelt.called', 'toolbelt.rejected')),
	operation   TEXT    NOT NULL DEFAULT '',
	execution   TEXT    NOT NULL DEFAULT '',
	epoch       INTEGER NOT NULL DEFAULT 0,
	token_id    TEXT    NOT NULL DEFAULT '',
	result      TEXT    NOT NULL,
	gate        TEXT    NOT NULL DEFAULT '',
	replayed    INTEGER NOT NULL DEFAULT 0,
	created_at  INTEGER NOT NULL
);
CREATE INDEX toolbelt_calls_created ON toolbelt_calls(created_at, id);
CREATE INDEX toolbelt_calls_execution ON toolbelt_calls(execution, created_at, id);
