-- 0001: the whole schema as SQLite has it after its migration 0080, in one
-- step (PostgreSQL had no earlier releases to carry forward). Times are Unix
-- nanoseconds (UTC) in BIGINT, as on SQLite, so that keyset positions built
-- from Go times compare exactly; 0 means unset. Optional references are NULL
-- so that foreign keys hold. JSON is kept as TEXT, byte for byte as given.
-- Every text column is COLLATE "C": text compares and sorts as bytes, as on
-- SQLite, whatever collation the database was created with.

-- The event acceptance sequence: one row whose counter every accepting
-- transaction locks (SELECT ... FOR UPDATE) before it numbers its events and
-- holds until it commits or rolls back. The next acceptance anywhere waits
-- for that lock, so numbers are gap-free (a rollback gives its numbers back)
-- and increase in commit order (a number is taken only after every lower one
-- committed). A SEQUENCE would be neither.
CREATE TABLE event_counter (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	last BIGINT  NOT NULL CHECK (last >= 0)
);
INSERT INTO event_counter (id, last) VALUES (1, 0);

CREATE TABLE events (
	seq             BIGINT  PRIMARY KEY,
	id              TEXT COLLATE "C"    NOT NULL UNIQUE,
	type            TEXT COLLATE "C"    NOT NULL,
	source          TEXT COLLATE "C"    NOT NULL,
	scope           TEXT COLLATE "C"    NOT NULL,
	work            TEXT COLLATE "C"    NOT NULL DEFAULT '',
	execution       TEXT COLLATE "C"    NOT NULL DEFAULT '',
	correlation_key TEXT COLLATE "C"    NOT NULL DEFAULT '',
	data            TEXT COLLATE "C"    NOT NULL,
	parent          TEXT COLLATE "C"    REFERENCES events(id),
	root            TEXT COLLATE "C"    NOT NULL,
	depth           INTEGER NOT NULL,
	actor           TEXT COLLATE "C"    NOT NULL DEFAULT '',
	delivery_id     TEXT COLLATE "C"    NOT NULL DEFAULT '',
	accepted_at     BIGINT  NOT NULL
);
CREATE UNIQUE INDEX events_delivery ON events(source, delivery_id) WHERE delivery_id <> '';
CREATE INDEX events_scope ON events(scope, seq);
CREATE INDEX events_work ON events(work, seq) WHERE work <> '';
CREATE INDEX events_root ON events(root, seq);
CREATE INDEX events_key ON events(scope, correlation_key, seq) WHERE correlation_key <> '';

CREATE TABLE causal_roots (
	root         TEXT COLLATE "C"    PRIMARY KEY REFERENCES events(id),
	max_depth    INTEGER NOT NULL,
	per_minute   INTEGER NOT NULL,
	window_start BIGINT  NOT NULL,
	window_count INTEGER NOT NULL,
	pinned_at    BIGINT  NOT NULL
);

CREATE TABLE work (
	id              TEXT COLLATE "C"    PRIMARY KEY,
	scope           TEXT COLLATE "C"    NOT NULL,
	binding         TEXT COLLATE "C"    NOT NULL,
	state           TEXT COLLATE "C"    NOT NULL CHECK (state IN ('ready', 'running', 'waiting', 'succeeded', 'failed', 'cancelled')),
	blocked_reason  TEXT COLLATE "C"    NOT NULL DEFAULT '',
	blocked_detail  TEXT COLLATE "C"    NOT NULL DEFAULT '',
	wait_reason     TEXT COLLATE "C"    NOT NULL DEFAULT '',
	parent          TEXT COLLATE "C"    REFERENCES work(id),
	created_event   TEXT COLLATE "C"    NOT NULL DEFAULT '',
	outcome_message TEXT COLLATE "C"    NOT NULL DEFAULT '',
	outcome_data    TEXT,
	grants          TEXT COLLATE "C"    NOT NULL DEFAULT '[]',
	input_watermark BIGINT  NOT NULL DEFAULT 0,
	input_count     BIGINT  NOT NULL DEFAULT 0,
	attempts        INTEGER NOT NULL DEFAULT 0,
	revision        BIGINT  NOT NULL DEFAULT 1,
	created_at      BIGINT  NOT NULL,
	updated_at      BIGINT  NOT NULL
);
CREATE INDEX work_created ON work(created_at, id);
CREATE INDEX work_claimable ON work(state, blocked_reason, created_at, id);
CREATE INDEX work_scope ON work(scope, created_at, id);
CREATE INDEX work_parent ON work(parent, created_at, id) WHERE parent IS NOT NULL;

