-- 0010_replica_state: state that was kept in one gateway's memory moves to
-- Postgres, so several replicas behind a plain load balancer behave as one
-- gateway: the console's sign-in sessions, the auto-approver's daily budget
-- and the loop breaker's per-session counters and pauses.

-- Console sign-ins (operators, not agents). The cookie holds a random id;
-- only its SHA-256 is stored.
CREATE TABLE console_sessions (
    id_digest  bytea       PRIMARY KEY CHECK (octet_length(id_digest) = 32),
    operator   text        NOT NULL CHECK (operator <> ''),
    csrf       text        NOT NULL CHECK (length(csrf) BETWEEN 32 AND 128),
    created_at timestamptz NOT NULL,
    last_seen  timestamptz NOT NULL,
    CHECK (last_seen >= created_at)
);
CREATE INDEX console_sessions_created_idx ON console_sessions (created_at);
COMMENT ON TABLE console_sessions IS 'Operator console sign-ins, shared by every replica: a session ends after the idle time without use, the maximum lifetime after sign-in, or at sign-out.';
COMMENT ON COLUMN console_sessions.id_digest IS 'SHA-256 of the random session id the cookie holds (the id itself is never stored).';
COMMENT ON COLUMN console_sessions.operator IS 'The operator who signed in (the name of their operator token).';
COMMENT ON COLUMN console_sessions.csrf IS 'The session''s CSRF token, which every state-changing form carries.';
COMMENT ON COLUMN console_sessions.created_at IS 'Sign-in time.';
COMMENT ON COLUMN console_sessions.last_seen IS 'Last use (the idle timeout counts from here).';
COMMENT ON INDEX console_sessions_created_idx IS 'Expired sessions are swept, and the oldest ended beyond the cap, by creation time.';

-- The auto-approver's daily budget, one row per UTC day: a review reserves
-- one call atomically while every limit has room, and charges its tokens
-- and cost when the model answered.
CREATE TABLE auto_approver_budget (
    day      date             PRIMARY KEY,
    calls    bigint           NOT NULL DEFAULT 0 CHECK (calls >= 0),
    tokens   bigint           NOT NULL DEFAULT 0 CHECK (tokens >= 0),
    cost_usd double precision NOT NULL DEFAULT 0 CHECK (cost_usd >= 0 AND cost_usd < 'Infinity')
);
COMMENT ON TABLE auto_approver_budget IS 'The auto-approver''s spend per UTC day, shared by every replica (one budget). Seeded once a day from escalations.auto_* when the row does not exist yet.';
COMMENT ON COLUMN auto_approver_budget.day IS 'The UTC day counted.';
COMMENT ON COLUMN auto_approver_budget.calls IS 'Model calls reserved that day (a call is reserved before the model is asked).';
COMMENT ON COLUMN auto_approver_budget.tokens IS 'Tokens (input and output) the model calls used.';
COMMENT ON COLUMN auto_approver_budget.cost_usd IS 'Estimated cost in US dollars of the model calls.';

-- The loop breaker, per agent session.
CREATE TABLE loop_breaker_sessions (
    session_id    text        PRIMARY KEY CHECK (session_id <> ''),
    state         text        NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'paused', 'cooling')),
    limit_name    text        NOT NULL DEFAULT '',
    reason        text        NOT NULL DEFAULT '',
    escalation_id text        NOT NULL DEFAULT '',
    paused_at     timestamptz,
    until         timestamptz,
    minute        timestamptz,
    calls_cur     integer     NOT NULL DEFAULT 0 CHECK (calls_cur >= 0),
    calls_prev    integer     NOT NULL DEFAULT 0 CHECK (calls_prev >= 0),
    denials       integer     NOT NULL DEFAULT 0 CHECK (denials >= 0),
    first_denial  timestamptz,
    last_denial   timestamptz,
    generation    bigint      NOT NULL DEFAULT 0,
    last_seen     timestamptz NOT NULL,
    CHECK (state <> 'cooling' OR until IS NOT NULL)
);
CREATE INDEX loop_breaker_sessions_seen_idx ON loop_breaker_sessions (last_seen);
COMMENT ON TABLE loop_breaker_sessions IS 'The loop breaker''s state of each agent session, shared by every replica: call rate over two fixed minutes, consecutive denials, and a pause (waiting for an operator''s escalation) or cooldown (an operator stopped the session''s calls until "until").';
COMMENT ON COLUMN loop_breaker_sessions.state IS 'running, paused (an operator is asked: escalation_id) or cooling (calls refused until "until").';
COMMENT ON COLUMN loop_breaker_sessions.escalation_id IS 'The pause''s escalation. A replica that finds the session paused reads that escalation: approved resumes the session, denied or expired cools it down from its decision, so a pause outlives the replica that asked.';
COMMENT ON COLUMN loop_breaker_sessions.generation IS 'Bumped whenever the counters start over (a resume): identical-call counters of an older generation no longer count.';
COMMENT ON COLUMN loop_breaker_sessions.session_id IS 'The agent session.';
COMMENT ON COLUMN loop_breaker_sessions.limit_name IS 'The limit that paused the session: rate, identical or denials ("" while running).';
COMMENT ON COLUMN loop_breaker_sessions.reason IS 'Why the session was paused, as shown to the operator and the agent.';
COMMENT ON COLUMN loop_breaker_sessions.paused_at IS 'When the session was paused (NULL while running).';
COMMENT ON COLUMN loop_breaker_sessions.until IS 'End of the cooldown (state cooling).';
COMMENT ON COLUMN loop_breaker_sessions.minute IS 'Start of the fixed minute calls_cur counts.';
COMMENT ON COLUMN loop_breaker_sessions.calls_cur IS 'Calls in the current fixed minute.';
COMMENT ON COLUMN loop_breaker_sessions.calls_prev IS 'Calls in the previous fixed minute (the rate is a sliding estimate over both).';
COMMENT ON COLUMN loop_breaker_sessions.denials IS 'Denied calls in a row (a call that ran resets it).';
COMMENT ON COLUMN loop_breaker_sessions.first_denial IS 'First denial of the current run of denials.';
COMMENT ON COLUMN loop_breaker_sessions.last_denial IS 'Last denial of the current run of denials.';
COMMENT ON COLUMN loop_breaker_sessions.last_seen IS 'Last call of the session; running sessions unseen for a while are swept.';

CREATE TABLE loop_breaker_digests (
    session_id text        NOT NULL REFERENCES loop_breaker_sessions (session_id) ON DELETE CASCADE,
    digest     bytea       NOT NULL CHECK (octet_length(digest) = 32),
    generation bigint      NOT NULL,
    first_at   timestamptz NOT NULL,
    n          integer     NOT NULL CHECK (n >= 0),
    PRIMARY KEY (session_id, digest)
);
COMMENT ON TABLE loop_breaker_digests IS 'Identical-call counters of the loop breaker: per session, the SHA-256 of the tool and its canonical arguments, counted from first_at for the identical-call window.';
COMMENT ON COLUMN loop_breaker_digests.session_id IS 'The agent session.';
COMMENT ON COLUMN loop_breaker_digests.digest IS 'SHA-256 of the tool name and its canonical arguments (loopguard.Digest).';
COMMENT ON COLUMN loop_breaker_digests.generation IS 'The session''s generation when counting started (an older one no longer counts).';
COMMENT ON COLUMN loop_breaker_digests.first_at IS 'First call of the current identical-call window.';
COMMENT ON COLUMN loop_breaker_digests.n IS 'Identical calls since first_at.';
