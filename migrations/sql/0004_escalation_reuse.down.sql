DROP INDEX IF EXISTS escalations_reuse_idx;
ALTER TABLE escalations
    DROP CONSTRAINT IF EXISTS escalations_consumed_check,
    DROP COLUMN IF EXISTS consumed_at,
    DROP COLUMN IF EXISTS consumed_by_call_id,
    DROP COLUMN IF EXISTS exact_digest;
