-- 0003_ops_views: views for operators.

CREATE VIEW recent_denials AS
SELECT c.at, c.session_id, c.call_id, c.server, c.tool, c.decision, c.rule, c.reason,
       e.status AS escalation_status, e.decided_by
FROM tool_calls c
LEFT JOIN escalations e ON e.call_id = c.call_id
WHERE c.decision = 'deny' OR (c.decision = 'escalate' AND coalesce(e.status, 'pending') <> 'approved')
ORDER BY c.at DESC
LIMIT 500;
COMMENT ON VIEW recent_denials IS 'The 500 latest tool calls that policy denied or that were escalated and not approved.';
COMMENT ON COLUMN recent_denials.at IS 'When the decision was made.';
COMMENT ON COLUMN recent_denials.session_id IS 'Agent session.';
COMMENT ON COLUMN recent_denials.call_id IS 'Tool call id.';
COMMENT ON COLUMN recent_denials.server IS 'Tool server.';
COMMENT ON COLUMN recent_denials.tool IS 'Tool name.';
COMMENT ON COLUMN recent_denials.decision IS 'deny or escalate.';
COMMENT ON COLUMN recent_denials.rule IS 'Rule that decided.';
COMMENT ON COLUMN recent_denials.reason IS 'Why.';
COMMENT ON COLUMN recent_denials.escalation_status IS 'Status of the escalation (NULL for a plain deny).';
COMMENT ON COLUMN recent_denials.decided_by IS 'Who decided the escalation.';

CREATE VIEW pending_escalations AS
SELECT id, created_at, expires_at, session_id, kind, server, tool, resource, rule, reason, args,
       now() - created_at AS waiting
FROM escalations
WHERE status = 'pending'
ORDER BY created_at;
COMMENT ON VIEW pending_escalations IS 'Escalations waiting for a human, oldest first.';
COMMENT ON COLUMN pending_escalations.id IS 'Escalation id (approve or deny it with ironcurtain escalations approve|deny ID).';
COMMENT ON COLUMN pending_escalations.created_at IS 'When it was opened.';
COMMENT ON COLUMN pending_escalations.expires_at IS 'When it expires (denied) if nobody decides.';
COMMENT ON COLUMN pending_escalations.session_id IS 'Agent session.';
COMMENT ON COLUMN pending_escalations.kind IS 'tool_call or egress.';
COMMENT ON COLUMN pending_escalations.server IS 'Tool server.';
COMMENT ON COLUMN pending_escalations.tool IS 'Tool name.';
COMMENT ON COLUMN pending_escalations.resource IS 'Directory or domain concerned.';
COMMENT ON COLUMN pending_escalations.rule IS 'Rule that escalated.';
COMMENT ON COLUMN pending_escalations.reason IS 'Why.';
COMMENT ON COLUMN pending_escalations.args IS 'Redacted arguments.';
COMMENT ON COLUMN pending_escalations.waiting IS 'How long it has been waiting.';

CREATE VIEW egress_by_domain AS
SELECT host,
       count(*)                                    AS requests,
       count(*) FILTER (WHERE decision = 'allow')  AS allowed,
       count(*) FILTER (WHERE decision <> 'allow') AS refused,
       coalesce(sum(bytes_up), 0)::bigint          AS bytes_up,
       coalesce(sum(bytes_down), 0)::bigint        AS bytes_down,
       count(DISTINCT session_id)                  AS sessions,
       min(at)                                     AS first_seen,
       max(at)                                     AS last_seen
FROM egress_events
GROUP BY host;
COMMENT ON VIEW egress_by_domain IS 'Egress traffic per destination host.';
COMMENT ON COLUMN egress_by_domain.host IS 'Destination host.';
COMMENT ON COLUMN egress_by_domain.requests IS 'Requests and tunnels.';
COMMENT ON COLUMN egress_by_domain.allowed IS 'Requests allowed.';
COMMENT ON COLUMN egress_by_domain.refused IS 'Requests denied or escalated.';
COMMENT ON COLUMN egress_by_domain.bytes_up IS 'Bytes sent.';
COMMENT ON COLUMN egress_by_domain.bytes_down IS 'Bytes received.';
COMMENT ON COLUMN egress_by_domain.sessions IS 'Distinct sessions.';
COMMENT ON COLUMN egress_by_domain.first_seen IS 'First request.';
COMMENT ON COLUMN egress_by_domain.last_seen IS 'Latest request.';

CREATE VIEW session_summary AS
SELECT s.id AS session_id, s.first_seen, s.last_seen, s.chain_seq AS records,
       (SELECT count(*) FROM tool_calls c WHERE c.session_id = s.id)                          AS tool_calls,
       (SELECT count(*) FROM tool_calls c WHERE c.session_id = s.id AND c.decision = 'allow') AS allowed,
       (SELECT count(*) FROM tool_calls c WHERE c.session_id = s.id AND c.decision = 'deny')  AS denied,
       (SELECT count(*) FROM tool_calls c WHERE c.session_id = s.id AND c.decision = 'escalate') AS escalated,
       (SELECT count(*) FROM escalations e WHERE e.session_id = s.id AND e.status = 'pending') AS pending_escalations,
       (SELECT count(*) FROM egress_events g WHERE g.session_id = s.id)                       AS egress_requests,
       (SELECT coalesce(sum(input_tokens + output_tokens), 0)::bigint FROM llm_calls l WHERE l.session_id = s.id) AS llm_tokens,
       (SELECT coalesce(sum(cost_usd), 0) FROM llm_calls l WHERE l.session_id = s.id)         AS llm_cost_usd
FROM sessions s;
COMMENT ON VIEW session_summary IS 'Per-session activity: tool calls by decision, pending escalations, egress and model usage.';
COMMENT ON COLUMN session_summary.session_id IS 'Agent session.';
COMMENT ON COLUMN session_summary.first_seen IS 'First audit record.';
COMMENT ON COLUMN session_summary.last_seen IS 'Latest audit record.';
COMMENT ON COLUMN session_summary.records IS 'Records in the session hash chain.';
COMMENT ON COLUMN session_summary.tool_calls IS 'Tool calls decided.';
COMMENT ON COLUMN session_summary.allowed IS 'Tool calls allowed by policy.';
COMMENT ON COLUMN session_summary.denied IS 'Tool calls denied by policy.';
COMMENT ON COLUMN session_summary.escalated IS 'Tool calls escalated to a human.';
COMMENT ON COLUMN session_summary.pending_escalations IS 'Escalations still waiting.';
COMMENT ON COLUMN session_summary.egress_requests IS 'Egress requests and tunnels.';
COMMENT ON COLUMN session_summary.llm_tokens IS 'Model tokens (input + output).';
COMMENT ON COLUMN session_summary.llm_cost_usd IS 'Estimated model cost in US dollars.';
