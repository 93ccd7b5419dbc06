-- 0007_policy_version: every decision record names the policy it was made
-- under (policy.Engine.Version: a content hash of the compiled policy, the
-- tool annotations, the dynamic lists, the settings that take part in
-- decisions and the shadow policy). With hot reload, one session's calls
-- may be decided by several policies; replay and the console group by it.
--
-- Rows written before this migration keep the empty string: their policy is
-- unknown. The column is in the hash chain only when it is not empty, so
-- `ironcurtain audit verify` checks old rows exactly as before.

ALTER TABLE tool_calls ADD COLUMN policy_version text NOT NULL DEFAULT '';
CREATE INDEX tool_calls_policy_version_idx ON tool_calls (policy_version, at DESC);

COMMENT ON COLUMN tool_calls.policy_version IS 'Version of the policy that decided: 16 hex digits of a SHA-256 content hash of the loaded compiled policy, tool annotations, dynamic lists, decision settings and shadow policy (ironcurtain_policy_info{version}). Empty: written before migration 0007, or a decision no policy took part in. Covered by the hash chain when not empty.';
