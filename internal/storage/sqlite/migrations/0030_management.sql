-- 0030: the management API's records. Numbered apart from the kernel's and
-- the toolbelt's migrations. Times are Unix nanoseconds (UTC); 0 means unset.

-- Operator credentials: only the SHA-256 digest of a token is kept, never
-- its text. A name has at most one active credential.
CREATE TABLE operator_credentials (
	id         TEXT    PRIMARY KEY,
	name       TEXT    NOT NULL,
	role       TEXT    NOT NULL,
	digest     BLOB    NOT NULL UNIQUE,
	created_at INTEGER NOT NULL,
	revoked_at INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX operator_credentials_active ON operator_credentials(name) WHERE revoked_at = 0;
CREATE INDEX operator_credentials_name ON operator_credentials(name, created_at, id);

-- Idempotency-Key history: the response of a completed request, by
-- principal and effective key, kept 30 days. Tokens are never recorded:
-- the routes that return one take no key.
CREATE TABLE idempotency_records (
	principal  TEXT    NOT NULL,
	key        TEXT    NOT NULL,
	method     TEXT    NOT NULL,
	path       TEXT    NOT NULL,
	body_hash  TEXT    NOT NULL,
	status     INTEGER NOT NULL,
	body       BLOB    NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (principal, key)
);
CREATE INDEX idempotency_records_created ON idempotency_records(created_at);

-- Committed configuration generations. normalized is the redacted
-- normalized configuration: no secret reference's text is ever stored here.
CREATE TABLE config_generations (
	number     INTEGER PRIMARY KEY CHECK (number >= 1),
	hash       TEXT    NOT NULL,
	normalized TEXT    NOT NULL,
	actor      TEXT    NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL
);

-- The committed scope records, as of the generation that last changed
-- each one.
CREATE TABLE config_scopes (
	id         TEXT    PRIMARY KEY,
	parent     TEXT    NOT NULL DEFAULT '',
	enabled    INTEGER NOT NULL,
	removed    INTEGER NOT NULL,
	active     INTEGER NOT NULL,
	bindings   TEXT    NOT NULL DEFAULT '[]',
	routes     TEXT    NOT NULL DEFAULT '[]',
	generation INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);

-- Keys the host generates once and keeps (the list cursor key).
CREATE TABLE host_keys (
	name       TEXT    PRIMARY KEY,
	value      BLOB    NOT NULL,
	created_at INTEGER NOT NULL
);
