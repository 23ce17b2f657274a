-- 0110: several daemons on one store. An execution records the node (the
-- state directory, whose id is stable across restarts) whose daemon
-- launched its current segment ('' for executions written before nodes
-- were recorded: they count as the node that reads them). duty_leases
-- holds who runs each store-wide duty (firing timers, recovering expired
-- leases, the sweeps) until when; it is taken and renewed by
-- compare-and-set.
ALTER TABLE executions ADD COLUMN node TEXT NOT NULL DEFAULT '';
CREATE TABLE duty_leases (
	name       TEXT    PRIMARY KEY,
	owner      TEXT    NOT NULL,
	expires_at INTEGER NOT NULL,
	taken_at   INTEGER NOT NULL
);
