-- 0006_sessions: per-run agent sessions minted by an operator (ops API,
-- `ironcurtain sessions create`). The token itself is never stored: only its
-- SHA-256 digest. The audit trail's chain heads stay in `sessions` (0001);
-- a minted session also gets its row there at mint time.

CREATE TABLE agent_sessions (
    id               text             PRIMARY KEY CHECK (id ~ '^sess_[a-z2-7]{26}$'),
    name             text             NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    token_digest     bytea            NOT NULL UNIQUE CHECK (octet_length(token_digest) = 32),
    created_at       timestamptz      NOT NULL DEFAULT now(),
    created_by       text             NOT NULL CHECK (created_by <> ''),
    expires_at       timestamptz      NOT NULL,
    revoked_at       timestamptz,
    revoked_by       text             NOT NULL DEFAULT '',
    revoke_reason    text             NOT NULL DEFAULT '' CHECK (length(revoke_reason) <= 1024),
    max_tokens       bigint           NOT NULL DEFAULT 0 CHECK (max_tokens >= 0),
    max_cost_usd     double precision NOT NULL DEFAULT 0 CHECK (max_cost_usd >= 0 AND max_cost_usd < 'Infinity'),
    max_tool_calls   bigint           NOT NULL DEFAULT 0 CHECK (max_tool_calls >= 0),
    tool_calls_used  bigint           NOT NULL DEFAULT 0 CHECK (tool_calls_used >= 0),
    labels           jsonb            NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(labels) = 'object'),
    CHECK (expires_at > created_at),
    CHECK ((revoked_at IS NULL) = (revoked_by = ''))
);
CREATE INDEX agent_sessions_created_idx ON agent_sessions (created_at DESC);
COMMENT ON INDEX agent_sessions_created_idx IS 'Newest minted sessions first.';
COMMENT ON INDEX agent_sessions_token_digest_key IS 'Authentication looks a token up by its digest (every request with a minted token, on every door).';
COMMENT ON TABLE agent_sessions IS 'Per-run agent sessions minted by an operator: a token (stored as its SHA-256 digest only), an expiry, an optional budget and labels. A revoked or expired session is refused on every door (MCP, model relay, egress proxy, git HTTP, GitHub relay).';
COMMENT ON COLUMN agent_sessions.id IS 'Session id used in every audit row: sess_ and 26 base32 characters (static sessions from token files never use the prefix).';
COMMENT ON COLUMN agent_sessions.name IS 'Operator-given name of the run (not unique): letters, digits, dot, underscore, hyphen; 1-64 characters.';
COMMENT ON COLUMN agent_sessions.token_digest IS 'SHA-256 of the agent token; the token is shown once at mint and never stored.';
COMMENT ON COLUMN agent_sessions.created_at IS 'When the session was minted.';
COMMENT ON COLUMN agent_sessions.created_by IS 'Operator who minted the session.';
COMMENT ON COLUMN agent_sessions.expires_at IS 'After this instant the token is refused everywhere.';
COMMENT ON COLUMN agent_sessions.revoked_at IS 'When an operator revoked the session (NULL: not revoked); the token is refused from then on.';
COMMENT ON COLUMN agent_sessions.revoked_by IS 'Operator who revoked the session (empty while not revoked).';
COMMENT ON COLUMN agent_sessions.revoke_reason IS 'Why the operator revoked the session.';
COMMENT ON COLUMN agent_sessions.max_tokens IS 'Model token budget (input + output) enforced by the model relay; 0: the relay''s default budget.';
COMMENT ON COLUMN agent_sessions.max_cost_usd IS 'Model cost budget in US dollars (the relay''s estimate); 0: the relay''s default budget.';
COMMENT ON COLUMN agent_sessions.max_tool_calls IS 'Tool-call budget enforced by the MCP hub on every door; 0: no limit.';
COMMENT ON COLUMN agent_sessions.tool_calls_used IS 'Tool calls charged against max_tool_calls (counted only when max_tool_calls > 0; atomic across replicas).';
COMMENT ON COLUMN agent_sessions.labels IS 'Operator labels: a JSON object of at most 16 string values (keys up to 63, values up to 256 bytes).';

-- A revoked or expired session's escalation can never be waiting or
-- approved: one opened (or approved) concurrently with the revocation is
-- cancelled here. FOR SHARE serialises with the revocation's row lock, so
-- either the revocation's cancel sees the new escalation or this check sees
-- the revocation.
CREATE FUNCTION agent_sessions_guard_escalation() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s record;
BEGIN
    IF NEW.status NOT IN ('pending', 'approved') OR NEW.session_id NOT LIKE 'sess\_%' THEN
        RETURN NEW;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.status = NEW.status THEN
        RETURN NEW;
    END IF;
    SELECT revoked_at, expires_at INTO s FROM agent_sessions WHERE id = NEW.session_id FOR SHARE;
    IF NOT FOUND THEN
        RETURN NEW;
    END IF;
    IF s.revoked_at IS NOT NULL OR s.expires_at <= now() THEN
        NEW.status := 'cancelled';
        NEW.decided_at := now();
        NEW.decided_by := CASE WHEN s.revoked_at IS NOT NULL THEN 'session-revoked' ELSE 'session-expired' END;
        NEW.decision_reason := CASE WHEN s.revoked_at IS NOT NULL THEN 'the session was revoked' ELSE 'the session expired' END;
    END IF;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION agent_sessions_guard_escalation() IS 'Cancels an escalation opened or approved for a revoked or expired minted session (closes the race with a concurrent revocation).';
CREATE TRIGGER escalations_session_guard BEFORE INSERT OR UPDATE OF status ON escalations
    FOR EACH ROW EXECUTE FUNCTION agent_sessions_guard_escalation();
COMMENT ON TRIGGER escalations_session_guard ON escalations IS 'See agent_sessions_guard_escalation().';
