DROP TRIGGER IF EXISTS escalations_session_guard ON escalations;
DROP FUNCTION IF EXISTS agent_sessions_guard_escalation();
DROP TABLE IF EXISTS agent_sessions;
