-- 0075: an execution records the agent session its segments continue
-- (session; '' for none, the last one a segment's result named) and what
-- its segments consumed, summed (usage_*; all NULL while no segment
-- reported any usage, all set together once one did).
ALTER TABLE executions ADD COLUMN session TEXT NOT NULL DEFAULT '';
ALTER TABLE executions ADD COLUMN usage_input_tokens INTEGER;
ALTER TABLE executions ADD COLUMN usage_output_tokens INTEGER;
ALTER TABLE executions ADD COLUMN usage_cache_read_tokens INTEGER;
ALTER TABLE executions ADD COLUMN usage_cache_creation_tokens INTEGER;
ALTER TABLE executions ADD COLUMN usage_cost_usd REAL;
ALTER TABLE executions ADD COLUMN usage_turns INTEGER;
