-- 0001_audit: the audit trail (tool calls, outcomes, egress, model calls)
-- with a per-session hash chain whose head lives in sessions.

CREATE TABLE sessions (
    id          text        PRIMARY KEY,
    first_seen  timestamptz NOT NULL DEFAULT now(),
    last_seen   timestamptz NOT NULL DEFAULT now(),
    chain_seq   bigint      NOT NULL DEFAULT 0,
    chain_hash  bytea       NOT NULL DEFAULT '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea
);
COMMENT ON TABLE sessions IS 'One row per agent session seen by the audit trail; holds the head of the session''s hash chain.';
COMMENT ON COLUMN sessions.id IS 'Session id (the configured session name); the empty string collects records of unauthenticated clients.';
COMMENT ON COLUMN sessions.first_seen IS 'When the first audit record of the session was written.';
COMMENT ON COLUMN sessions.last_seen IS 'When the latest audit record of the session was written.';
COMMENT ON COLUMN sessions.chain_seq IS 'Sequence number of the latest record in the session''s hash chain (0: no record yet).';
COMMENT ON COLUMN sessions.chain_hash IS 'SHA-256 hash of the latest record in the session''s hash chain (32 zero bytes: no record yet).';

CREATE TABLE tool_calls (
    call_id          text        PRIMARY KEY,
    session_id       text        NOT NULL,
    seq              bigint      NOT NULL,
    at               timestamptz NOT NULL,
    server           text        NOT NULL,
    tool             text        NOT NULL,
    args             text        NOT NULL,
    decision         text        NOT NULL CHECK (decision IN ('allow', 'deny', 'escalate')),
    rule             text        NOT NULL,
    reason           text        NOT NULL,
    shadow_decision  text        NOT NULL DEFAULT '',
    shadow_rule      text        NOT NULL DEFAULT '',
    escalation_id    text        NOT NULL DEFAULT '',
    detail           text        NOT NULL DEFAULT '',
    prev_hash        bytea       NOT NULL,
    hash             bytea       NOT NULL,
    UNIQUE (session_id, seq)
);
CREATE INDEX tool_calls_at_idx ON tool_calls (at DESC);
CREATE INDEX tool_calls_session_at_idx ON tool_calls (session_id, at DESC);
CREATE INDEX tool_calls_denials_idx ON tool_calls (at DESC) WHERE decision <> 'allow';
COMMENT ON TABLE tool_calls IS 'Write-ahead decision record of every tool call, committed before the call runs. Part of the session hash chain.';
COMMENT ON COLUMN tool_calls.call_id IS 'Tool call id chosen by the MCP hub (UUID).';
COMMENT ON COLUMN tool_calls.session_id IS 'Agent session that made the call.';
COMMENT ON COLUMN tool_calls.seq IS 'Position of this record in the session hash chain (shared by all audit tables).';
COMMENT ON COLUMN tool_calls.at IS 'When the decision was made.';
COMMENT ON COLUMN tool_calls.server IS 'Tool server name (filesystem, git, github, fetch or an external server).';
COMMENT ON COLUMN tool_calls.tool IS 'Tool name within the server.';
COMMENT ON COLUMN tool_calls.args IS 'The agent''s arguments as canonical JSON text, secrets redacted. Cast with args::jsonb to query.';
COMMENT ON COLUMN tool_calls.decision IS 'Policy decision: allow, deny or escalate (the human''s answer is in escalations).';
COMMENT ON COLUMN tool_calls.rule IS 'Compiled rule or structural check that decided.';
COMMENT ON COLUMN tool_calls.reason IS 'Why, in words that were safe to show the agent.';
COMMENT ON COLUMN tool_calls.shadow_decision IS 'What the report-only shadow policy would have decided (empty: no shadow policy).';
COMMENT ON COLUMN tool_calls.shadow_rule IS 'Rule of the shadow decision.';
COMMENT ON COLUMN tool_calls.escalation_id IS 'Escalation asked for this call (empty when not escalated).';
COMMENT ON COLUMN tool_calls.detail IS 'Operator-only detail (never shown to the agent).';
COMMENT ON COLUMN tool_calls.prev_hash IS 'Hash of the previous record in the session chain.';
COMMENT ON COLUMN tool_calls.hash IS 'SHA-256 over prev_hash and the canonical encoding of this record (ironcurtain audit verify recomputes it).';

