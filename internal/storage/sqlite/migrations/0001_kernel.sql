-- 0001: the coordination kernel. Times are Unix nanoseconds (UTC); 0 means
-- unset. Optional references are NULL so that foreign keys hold.

CREATE TABLE events (
	seq             INTEGER PRIMARY KEY,
	id              TEXT    NOT NULL UNIQUE,
	type            TEXT    NOT NULL,
	source          TEXT    NOT NULL,
	scope           TEXT    NOT NULL,
	work            TEXT    NOT NULL DEFAULT '',
	execution       TEXT    NOT NULL DEFAULT '',
	correlation_key TEXT    NOT NULL DEFAULT '',
	data            TEXT    NOT NULL,
	parent          TEXT    REFERENCES events(id),
	root            TEXT    NOT NULL,
	depth           INTEGER NOT NULL,
	actor           TEXT    NOT NULL DEFAULT '',
	delivery_id     TEXT    NOT NULL DEFAULT '',
	accepted_at     INTEGER NOT NULL
);
CREATE UNIQUE INDEX events_delivery ON events(source, delivery_id) WHERE delivery_id <> '';
CREATE INDEX events_scope ON events(scope, seq);
CREATE INDEX events_work ON events(work, seq) WHERE work <> '';
CREATE INDEX events_root ON events(root, seq);
CREATE INDEX events_key ON events(scope, correlation_key, seq) WHERE correlation_key <> '';

CREATE TABLE causal_roots (
	root         TEXT    PRIMARY KEY REFERENCES events(id),
	max_depth    INTEGER NOT NULL,
	per_minute   INTEGER NOT NULL,
	window_start INTEGER NOT NULL,
	window_count INTEGER NOT NULL,
	pinned_at    INTEGER NOT NULL
);

CREATE TABLE work (
	id              TEXT    PRIMARY KEY,
	scope           TEXT    NOT NULL,
	binding         TEXT    NOT NULL,
	state           TEXT    NOT NULL CHECK (state IN ('ready', 'running', 'waiting', 'succeeded', 'failed', 'cancelled')),
	blocked_reason  TEXT    NOT NULL DEFAULT '',
	blocked_detail  TEXT    NOT NULL DEFAULT '',
	parent          TEXT    REFERENCES work(id),
	created_event   TEXT    NOT NULL DEFAULT '',
	outcome_message TEXT    NOT NULL DEFAULT '',
	outcome_data    TEXT,
	grants          TEXT    NOT NULL DEFAULT '[]',
	input_watermark INTEGER NOT NULL DEFAULT 0,
	input_count     INTEGER NOT NULL DEFAULT 0,
	attempts        INTEGER NOT NULL DEFAULT 0,
	revision        INTEGER NOT NULL DEFAULT 1,
	created_at      INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL
);
CREATE INDEX work_created ON work(created_at, id);
CREATE INDEX work_claimable ON work(state, blocked_reason, created_at, id);
CREATE INDEX work_scope ON work(scope, created_at, id);
CREATE INDEX work_parent ON work(parent, created_at, id) WHERE parent IS NOT NULL;

-- A key is owned by at most one nonterminal Work per scope: rows are kept
-- for history and released when the Work ends.
CREATE TABLE work_keys (
	scope       TEXT    NOT NULL,
	key         TEXT    NOT NULL,
	work        TEXT    NOT NULL REFERENCES work(id),
	acquired_at INTEGER NOT NULL,
	released_at INTEGER
);
CREATE UNIQUE INDEX work_keys_owner ON work_keys(scope, key) WHERE released_at IS NULL;
CREATE INDEX work_keys_work ON work_keys(work) WHERE released_at IS NULL;

CREATE TABLE work_inputs (
	work      TEXT    NOT NULL REFERENCES work(id),
	position  INTEGER NOT NULL,
	event     TEXT    NOT NULL REFERENCES events(id),
	queued_at INTEGER NOT NULL,
	PRIMARY KEY (work, position),
	UNIQUE (work, event)
);

