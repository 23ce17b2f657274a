-- 0060: a Work a start gate parked before its first attempt says why it
-- waits: the gate's reason, shown while it waits and cleared when it
-- leaves waiting. Every other Work has none.
ALTER TABLE work ADD COLUMN wait_reason TEXT NOT NULL DEFAULT '';