CREATE TABLE tool_call_outcomes (
    call_id       text        PRIMARY KEY,
    session_id    text        NOT NULL,
    seq           bigint      NOT NULL,
    at            timestamptz NOT NULL,
    status        text        NOT NULL CHECK (status IN ('ok', 'error', 'denied', 'refused', 'timed_out')),
    duration_ns   bigint      NOT NULL,
    result_bytes  bigint      NOT NULL,
    truncated     boolean     NOT NULL,
    error         text        NOT NULL DEFAULT '',
    prev_hash     bytea       NOT NULL,
    hash          bytea       NOT NULL,
    UNIQUE (session_id, seq)
);
COMMENT ON TABLE tool_call_outcomes IS 'Outcome of each tool call, written after the call finished or was refused. Part of the session hash chain.';
COMMENT ON COLUMN tool_call_outcomes.call_id IS 'Tool call id (tool_calls.call_id).';
COMMENT ON COLUMN tool_call_outcomes.session_id IS 'Agent session that made the call.';
COMMENT ON COLUMN tool_call_outcomes.seq IS 'Position of this record in the session hash chain.';
COMMENT ON COLUMN tool_call_outcomes.at IS 'When the call finished.';
COMMENT ON COLUMN tool_call_outcomes.status IS 'ok, error (the tool failed), denied (policy or a human refused), refused (gateway refused: audit down, bad args) or timed_out.';
COMMENT ON COLUMN tool_call_outcomes.duration_ns IS 'Wall-clock duration of the call in nanoseconds.';
COMMENT ON COLUMN tool_call_outcomes.result_bytes IS 'Size of the result returned to the agent, in bytes.';
COMMENT ON COLUMN tool_call_outcomes.truncated IS 'True when the result was cut at the size cap.';
COMMENT ON COLUMN tool_call_outcomes.error IS 'Error detail for operators (redacted).';
COMMENT ON COLUMN tool_call_outcomes.prev_hash IS 'Hash of the previous record in the session chain.';
COMMENT ON COLUMN tool_call_outcomes.hash IS 'SHA-256 over prev_hash and the canonical encoding of this record.';

CREATE TABLE egress_events (
    id            text        PRIMARY KEY,
    session_id    text        NOT NULL,
    seq           bigint      NOT NULL,
    tool_call_id  text        NOT NULL DEFAULT '',
    at            timestamptz NOT NULL,
    kind          text        NOT NULL,
    method        text        NOT NULL DEFAULT '',
    host          text        NOT NULL,
    port          integer     NOT NULL,
    resolved_ip   text        NOT NULL DEFAULT '',
    decision      text        NOT NULL CHECK (decision IN ('allow', 'deny', 'escalate')),
    reason        text        NOT NULL,
    rule          text        NOT NULL DEFAULT '',
    bytes_up      bigint      NOT NULL,
    bytes_down    bigint      NOT NULL,
    duration_ns   bigint      NOT NULL,
    error         text        NOT NULL DEFAULT '',
    prev_hash     bytea       NOT NULL,
    hash          bytea       NOT NULL,
    UNIQUE (session_id, seq)
);
CREATE INDEX egress_events_at_idx ON egress_events (at DESC);
CREATE INDEX egress_events_host_idx ON egress_events (host);
CREATE INDEX egress_events_tool_call_idx ON egress_events (tool_call_id) WHERE tool_call_id <> '';
COMMENT ON TABLE egress_events IS 'One row per proxied request or CONNECT tunnel (and per fetch made by a gateway tool), written on close. Part of the session hash chain.';
COMMENT ON COLUMN egress_events.id IS 'Event id (UUID).';
COMMENT ON COLUMN egress_events.session_id IS 'Agent session (empty string: the client did not authenticate).';
COMMENT ON COLUMN egress_events.seq IS 'Position of this record in the session hash chain.';
COMMENT ON COLUMN egress_events.tool_call_id IS 'Tool call that made this request (fetch), empty for the agent''s own traffic.';
COMMENT ON COLUMN egress_events.at IS 'When the request arrived.';
COMMENT ON COLUMN egress_events.kind IS 'connect, http or fetch.';
COMMENT ON COLUMN egress_events.method IS 'HTTP method (empty for CONNECT).';
COMMENT ON COLUMN egress_events.host IS 'Canonical host name or IP literal requested.';
COMMENT ON COLUMN egress_events.port IS 'Destination port.';
COMMENT ON COLUMN egress_events.resolved_ip IS 'Address that was checked and dialled (empty when refused before resolving).';
COMMENT ON COLUMN egress_events.decision IS 'allow, deny or escalate.';
COMMENT ON COLUMN egress_events.reason IS 'Why.';
COMMENT ON COLUMN egress_events.rule IS 'Allowlist entry or check that decided.';
COMMENT ON COLUMN egress_events.bytes_up IS 'Bytes sent from the agent to the destination.';
COMMENT ON COLUMN egress_events.bytes_down IS 'Bytes received from the destination.';
COMMENT ON COLUMN egress_events.duration_ns IS 'Duration of the request or tunnel in nanoseconds.';
COMMENT ON COLUMN egress_events.error IS 'Error detail for operators (redacted).';
COMMENT ON COLUMN egress_events.prev_hash IS 'Hash of the previous record in the session chain.';
COMMENT ON COLUMN egress_events.hash IS 'SHA-256 over prev_hash and the canonical encoding of this record.';

