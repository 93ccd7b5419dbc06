DROP VIEW IF EXISTS session_summary;
DROP VIEW IF EXISTS egress_by_domain;
DROP VIEW IF EXISTS pending_escalations;
DROP VIEW IF EXISTS recent_denials;
