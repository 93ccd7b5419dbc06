// Package e2e is IronCurtain's end-to-end suite: it starts the real gateway
// and agent images with testcontainers-go on private Docker networks, like
// the Compose topology (the agent on an internal network only; the gateway
// on the agent, egress and database networks; Postgres on the database
// network), plus an "internet" container of our own (cmd/internet: plain
// pages, a git smart-HTTP remote and a fake Anthropic API, behind a CA the
// suite makes per run) and proves, one test per scenario:
//
//   - TestEgress: no direct route from the agent container; through the
//     proxy an allowlisted host answers, an unlisted one gets 403; rows in
//     egress_events;
//   - TestFilesSession: a scripted session's allowed, denied and escalated
//     calls, the operator's approval through the ops API, tool_calls rows
//     and `ironcurtain audit verify`;
//   - TestGit: clone and push (escalated, approved, verified on the remote),
//     force pushes and pushes to main denied, planted hooks and executable
//     git config never run in the gateway;
//   - TestRelayAndKeys: the relay injects the key the fake provider checks;
//     the agent container's environment and filesystem hold no key;
//   - TestRestartWithPendingEscalation: a pending escalation survives a
//     gateway restart and its approval is honoured;
//   - TestPostgresOutage: with Postgres down every call is refused clearly
//     and nothing runs unaudited; calls work again when it returns;
//   - TestAuditChainsIntact (last): every session's hash chain verifies.
//
// Run it with `make test-e2e` (builds the images first). The scenarios
// share one topology and run one after the other. Without Docker the tests
// skip, except in CI (CI=true), where they fail. Variables: IC_GATEWAY_IMAGE,
// IC_AGENT_IMAGE, IC_POSTGRES_IMAGE, IC_E2E_FIXTURE_IMAGE (default: the
// gateway image), IC_E2E_NO_BUILD=1, IC_E2E_VERBOSE=1. See README.md here.
package e2e