-- A key is owned by at most one nonterminal Work per scope: rows are kept
-- for history and released when the Work ends.
CREATE TABLE work_keys (
	scope       TEXT COLLATE "C"   NOT NULL,
	key         TEXT COLLATE "C"   NOT NULL,
	work        TEXT COLLATE "C"   NOT NULL REFERENCES work(id),
	acquired_at BIGINT NOT NULL,
	released_at BIGINT
);
CREATE UNIQUE INDEX work_keys_owner ON work_keys(scope, key) WHERE released_at IS NULL;
CREATE INDEX work_keys_work ON work_keys(work) WHERE released_at IS NULL;
CREATE INDEX work_keys_history ON work_keys(work, key);

CREATE TABLE work_inputs (
	work      TEXT COLLATE "C"   NOT NULL REFERENCES work(id),
	position  BIGINT NOT NULL,
	event     TEXT COLLATE "C"   NOT NULL REFERENCES events(id),
	queued_at BIGINT NOT NULL,
	PRIMARY KEY (work, position),
	UNIQUE (work, event)
);

CREATE TABLE executions (
	id                          TEXT COLLATE "C"    PRIMARY KEY,
	work                        TEXT COLLATE "C"    NOT NULL REFERENCES work(id),
	scope                       TEXT COLLATE "C"    NOT NULL,
	binding                     TEXT COLLATE "C"    NOT NULL,
	executor                    TEXT COLLATE "C"    NOT NULL,
	generation                  BIGINT  NOT NULL,
	epoch                       BIGINT  NOT NULL CHECK (epoch >= 1),
	owner                       TEXT COLLATE "C"    NOT NULL,
	lease_expires_at            BIGINT  NOT NULL,
	deadline                    BIGINT  NOT NULL,
	state                       TEXT COLLATE "C"    NOT NULL CHECK (state IN ('running', 'parked', 'stopping', 'finished')),
	input_watermark             BIGINT  NOT NULL,
	result                      TEXT COLLATE "C"    NOT NULL DEFAULT '' CHECK (result IN ('', 'succeeded', 'failed', 'cancelled', 'lost')),
	message                     TEXT COLLATE "C"    NOT NULL DEFAULT '',
	-- NULL until an executor observed how the segment ended.
	exit_code                   INTEGER,
	-- The epoch at which the current segment was handed to its executor
	-- (0: never).
	launched_epoch              BIGINT  NOT NULL DEFAULT 0,
	session                     TEXT COLLATE "C"    NOT NULL DEFAULT '',
	-- All NULL while no segment reported usage, all set together once one did.
	usage_input_tokens          BIGINT,
	usage_output_tokens         BIGINT,
	usage_cache_read_tokens     BIGINT,
	usage_cache_creation_tokens BIGINT,
	usage_cost_usd              DOUBLE PRECISION,
	usage_turns                 BIGINT,
	revision                    BIGINT  NOT NULL DEFAULT 1,
	created_at                  BIGINT  NOT NULL,
	updated_at                  BIGINT  NOT NULL
);
CREATE INDEX executions_created ON executions(created_at, id);
CREATE INDEX executions_work ON executions(work, created_at, id);
CREATE INDEX executions_leased ON executions(state, lease_expires_at);
CREATE INDEX executions_owner ON executions(owner, state);
-- At most one live execution per Work.
CREATE UNIQUE INDEX executions_live ON executions(work) WHERE state <> 'finished';

