-- 0004_escalation_reuse: single-use approvals and identical retries.
--
-- An approved escalation is consumed by the one call that runs on it: its
-- own waiting call, or, when that call is gone (the gateway restarted while
-- it waited), the identical retry of the same session. Retries find the
-- escalation by a salted digest of the exact (unredacted) arguments.

ALTER TABLE escalations
    ADD COLUMN exact_digest         text        NOT NULL DEFAULT '',
    ADD COLUMN consumed_by_call_id  text,
    ADD COLUMN consumed_at          timestamptz;

-- Approvals given before this migration were handed to their waiting calls
-- (the call ran or was refused): mark them used, so no later call can run on
-- an old approval.
UPDATE escalations
SET consumed_by_call_id = call_id, consumed_at = decided_at
WHERE status = 'approved';

ALTER TABLE escalations
    ADD CONSTRAINT escalations_consumed_check
    CHECK ((consumed_by_call_id IS NULL) = (consumed_at IS NULL)
           AND (consumed_by_call_id IS NULL OR status = 'approved'));

CREATE INDEX escalations_reuse_idx ON escalations (session_id, server, tool, args_digest)
    WHERE kind = 'tool_call' AND consumed_by_call_id IS NULL AND status IN ('pending', 'approved');

COMMENT ON COLUMN escalations.exact_digest IS 'Salted HMAC-SHA-256 of the exact (unredacted) arguments, "v1:<salt>:<mac>" in hex: lets an identical retry find this escalation without storing secrets. Empty: no retry may use it.';
COMMENT ON COLUMN escalations.consumed_by_call_id IS 'Tool call (tool_calls.call_id) that ran on this approval: the escalation''s own call or an identical retry of it. An approval runs at most one call. NULL: not used (yet).';
COMMENT ON COLUMN escalations.consumed_at IS 'When the approval was used by consumed_by_call_id.';
