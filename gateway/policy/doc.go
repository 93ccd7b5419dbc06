// Package policy decides every tool call the agent makes: allow, deny or
// escalate to a human.
//
// It reads the original IronCurtain artifacts unchanged (compiled-policy.json,
// tool-annotations.json, dynamic-lists.json) plus the deployment settings of
// gateway.yaml, canonicalises the arguments of a call by their roles
// (paths through realpath, URLs and git remotes through a strict parser),
// applies the structural invariants (protected paths, git hardening, sandbox
// containment, domain allowlists, unknown tools) and then the compiled rules.
//
// The package is pure: it imports no HTTP, database or MCP code, so the
// compiler verifies rules with this same evaluator. The zero Decision denies.
package policy
