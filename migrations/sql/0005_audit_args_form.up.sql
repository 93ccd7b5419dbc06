-- 0005_audit_args_form: tool_calls.args is stored in a bounded form from
-- this version on (string values over audit.max_arg_value_bytes and
-- arguments over audit.max_args_bytes are replaced by {"$truncated": ...}
-- markers) with every key the agent sent that begins with "$" escaped by one
-- more "$", so a marker cannot be forged. Rows written before it were
-- stored whole and unescaped: they keep args_escaped = false and readers
-- escape and bound them when they read them.
--
-- Adding the column with DEFAULT false marks every existing row without
-- rewriting the table; the default then becomes true for the rows this
-- version's gateway inserts (it does not name the column).

ALTER TABLE tool_calls ADD COLUMN args_escaped boolean NOT NULL DEFAULT false;
ALTER TABLE tool_calls ALTER COLUMN args_escaped SET DEFAULT true;

COMMENT ON COLUMN tool_calls.args_escaped IS 'true: args is in the bounded stored form (agent keys beginning with "$" escaped with one more "$"; {"$truncated": {"bytes", "sha256", "head"}} marks a value cut by the gateway). false: a row written before migration 0005, stored whole and unescaped. Not covered by the hash chain.';