CREATE TABLE executions (
	id               TEXT    PRIMARY KEY,
	work             TEXT    NOT NULL REFERENCES work(id),
	scope            TEXT    NOT NULL,
	binding          TEXT    NOT NULL,
	executor         TEXT    NOT NULL,
	generation       INTEGER NOT NULL,
	epoch            INTEGER NOT NULL CHECK (epoch >= 1),
	owner            TEXT    NOT NULL,
	lease_expires_at INTEGER NOT NULL,
	deadline         INTEGER NOT NULL,
	state            TEXT    NOT NULL CHECK (state IN ('running', 'parked', 'stopping', 'finished')),
	input_watermark  INTEGER NOT NULL,
	result           TEXT    NOT NULL DEFAULT '' CHECK (result IN ('', 'succeeded', 'failed', 'cancelled', 'lost')),
	message          TEXT    NOT NULL DEFAULT '',
	exit_code        INTEGER NOT NULL DEFAULT 0,
	revision         INTEGER NOT NULL DEFAULT 1,
	created_at       INTEGER NOT NULL,
	updated_at       INTEGER NOT NULL
);
CREATE INDEX executions_created ON executions(created_at, id);
CREATE INDEX executions_work ON executions(work, created_at, id);
CREATE INDEX executions_leased ON executions(state, lease_expires_at);
CREATE INDEX executions_owner ON executions(owner, state);
-- At most one live execution per Work.
CREATE UNIQUE INDEX executions_live ON executions(work) WHERE state <> 'finished';

CREATE TABLE declarations (
	execution   TEXT    NOT NULL REFERENCES executions(id),
	epoch       INTEGER NOT NULL,
	kind        TEXT    NOT NULL CHECK (kind IN ('wait', 'outcome')),
	payload     TEXT    NOT NULL,
	declared_at INTEGER NOT NULL,
	applied_at  INTEGER,
	disposition TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (execution, epoch)
);
-- At most one pending declaration per execution.
CREATE UNIQUE INDEX declarations_pending ON declarations(execution) WHERE applied_at IS NULL;

CREATE TABLE timers (
	id         TEXT    PRIMARY KEY,
	kind       TEXT    NOT NULL,
	target     TEXT    NOT NULL,
	due_at     INTEGER NOT NULL,
	fired_at   INTEGER,
	created_at INTEGER NOT NULL
);
CREATE INDEX timers_due ON timers(due_at, id) WHERE fired_at IS NULL;

CREATE TABLE waits (
	id           TEXT    PRIMARY KEY,
	work         TEXT    NOT NULL REFERENCES work(id),
	scope        TEXT    NOT NULL,
	execution    TEXT    REFERENCES executions(id),
	epoch        INTEGER NOT NULL DEFAULT 0,
	registration TEXT    NOT NULL DEFAULT '',
	types        TEXT    NOT NULL DEFAULT '[]',
	keys         TEXT    NOT NULL DEFAULT '[]',
	on_work_keys INTEGER NOT NULL DEFAULT 0,
	watermark    INTEGER NOT NULL,
	timer        TEXT    REFERENCES timers(id),
	timeout_at   INTEGER NOT NULL DEFAULT 0,
	state        TEXT    NOT NULL CHECK (state IN ('active', 'satisfied', 'timed_out', 'cancelled')),
	satisfied_by TEXT    REFERENCES events(id),
	created_at   INTEGER NOT NULL,
	updated_at   INTEGER NOT NULL
);
CREATE INDEX waits_created ON waits(created_at, id);
CREATE INDEX waits_work ON waits(work, created_at, id);
-- At most one active wait per Work.
CREATE UNIQUE INDEX waits_active ON waits(work) WHERE state = 'active';

CREATE TABLE wait_keys (
	wait TEXT NOT NULL REFERENCES waits(id),
	key  TEXT NOT NULL,
	PRIMARY KEY (wait, key)
);
CREATE INDEX wait_keys_key ON wait_keys(key);

CREATE TABLE artifacts (
	id         TEXT    PRIMARY KEY,
	execution  TEXT    NOT NULL REFERENCES executions(id),
	work       TEXT    NOT NULL,
	name       TEXT    NOT NULL,
	media_type TEXT    NOT NULL,
	size       INTEGER NOT NULL,
	sha256     TEXT    NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE INDEX artifacts_created ON artifacts(created_at, id);
CREATE INDEX artifacts_execution ON artifacts(execution, created_at, id);
CREATE INDEX artifacts_work ON artifacts(work, created_at, id);
