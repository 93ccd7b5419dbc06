-- 0009_trace_ids: audit rows name the OpenTelemetry trace of what they
-- record, so an operator can go from a row to its trace and back.
--
-- The gateway traces only when the standard OTEL_* variables ask for it;
-- otherwise, and for a trace that was not sampled, the column is the empty
-- string, as for every row written before this migration. The trace id is
-- a link to telemetry, not evidence: it is NOT in the hash chain, so
-- `ironcurtain audit verify` checks old and new rows alike, and a row's
-- trace id can be wrong without breaking the chain.

ALTER TABLE tool_calls    ADD COLUMN trace_id text NOT NULL DEFAULT '';
ALTER TABLE egress_events ADD COLUMN trace_id text NOT NULL DEFAULT '';
ALTER TABLE llm_calls     ADD COLUMN trace_id text NOT NULL DEFAULT '';

ALTER TABLE tool_calls    ADD CONSTRAINT tool_calls_trace_id_check    CHECK (trace_id ~ '^([0-9a-f]{32})?$');
ALTER TABLE egress_events ADD CONSTRAINT egress_events_trace_id_check CHECK (trace_id ~ '^([0-9a-f]{32})?$');
ALTER TABLE llm_calls     ADD CONSTRAINT llm_calls_trace_id_check     CHECK (trace_id ~ '^([0-9a-f]{32})?$');

CREATE INDEX tool_calls_trace_id_idx    ON tool_calls (trace_id)    WHERE trace_id <> '';
CREATE INDEX egress_events_trace_id_idx ON egress_events (trace_id) WHERE trace_id <> '';
CREATE INDEX llm_calls_trace_id_idx     ON llm_calls (trace_id)     WHERE trace_id <> '';

COMMENT ON COLUMN tool_calls.trace_id IS 'OpenTelemetry trace id (32 lowercase hex digits) of the tool call''s span: the trace with its policy, escalation-wait, audit and execution spans. Empty: tracing off (no OTEL_* variable), the trace not sampled, or written before migration 0009. Not covered by the hash chain.';
COMMENT ON COLUMN egress_events.trace_id IS 'OpenTelemetry trace id (32 lowercase hex digits): the span of the proxied request or tunnel, or for a fetch, git or GitHub egress the tool call''s trace. Empty: not traced or written before migration 0009. Not covered by the hash chain.';
COMMENT ON COLUMN llm_calls.trace_id IS 'OpenTelemetry trace id (32 lowercase hex digits) of the relayed model call''s span. Empty: not traced or written before migration 0009. Not covered by the hash chain.';
