-- 0065: a call record's toolbelt.refusal, the classification of a refused
-- call (config_drift: its operation is one the binding's playbook declares
-- in the generation the execution is pinned to). Empty for every record
-- written before.
ALTER TABLE toolbelt_calls ADD COLUMN refusal TEXT NOT NULL DEFAULT '';