CREATE TABLE llm_calls (
    id             text        PRIMARY KEY,
    session_id     text        NOT NULL,
    seq            bigint      NOT NULL,
    at             timestamptz NOT NULL,
    provider       text        NOT NULL,
    model          text        NOT NULL,
    path           text        NOT NULL,
    stream         boolean     NOT NULL,
    status_code    integer     NOT NULL,
    input_tokens   bigint      NOT NULL,
    output_tokens  bigint      NOT NULL,
    cost_usd       double precision NOT NULL,
    duration_ns    bigint      NOT NULL,
    error          text        NOT NULL DEFAULT '',
    prev_hash      bytea       NOT NULL,
    hash           bytea       NOT NULL,
    UNIQUE (session_id, seq)
);
CREATE INDEX llm_calls_session_at_idx ON llm_calls (session_id, at DESC);
COMMENT ON TABLE llm_calls IS 'One row per model call relayed by the gateway, with tokens and estimated cost. Part of the session hash chain.';
COMMENT ON COLUMN llm_calls.id IS 'Call id (UUID).';
COMMENT ON COLUMN llm_calls.session_id IS 'Agent session that made the call.';
COMMENT ON COLUMN llm_calls.seq IS 'Position of this record in the session hash chain.';
COMMENT ON COLUMN llm_calls.at IS 'When the request arrived.';
COMMENT ON COLUMN llm_calls.provider IS 'anthropic or openai (any OpenAI-compatible endpoint).';
COMMENT ON COLUMN llm_calls.model IS 'Model requested.';
COMMENT ON COLUMN llm_calls.path IS 'API path relayed (for example /v1/messages).';
COMMENT ON COLUMN llm_calls.stream IS 'True for a streamed response.';
COMMENT ON COLUMN llm_calls.status_code IS 'HTTP status returned by the provider (0: no response).';
COMMENT ON COLUMN llm_calls.input_tokens IS 'Input tokens reported by the provider.';
COMMENT ON COLUMN llm_calls.output_tokens IS 'Output tokens reported by the provider.';
COMMENT ON COLUMN llm_calls.cost_usd IS 'Estimated cost in US dollars.';
COMMENT ON COLUMN llm_calls.duration_ns IS 'Duration in nanoseconds.';
COMMENT ON COLUMN llm_calls.error IS 'Error detail for operators (redacted).';
COMMENT ON COLUMN llm_calls.prev_hash IS 'Hash of the previous record in the session chain.';
COMMENT ON COLUMN llm_calls.hash IS 'SHA-256 over prev_hash and the canonical encoding of this record.';