CREATE TABLE declarations (
	execution   TEXT COLLATE "C"   NOT NULL REFERENCES executions(id),
	epoch       BIGINT NOT NULL,
	kind        TEXT COLLATE "C"   NOT NULL CHECK (kind IN ('wait', 'outcome')),
	payload     TEXT COLLATE "C"   NOT NULL,
	declared_at BIGINT NOT NULL,
	applied_at  BIGINT,
	disposition TEXT COLLATE "C"   NOT NULL DEFAULT '',
	PRIMARY KEY (execution, epoch)
);
-- At most one pending declaration per execution.
CREATE UNIQUE INDEX declarations_pending ON declarations(execution) WHERE applied_at IS NULL;

CREATE TABLE timers (
	id         TEXT COLLATE "C"   PRIMARY KEY,
	kind       TEXT COLLATE "C"   NOT NULL,
	target     TEXT COLLATE "C"   NOT NULL,
	due_at     BIGINT NOT NULL,
	fired_at   BIGINT,
	created_at BIGINT NOT NULL
);
CREATE INDEX timers_due ON timers(due_at, id) WHERE fired_at IS NULL;

CREATE TABLE waits (
	id           TEXT COLLATE "C"    PRIMARY KEY,
	work         TEXT COLLATE "C"    NOT NULL REFERENCES work(id),
	scope        TEXT COLLATE "C"    NOT NULL,
	execution    TEXT COLLATE "C"    REFERENCES executions(id),
	epoch        BIGINT  NOT NULL DEFAULT 0,
	registration TEXT COLLATE "C"    NOT NULL DEFAULT '',
	types        TEXT COLLATE "C"    NOT NULL DEFAULT '[]',
	keys         TEXT COLLATE "C"    NOT NULL DEFAULT '[]',
	on_work_keys BOOLEAN NOT NULL DEFAULT FALSE,
	watermark    BIGINT  NOT NULL,
	timer        TEXT COLLATE "C"    REFERENCES timers(id),
	timeout_at   BIGINT  NOT NULL DEFAULT 0,
	state        TEXT COLLATE "C"    NOT NULL CHECK (state IN ('active', 'satisfied', 'timed_out', 'cancelled')),
	satisfied_by TEXT COLLATE "C"    REFERENCES events(id),
	created_at   BIGINT  NOT NULL,
	updated_at   BIGINT  NOT NULL
);
CREATE INDEX waits_created ON waits(created_at, id);
CREATE INDEX waits_work ON waits(work, created_at, id);
-- At most one active wait per Work.
CREATE UNIQUE INDEX waits_active ON waits(work) WHERE state = 'active';

CREATE TABLE wait_keys (
	wait TEXT COLLATE "C" NOT NULL REFERENCES waits(id),
	key  TEXT COLLATE "C" NOT NULL,
	PRIMARY KEY (wait, key)
);
CREATE INDEX wait_keys_key ON wait_keys(key);

