-- 0050: an execution's exit code is NULL until an executor observed how its
-- segment ended. Before, a stop confirmed without the executor's result, a
-- lost segment, a segment that never started and an executor error all
-- read as exit code 0. The column is replaced by a nullable one (SQLite
-- cannot drop NOT NULL in place). For the rows already recorded, only a
-- code that can only have come from an observation is kept: a nonzero one,
-- one of a succeeded or parked execution; any other 0 becomes unknown.
ALTER TABLE executions ADD COLUMN exit_observed INTEGER;
UPDATE executions SET exit_observed = exit_code
	WHERE exit_code <> 0 OR result = 'succeeded' OR state = 'parked';
ALTER TABLE executions DROP COLUMN exit_code;
ALTER TABLE executions RENAME COLUMN exit_observed TO exit_code;
