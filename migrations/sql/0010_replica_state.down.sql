-- Reverts 0010_replica_state.up.sql.
DROP TABLE IF EXISTS loop_breaker_digests;
DROP TABLE IF EXISTS loop_breaker_sessions;
DROP TABLE IF EXISTS auto_approver_budget;
DROP TABLE IF EXISTS console_sessions;
