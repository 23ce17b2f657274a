-- 0040: request records of sensitive operations. A sensitive operation's
-- result holds a credential, so its request record keeps no result and no
-- refusal: only the operation and the input's hash, which detect a changed
-- body. withheld marks such a record; a repeat of it runs the handler again
-- instead of replaying. The CHECK makes the database itself refuse a
-- withheld record that carries a result or a refusal.
ALTER TABLE toolbelt_replays ADD COLUMN withheld INTEGER NOT NULL DEFAULT 0
	CHECK (withheld = 0 OR (withheld = 1 AND result IS NULL AND error_code = '' AND error_message = ''));
