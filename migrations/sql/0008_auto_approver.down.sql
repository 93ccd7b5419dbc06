-- 0008_auto_approver down: drop the auto-approver's columns. Escalations
-- it approved keep decided_by = 'auto:<model>'.

DROP INDEX IF EXISTS escalations_auto_at_idx;
ALTER TABLE escalations
    DROP CONSTRAINT IF EXISTS escalations_auto_check,
    DROP COLUMN IF EXISTS auto_verdict,
    DROP COLUMN IF EXISTS auto_outcome,
    DROP COLUMN IF EXISTS auto_model,
    DROP COLUMN IF EXISTS auto_reasoning,
    DROP COLUMN IF EXISTS auto_at,
    DROP COLUMN IF EXISTS auto_tokens,
    DROP COLUMN IF EXISTS auto_cost_usd;
COMMENT ON COLUMN escalations.decided_by IS 'Operator who decided, "timeout" for expiry, or "similar:<id>" for an approve-similar match.';
