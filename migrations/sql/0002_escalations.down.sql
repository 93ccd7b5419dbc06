DROP TABLE IF EXISTS session_approvals;
DROP TABLE IF EXISTS escalations;
