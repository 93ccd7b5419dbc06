ALTER TABLE tool_calls DROP COLUMN IF EXISTS args_escaped;