CREATE TABLE artifacts (
	id         TEXT COLLATE "C"   PRIMARY KEY,
	execution  TEXT COLLATE "C"   NOT NULL REFERENCES executions(id),
	work       TEXT COLLATE "C"   NOT NULL,
	name       TEXT COLLATE "C"   NOT NULL,
	media_type TEXT COLLATE "C"   NOT NULL,
	size       BIGINT NOT NULL,
	sha256     TEXT COLLATE "C"   NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE INDEX artifacts_created ON artifacts(created_at, id);
CREATE INDEX artifacts_execution ON artifacts(execution, created_at, id);
CREATE INDEX artifacts_work ON artifacts(work, created_at, id);

-- The toolbelt's records. Execution tokens: only the SHA-256 digest of a
-- token is kept, never its text.
CREATE TABLE toolbelt_tokens (
	id          TEXT COLLATE "C"   PRIMARY KEY,
	digest      BYTEA  NOT NULL UNIQUE,
	execution   TEXT COLLATE "C"   NOT NULL,
	scope       TEXT COLLATE "C"   NOT NULL,
	work        TEXT COLLATE "C"   NOT NULL,
	binding     TEXT COLLATE "C"   NOT NULL,
	generation  BIGINT NOT NULL,
	epoch       BIGINT NOT NULL,
	operations  TEXT COLLATE "C"   NOT NULL DEFAULT '[]',
	issued_at   BIGINT NOT NULL,
	expires_at  BIGINT NOT NULL,
	revoked_at  BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX toolbelt_tokens_execution ON toolbelt_tokens(execution, epoch);
CREATE INDEX toolbelt_tokens_retention ON toolbelt_tokens(revoked_at, expires_at);

-- Request records: one per (execution, request id), for replay and
-- conflict. A withheld record (a sensitive operation) keeps no result and
-- no refusal; the CHECK makes the database itself refuse one that does.
CREATE TABLE toolbelt_replays (
	execution     TEXT COLLATE "C"    NOT NULL,
	request_id    TEXT COLLATE "C"    NOT NULL,
	operation     TEXT COLLATE "C"    NOT NULL,
	input_hash    TEXT COLLATE "C"    NOT NULL,
	state         TEXT COLLATE "C"    NOT NULL CHECK (state IN ('claimed', 'done')),
	result        TEXT,
	error_code    TEXT COLLATE "C"    NOT NULL DEFAULT '',
	error_message TEXT COLLATE "C"    NOT NULL DEFAULT '',
	withheld      BOOLEAN NOT NULL DEFAULT FALSE
		CHECK (NOT withheld OR (result IS NULL AND error_code = '' AND error_message = '')),
	created_at    BIGINT  NOT NULL,
	updated_at    BIGINT  NOT NULL,
	PRIMARY KEY (execution, request_id)
);
CREATE INDEX toolbelt_replays_created ON toolbelt_replays(created_at);

-- Call records. No token, digest, input value or secret is ever written
-- here.
CREATE TABLE toolbelt_calls (
	id          TEXT COLLATE "C"    PRIMARY KEY,
	kind        TEXT COLLATE "C"    NOT NULL CHECK (kind IN ('toolbelt.called', 'toolbelt.rejected')),
	operation   TEXT COLLATE "C"    NOT NULL DEFAULT '',
	execution   TEXT COLLATE "C"    NOT NULL DEFAULT '',
	epoch       BIGINT  NOT NULL DEFAULT 0,
	token_id    TEXT COLLATE "C"    NOT NULL DEFAULT '',
	result      TEXT COLLATE "C"    NOT NULL,
	gate        TEXT COLLATE "C"    NOT NULL DEFAULT '',
	refusal     TEXT COLLATE "C"    NOT NULL DEFAULT '',
	replayed    BOOLEAN NOT NULL DEFAULT FALSE,
	created_at  BIGINT  NOT NULL
);
CREATE INDEX toolbelt_calls_created ON toolbelt_calls(created_at, id);
CREATE INDEX toolbelt_calls_execution ON toolbelt_calls(execution, created_at, id);

-- The management API's records. Operator credentials: only the digest of a
-- token is kept. A name has at most one active credential.
CREATE TABLE operator_credentials (
	id         TEXT COLLATE "C"   PRIMARY KEY,
	name       TEXT COLLATE "C"   NOT NULL,
	role       TEXT COLLATE "C"   NOT NULL,
	digest     BYTEA  NOT NULL UNIQUE,
	created_at BIGINT NOT NULL,
	revoked_at BIGINT NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX operator_credentials_active ON operator_credentials(name) WHERE revoked_at = 0;
CREATE INDEX operator_credentials_name ON operator_credentials(name, created_at, id);

CREATE TABLE idempotency_records (
	principal  TEXT COLLATE "C"    NOT NULL,
	key        TEXT COLLATE "C"    NOT NULL,
	method     TEXT COLLATE "C"    NOT NULL,
	path       TEXT COLLATE "C"    NOT NULL,
	body_hash  TEXT COLLATE "C"    NOT NULL,
	status     INTEGER NOT NULL,
	body       BYTEA   NOT NULL,
	created_at BIGINT  NOT NULL,
	PRIMARY KEY (principal, key)
);
CREATE INDEX idempotency_records_created ON idempotency_records(created_at);

-- Committed configuration generations. normalized is the redacted
-- normalized configuration: no secret reference's text is ever stored here.
CREATE TABLE config_generations (
	number     BIGINT PRIMARY KEY CHECK (number >= 1),
	hash       TEXT COLLATE "C"   NOT NULL,
	normalized TEXT COLLATE "C"   NOT NULL,
	actor      TEXT COLLATE "C"   NOT NULL DEFAULT '',
	created_at BIGINT NOT NULL
);

CREATE TABLE config_scopes (
	id         TEXT COLLATE "C"    PRIMARY KEY,
	parent     TEXT COLLATE "C"    NOT NULL DEFAULT '',
	enabled    BOOLEAN NOT NULL,
	removed    BOOLEAN NOT NULL,
	active     BOOLEAN NOT NULL,
	bindings   TEXT COLLATE "C"    NOT NULL DEFAULT '[]',
	routes     TEXT COLLATE "C"    NOT NULL DEFAULT '[]',
	generation BIGINT  NOT NULL,
	updated_at BIGINT  NOT NULL
);

-- Keys the host generates once and keeps (the list cursor key).
CREATE TABLE host_keys (
	name       TEXT COLLATE "C"   PRIMARY KEY,
	value      BYTEA  NOT NULL,
	created_at BIGINT NOT NULL
);

-- Approvals, the records of the human extension. At most one approval of a
-- key is open (not consumed).
CREATE TABLE approvals (
	id          TEXT COLLATE "C"   PRIMARY KEY,
	scope       TEXT COLLATE "C"   NOT NULL,
	work        TEXT COLLATE "C"   NOT NULL,
	binding     TEXT COLLATE "C"   NOT NULL DEFAULT '',
	kind        TEXT COLLATE "C"   NOT NULL,
	operation   TEXT COLLATE "C"   NOT NULL DEFAULT '',
	input_hash  TEXT COLLATE "C"   NOT NULL DEFAULT '',
	state       TEXT COLLATE "C"   NOT NULL,
	actor       TEXT COLLATE "C"   NOT NULL DEFAULT '',
	note        TEXT COLLATE "C"   NOT NULL DEFAULT '',
	created_at  BIGINT NOT NULL,
	expires_at  BIGINT NOT NULL DEFAULT 0,
	decided_at  BIGINT NOT NULL DEFAULT 0,
	consumed_at BIGINT NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX approvals_open ON approvals(work, kind, operation, input_hash) WHERE consumed_at = 0;
CREATE INDEX approvals_scope ON approvals(scope, created_at, id);

-- Egress connection records (ended_at 0 while open).
CREATE TABLE egress_connections (
	id         TEXT COLLATE "C"    PRIMARY KEY,
	execution  TEXT COLLATE "C"    NOT NULL,
	host       TEXT COLLATE "C"    NOT NULL DEFAULT '',
	port       INTEGER NOT NULL DEFAULT 0,
	allowed    BOOLEAN NOT NULL,
	reason     TEXT COLLATE "C"    NOT NULL DEFAULT '',
	bytes_up   BIGINT  NOT NULL DEFAULT 0,
	bytes_down BIGINT  NOT NULL DEFAULT 0,
	created_at BIGINT  NOT NULL,
	ended_at   BIGINT  NOT NULL DEFAULT 0
);
CREATE INDEX egress_connections_execution ON egress_connections(execution, created_at, id);
