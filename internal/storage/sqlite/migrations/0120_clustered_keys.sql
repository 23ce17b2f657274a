-- foreign_keys: off
-- 0120: the tables keyed by text are stored by their key (WITHOUT ROWID).
-- A rowid table with a text primary key keeps two b-trees, the rows by
-- rowid and the key's index, so every insert wrote both and every lookup
-- by id searched both. Clustered, a row is one b-tree entry: each commit
-- writes fewer pages and a lookup by id is one search. Each table is
-- rebuilt as SQLite's schema-change procedure says (new table, copy,
-- drop, rename, indexes again), with foreign keys off while it runs (the
-- first line tells the migration runner) and checked before the commit.

CREATE TABLE work_new (
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
	updated_at      INTEGER NOT NULL,
	wait_reason     TEXT    NOT NULL DEFAULT ''
) WITHOUT ROWID;
INSERT INTO work_new (id, scope, binding, state, blocked_reason, blocked_detail, parent, created_event, outcome_message, outcome_data,
		grants, input_watermark, input_count, attempts, revision, created_at, updated_at, wait_reason)
	SELECT id, scope, binding, state, blocked_reason, blocked_detail, parent, created_event, outcome_message, outcome_data,
		grants, input_watermark, input_count, attempts, revision, created_at, updated_at, wait_reason FROM work;
DROP TABLE work;
ALTER TABLE work_new RENAME TO work;
CREATE INDEX work_created ON work(created_at, id);
CREATE INDEX work_claimable ON work(state, blocked_reason, created_at, id);
CREATE INDEX work_scope ON work(scope, created_at, id);
CREATE INDEX work_parent ON work(parent, created_at, id) WHERE parent IS NOT NULL;

CREATE TABLE work_inputs_new (
	work      TEXT    NOT NULL REFERENCES work(id),
	position  INTEGER NOT NULL,
	event     TEXT    NOT NULL REFERENCES events(id),
	queued_at INTEGER NOT NULL,
	PRIMARY KEY (work, position),
	UNIQUE (work, event)
) WITHOUT ROWID;
INSERT INTO work_inputs_new (work, position, event, queued_at) SELECT work, position, event, queued_at FROM work_inputs;
DROP TABLE work_inputs;
ALTER TABLE work_inputs_new RENAME TO work_inputs;

CREATE TABLE executions_new (
	id                          TEXT    PRIMARY KEY,
	work                        TEXT    NOT NULL REFERENCES work(id),
	scope                       TEXT    NOT NULL,
	binding                     TEXT    NOT NULL,
	executor                    TEXT    NOT NULL,
	generation                  INTEGER NOT NULL,
	epoch                       INTEGER NOT NULL CHECK (epoch >= 1),
	owner                       TEXT    NOT NULL,
	lease_expires_at            INTEGER NOT NULL,
	deadline                    INTEGER NOT NULL,
	state                       TEXT    NOT NULL CHECK (state IN ('running', 'parked', 'stopping', 'finished')),
	input_watermark             INTEGER NOT NULL,
	result                      TEXT    NOT NULL DEFAULT '' CHECK (result IN ('', 'succeeded', 'failed', 'cancelled', 'lost')),
	message                     TEXT    NOT NULL DEFAULT '',
	revision                    INTEGER NOT NULL DEFAULT 1,
	created_at                  INTEGER NOT NULL,
	updated_at                  INTEGER NOT NULL,
	exit_code                   INTEGER,
	launched_epoch              INTEGER NOT NULL DEFAULT 0,
	session                     TEXT    NOT NULL DEFAULT '',
	usage_input_tokens          INTEGER,
	usage_output_tokens         INTEGER,
	usage_cache_read_tokens     INTEGER,
	usage_cache_creation_tokens INTEGER,
	usage_cost_usd              REAL,
	usage_turns                 INTEGER,
	node                        TEXT    NOT NULL DEFAULT ''
) WITHOUT ROWID;
INSERT INTO executions_new (id, work, scope, binding, executor, generation, epoch, owner, lease_expires_at, deadline, state,
		input_watermark, result, message, revision, created_at, updated_at, exit_code, launched_epoch, session,
		usage_input_tokens, usage_output_tokens, usage_cache_read_tokens, usage_cache_creation_tokens, usage_cost_usd, usage_turns, node)
	SELECT id, work, scope, binding, executor, generation, epoch, owner, lease_expires_at, deadline, state,
		input_watermark, result, message, revision, created_at, updated_at, exit_code, launched_epoch, session,
		usage_input_tokens, usage_output_tokens, usage_cache_read_tokens, usage_cache_creation_tokens, usage_cost_usd, usage_turns, node
	FROM executions;
DROP TABLE executions;
ALTER TABLE executions_new RENAME TO executions;
CREATE INDEX executions_created ON executions(created_at, id);
CREATE INDEX executions_work ON executions(work, created_at, id);
CREATE INDEX executions_leased ON executions(state, lease_expires_at);
CREATE INDEX executions_owner ON executions(owner, state);
CREATE UNIQUE INDEX executions_live ON executions(work) WHERE state <> 'finished';

CREATE TABLE idempotency_records_new (
	principal  TEXT    NOT NULL,
	key        TEXT    NOT NULL,
	method     TEXT    NOT NULL,
	path       TEXT    NOT NULL,
	body_hash  TEXT    NOT NULL,
	status     INTEGER NOT NULL,
	body       BLOB    NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (principal, key)
) WITHOUT ROWID;
INSERT INTO idempotency_records_new (principal, key, method, path, body_hash, status, body, created_at)
	SELECT principal, key, method, path, body_hash, status, body, created_at FROM idempotency_records;
DROP TABLE idempotency_records;
ALTER TABLE idempotency_records_new RENAME TO idempotency_records;
CREATE INDEX idempotency_records_created ON idempotency_records(created_at);

CREATE TABLE toolbelt_calls_new (
	id          TEXT    PRIMARY KEY,
	kind        TEXT    NOT NULL CHECK (kind IN ('toolbelt.called', 'toolbelt.rejected')),
	operation   TEXT    NOT NULL DEFAULT '',
	execution   TEXT    NOT NULL DEFAULT '',
	epoch       INTEGER NOT NULL DEFAULT 0,
	token_id    TEXT    NOT NULL DEFAULT '',
	result      TEXT    NOT NULL,
	gate        TEXT    NOT NULL DEFAULT '',
	replayed    INTEGER NOT NULL DEFAULT 0,
	created_at  INTEGER NOT NULL,
	refusal     TEXT    NOT NULL DEFAULT ''
) WITHOUT ROWID;
INSERT INTO toolbelt_calls_new (id, kind, operation, execution, epoch, token_id, result, gate, replayed, created_at, refusal)
	SELECT id, kind, operation, execution, epoch, token_id, result, gate, replayed, created_at, refusal FROM toolbelt_calls;
DROP TABLE toolbelt_calls;
ALTER TABLE toolbelt_calls_new RENAME TO toolbelt_calls;
CREATE INDEX toolbelt_calls_created ON toolbelt_calls(created_at, id);
CREATE INDEX toolbelt_calls_execution ON toolbelt_calls(execution, created_at, id);
