package compile

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"ironcurtain.dev/compiler/scenarios"
	"ironcurtain.dev/compiler/toolset"
	"ironcurtain.dev/gateway/policy"
)

// SystemPrompt is the compiler's system prompt for one server. It is stable
// across the repair rounds of that server (the conversation grows instead),
// and it is part of every cache key.
func SystemPrompt(in Input) string {
	var b strings.Builder
	fmt.Fprintf(&b, `You translate a security constitution, written in English, into declarative policy rules for the %q tool server of an AI-agent gateway. The gateway evaluates every tool call the agent makes against these rules; a rule you get wrong either blocks legitimate work or lets a hijacked agent do damage.

## Constitution

%s

## Tools of the %q server

Each argument carries one or more roles. Roles decide which rules apply.

%s
`, in.Server, strings.TrimSpace(in.Constitution), in.Server, toolset.Describe(in.Tools))

	b.WriteString(structuralSection(in.Settings, in.Server))
	b.WriteString(ruleFormatSection(in.Server))
	if gt := groundTruthSection(in.GroundTruth); gt != "" {
		b.WriteString(gt)
	}
	return b.String()
}

func structuralSection(s policy.Settings, server string) string {
	var b strings.Builder
	b.WriteString(`
## What the engine already enforces (never write rules for these)

The engine applies these checks in code BEFORE your rules, and your rules cannot override them:

`)
	fmt.Fprintf(&b, "1. Sandbox. The agent's workspace is %s. On the filesystem and git servers, arguments with these roles whose values all lie inside the sandbox are allowed without consulting your rules: %s. Do not write rules for them inside the sandbox. Every other role inside the sandbox (for example deletes and history rewrites) DOES reach your rules: when the constitution speaks about such operations in the sandbox, write rules with \"paths\": {\"within\": %q} for them.\n", s.Sandbox, toolset.SandboxSafeText(s), s.Sandbox)
	b.WriteString("2. Protected files are denied: git metadata and environment files inside the sandbox (.git/**, .gitmodules, .gitattributes, .env, .envrc) and these paths:\n")
	if len(s.ProtectedPaths) == 0 {
		b.WriteString("   (the gateway's policy and secret files)\n")
	}
	for _, p := range s.ProtectedPaths {
		fmt.Fprintf(&b, "   - %s\n", p)
	}
	b.WriteString("3. Git hardening: force pushes, deleting remote branches, mirror pushes and pushes to protected branches are denied; pull requests are never merged by the agent.\n")
	if allow := s.DomainAllowlists[server]; len(allow) > 0 {
		fmt.Fprintf(&b, "4. URL arguments of this server naming a domain outside %s are escalated to a human before your rules run.\n", strings.Join(allow, ", "))
	} else {
		b.WriteString("4. URL arguments are parsed strictly; a malformed URL is denied.\n")
	}
	b.WriteString("5. Unknown tools and undeclared arguments are denied.\n")
	b.WriteString("6. Default deny: a call no rule matches is denied. You never need deny rules.\n")
	if s.Home != "" {
		fmt.Fprintf(&b, "\nThe user's home directory is %s; write home paths with ~ (for example ~/Downloads), never as absolute home paths.\n", s.Home)
	}
	return b.String()
}

func ruleFormatSection(server string) string {
	return fmt.Sprintf(`
## Rules

Produce an ORDERED list of rules; for each role of a call the first matching rule decides. Each rule has:
- "name": kebab-case, starting with %[2]q, unique.
- "description": one sentence.
- "principle": the constitution sentence the rule implements, quoted.
- "if": conditions that must ALL hold:
  - "server": exactly [%[1]q] (required).
  - "tool": tool names the rule applies to (omit for every tool of the server).
  - "roles": the rule applies only while evaluating these roles, and only to tools having an argument with one of them. Omit to make the rule role-agnostic.
  - "paths": {"roles": [...], "within": DIR}. Holds when at least one path is extracted from those roles and every one lies inside DIR. DIR is absolute or starts with ~.
  - "domains": {"roles": [...], "allowed": [...]}. Holds when every URL of those roles matches a pattern: "host", "*.example.com" (the domain and its subdomains), "*" (any host name, never an IP), "host/owner/repo" for a git remote, or "@list-name".
  - "lists": [{"roles": [...], "allowed": ["@list-name", ...], "matchType": "emails" | "identifiers"}] for non-domain categories.
- "then": "allow" or "escalate" (a human decides). Never "deny": default deny covers every prohibition.
- "reason": one sentence a human approver reads.

Every active role of a call is evaluated on its own and the most restrictive result wins (deny over escalate over allow). A role that no rule covers is denied even when another role of the same call is allowed or escalated. So:
- An escalate rule should usually have NO "roles" filter: it then covers every role of the tool.
- An allow rule SHOULD name the roles it allows, so that write or delete roles of the same tool stay denied or fall to a later escalate rule.
- For conditional tools, all roles of the matching clause are active together; cover each of them.
- "Outside a directory" is expressed by order: the rule with "within" first, a broader rule after it.

## Dynamic lists

When the constitution names a category instead of concrete values ("major news sites", "my team's repositories"), do not invent the values. Reference "@category-name" in "domains.allowed" (domains) or in a "lists" entry (emails, identifiers), and define it in "listDefinitions": {"name", "type": "domains"|"emails"|"identifiers", "principle", "generationPrompt" (what to list, not how to format it), "requiresMcp": false}. For "any site" use "*", not a list.
`, server, server+"-")
}

func groundTruthSection(list []scenarios.Scenario) string {
	if len(list) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Ground truth\n\nThese calls must get these decisions (\"not-allow\" means deny or escalate). They are checked by running your rules through the real engine:\n\n")
	for i, s := range list {
		args, _ := json.Marshal(s.Request.Arguments)
		fmt.Fprintf(&b, "%d. %s/%s %s -> %s. %s\n", i+1, s.Request.ServerName, s.Request.ToolName, args, s.ExpectedDecision, s.Reasoning)
	}
	return b.String()
}

// FormatRules renders rules compactly for repair and judge prompts, numbered
// in evaluation order.
func FormatRules(rules []policy.CompiledRule) string {
	var b strings.Builder
	for i, r := range rules {
		cond, _ := json.Marshal(r.If)
		fmt.Fprintf(&b, "%d. %s: if %s then %s (%s)\n", i+1, r.Name, cond, r.Then, r.Reason)
	}
	return b.String()
}

// PermittedDirs lists the distinct paths.within directories of rules, sorted.
func PermittedDirs(rules []policy.CompiledRule) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rules {
		if r.If.Paths != nil && !seen[r.If.Paths.Within] {
			seen[r.If.Paths.Within] = true
			out = append(out, r.If.Paths.Within)
		}
	}
	sort.Strings(out)
	return out
}
