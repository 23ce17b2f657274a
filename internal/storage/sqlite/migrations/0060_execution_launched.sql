-- 0060: an execution records the epoch at which its current segment was
-- handed to its executor (launched_epoch; 0: never), written just before
-- the executor starts the process, so that recovery can tell an attempt
-- that never ran (claimed, then the daemon died before launch) from one
-- whose process may be running. Rows recorded before it are taken as
-- launched at their current epoch: that is what was assumed of them.
ALTER TABLE executions ADD COLUMN launched_epoch INTEGER NOT NULL DEFAULT 0;
UPDATE executions SET launched_epoch = epoch;
