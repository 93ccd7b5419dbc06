-- Reverts 0009_trace_ids.up.sql.
DROP INDEX IF EXISTS llm_calls_trace_id_idx;
DROP INDEX IF EXISTS egress_events_trace_id_idx;
DROP INDEX IF EXISTS tool_calls_trace_id_idx;
ALTER TABLE llm_calls     DROP COLUMN IF EXISTS trace_id;
ALTER TABLE egress_events DROP COLUMN IF EXISTS trace_id;
ALTER TABLE tool_calls    DROP COLUMN IF EXISTS trace_id;
