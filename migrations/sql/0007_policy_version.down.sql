DROP INDEX IF EXISTS tool_calls_policy_version_idx;
ALTER TABLE tool_calls DROP COLUMN IF EXISTS policy_version;
