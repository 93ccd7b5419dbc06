-- 0008_auto_approver: the auto-approver's verdict on escalations.
--
-- When the auto-approver is enabled (escalation.auto_approver in
-- gateway.yaml), a new escalation that a compiled policy rule made is first
-- shown to a model, which may approve it (decided_by = 'auto:<model>') or
-- leave it to a human (the escalation stays pending). It can never deny.
-- Its verdict is kept on the row either way. NULL auto_verdict: the
-- auto-approver was not consulted (disabled, or an escalation it may not
-- see: structural checks, egress, the loop breaker).

ALTER TABLE escalations
    ADD COLUMN auto_verdict   text CHECK (auto_verdict IN ('approve', 'human')),
    ADD COLUMN auto_outcome   text,
    ADD COLUMN auto_model     text,
    ADD COLUMN auto_reasoning text,
    ADD COLUMN auto_at        timestamptz,
    ADD COLUMN auto_tokens    bigint CHECK (auto_tokens >= 0),
    ADD COLUMN auto_cost_usd  double precision CHECK (auto_cost_usd >= 0);

-- A verdict is complete or absent, and no escalation names the
-- auto-approver as its decider unless the model approved it.
ALTER TABLE escalations
    ADD CONSTRAINT escalations_auto_check
    CHECK ((auto_verdict IS NULL) = (auto_outcome IS NULL)
           AND (auto_verdict IS NULL) = (auto_model IS NULL)
           AND (auto_verdict IS NULL) = (auto_at IS NULL)
           AND (decided_by NOT LIKE 'auto:%' OR auto_verdict = 'approve'));

CREATE INDEX escalations_auto_at_idx ON escalations (auto_at) WHERE auto_at IS NOT NULL;

COMMENT ON COLUMN escalations.auto_verdict IS 'The auto-approver''s verdict: approve (decided_by is auto:<model>) or human (left to a human). NULL: not consulted. It can never deny.';
COMMENT ON COLUMN escalations.auto_outcome IS 'Why the verdict: approved, human (the model left it to a human), model_denied (the model answered deny, which it may not), malformed (not the fixed JSON answer), error, timeout, budget (daily budget spent), rate_limited, too_large (the call was too large to show whole).';
COMMENT ON COLUMN escalations.auto_model IS 'The model the auto-approver asked (or would have asked).';
COMMENT ON COLUMN escalations.auto_reasoning IS 'The model''s reasoning (at most 1,000 characters, redacted), or why it was not asked. Model output: treat as untrusted text.';
COMMENT ON COLUMN escalations.auto_at IS 'When the auto-approver''s verdict was recorded (the escalation''s creation).';
COMMENT ON COLUMN escalations.auto_tokens IS 'Tokens (input and output) the auto-approver''s model call used; counts against its daily budget.';
COMMENT ON COLUMN escalations.auto_cost_usd IS 'Estimated cost in US dollars of the auto-approver''s model call; counts against its daily budget.';
COMMENT ON COLUMN escalations.decided_by IS 'Operator who decided, "timeout" for expiry, "similar:<id>" for an approve-similar match, or "auto:<model>" when the auto-approver approved it.';
