-- 0002_escalations: calls waiting for a human, and the session-scoped
-- "approve similar" whitelist.

CREATE TABLE escalations (
    id               text        PRIMARY KEY,
    call_id          text        NOT NULL UNIQUE,
    session_id       text        NOT NULL,
    kind             text        NOT NULL CHECK (kind IN ('tool_call', 'egress')),
    server           text        NOT NULL DEFAULT '',
    tool             text        NOT NULL DEFAULT '',
    args             text        NOT NULL DEFAULT '{}',
    args_digest      text        NOT NULL DEFAULT '',
    rule             text        NOT NULL DEFAULT '',
    reason           text        NOT NULL DEFAULT '',
    resource         text        NOT NULL DEFAULT '',
    status           text        NOT NULL DEFAULT 'pending'
                                 CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'cancelled')),
    created_at       timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz NOT NULL,
    decided_at       timestamptz,
    decided_by       text        NOT NULL DEFAULT '',
    decision_reason  text        NOT NULL DEFAULT '',
    CHECK ((status = 'pending') = (decided_at IS NULL))
);
CREATE INDEX escalations_pending_idx ON escalations (created_at) WHERE status = 'pending';
CREATE INDEX escalations_session_idx ON escalations (session_id, created_at DESC);
COMMENT ON TABLE escalations IS 'Calls that policy escalated to a human: pending until approved, denied, expired (timeout) or cancelled. Waiters are woken with NOTIFY ironcurtain_escalations.';
COMMENT ON COLUMN escalations.id IS 'Escalation id shown to operators.';
COMMENT ON COLUMN escalations.call_id IS 'Tool call (or egress request) id; a call re-attaches to its escalation by this id after a gateway restart.';
COMMENT ON COLUMN escalations.session_id IS 'Agent session that made the call.';
COMMENT ON COLUMN escalations.kind IS 'tool_call or egress.';
COMMENT ON COLUMN escalations.server IS 'Tool server (tool calls).';
COMMENT ON COLUMN escalations.tool IS 'Tool name (tool calls).';
COMMENT ON COLUMN escalations.args IS 'The call''s arguments as redacted JSON text, shown to the operator.';
COMMENT ON COLUMN escalations.args_digest IS 'SHA-256 (hex) of the redacted canonical arguments; used by exact-argument "approve similar" entries.';
COMMENT ON COLUMN escalations.rule IS 'Policy rule that escalated.';
COMMENT ON COLUMN escalations.reason IS 'Why the policy escalated.';
COMMENT ON COLUMN escalations.resource IS 'Directory or domain the call touches; the scope an "approve similar" may use (empty: exact arguments only).';
COMMENT ON COLUMN escalations.status IS 'pending, approved, denied, expired (nobody decided in time: treated as denied) or cancelled.';
COMMENT ON COLUMN escalations.created_at IS 'When the escalation was opened.';
COMMENT ON COLUMN escalations.expires_at IS 'When a still pending escalation expires (denied).';
COMMENT ON COLUMN escalations.decided_at IS 'When it was decided (NULL while pending).';
COMMENT ON COLUMN escalations.decided_by IS 'Operator who decided, "timeout" for expiry, or "similar:<id>" for an approve-similar match.';
COMMENT ON COLUMN escalations.decision_reason IS 'The operator''s reason.';

CREATE TABLE session_approvals (
    id             uuid        PRIMARY KEY,
    session_id     text        NOT NULL,
    escalation_id  text        NOT NULL REFERENCES escalations (id),
    server         text        NOT NULL,
    tool           text        NOT NULL,
    scope          text        NOT NULL CHECK (scope IN ('directory', 'domain', 'exact')),
    value          text        NOT NULL CHECK (value <> ''),
    created_at     timestamptz NOT NULL DEFAULT now(),
    created_by     text        NOT NULL,
    revoked_at     timestamptz
);
CREATE INDEX session_approvals_lookup_idx ON session_approvals (session_id, server, tool) WHERE revoked_at IS NULL;
COMMENT ON TABLE session_approvals IS '"Approve similar" whitelist: an operator''s approval extended to later escalations of the same session, server and tool within a directory, a domain or with the exact same arguments. Consulted only for calls the policy escalates: it never overrides a deny.';
COMMENT ON COLUMN session_approvals.id IS 'Entry id.';
COMMENT ON COLUMN session_approvals.session_id IS 'The only session the entry applies to.';
COMMENT ON COLUMN session_approvals.escalation_id IS 'The approved escalation the entry was created from.';
COMMENT ON COLUMN session_approvals.server IS 'Tool server the entry applies to.';
COMMENT ON COLUMN session_approvals.tool IS 'Tool the entry applies to.';
COMMENT ON COLUMN session_approvals.scope IS 'directory (resource inside value), domain (resource equal to value) or exact (same argument digest).';
COMMENT ON COLUMN session_approvals.value IS 'Directory path, domain, or argument digest, depending on scope.';
COMMENT ON COLUMN session_approvals.created_at IS 'When the operator created the entry.';
COMMENT ON COLUMN session_approvals.created_by IS 'Operator who created the entry.';
COMMENT ON COLUMN session_approvals.revoked_at IS 'When the entry was revoked (NULL: active).';
