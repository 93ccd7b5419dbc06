// Package agent is the root of the credential-less agent module of
// IronCurtain for Go: the code-mode runner that runs in its own container
// and reaches the world only through the gateway (tools over MCP, the model
// through the relay). The packages are runner, sandbox, tsdecl, mcpclient,
// model, transcript, budget and cmd/ironcurtain-agent; docs/agent.md
// describes them. This package holds only the module's repo rule
// (deps_test.go): no database, secret-store, credential or gateway code is
// ever linked into the agent.
package agent
