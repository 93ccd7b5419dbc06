DROP TABLE IF EXISTS llm_calls;
DROP TABLE IF EXISTS egress_events;
DROP TABLE IF EXISTS tool_call_outcomes;
DROP TABLE IF EXISTS tool_calls;
DROP TABLE IF EXISTS sessions;
