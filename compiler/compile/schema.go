package compile

import (
	"regexp"

	"github.com/google/jsonschema-go/jsonschema"

	s "ironcurtain.dev/compiler/structured"
	"ironcurtain.dev/gateway/policy"
)

func roleNames() []string {
	var out []string
	for _, d := range policy.Roles() {
		out = append(out, string(d.Role))
	}
	return out
}

// ruleSchema is the JSON Schema of one rule for server, whose tools are
// tools. Semantic checks the schema cannot express live in validate.go.
func ruleSchema(server string, tools []string) *jsonschema.Schema {
	roles := func() *jsonschema.Schema { return s.MinItems(s.Array(s.Enum(roleNames()...)), 1) }
	cond := s.Object(map[string]*jsonschema.Schema{
		"server": s.MaxItems(s.MinItems(s.Array(s.Const(server)), 1), 1),
		"tool":   s.MinItems(s.Array(s.Enum(tools...)), 1),
		"roles":  roles(),
		"paths": s.Object(map[string]*jsonschema.Schema{
			"roles":  roles(),
			"within": s.Pattern(`^(~|~/.*|/.*)$`, "absolute directory or one under ~"),
		}, "roles", "within"),
		"domains": s.Object(map[string]*jsonschema.Schema{
			"roles":   roles(),
			"allowed": s.MinItems(s.Array(s.String("host, *.suffix, *, host/owner/repo or @list-name")), 1),
		}, "roles", "allowed"),
		"lists": s.MinItems(s.Array(s.Object(map[string]*jsonschema.Schema{
			"roles":     roles(),
			"allowed":   s.MinItems(s.Array(s.String("value or @list-name")), 1),
			"matchType": s.Enum(policy.MatchDomains, policy.MatchEmails, policy.MatchIdentifiers),
		}, "roles", "allowed", "matchType")), 1),
	}, "server")
	return s.Object(map[string]*jsonschema.Schema{
		"name":        s.Pattern("^"+regexp.QuoteMeta(server)+"-[a-z0-9]+(-[a-z0-9]+)*$", "kebab-case, prefixed with the server name"),
		"description": s.String("one sentence"),
		"principle":   s.String("the constitution text the rule implements"),
		"if":          cond,
		"then":        s.Enum("allow", "escalate"),
		"reason":      s.String("one sentence for a human approver"),
	}, "name", "description", "principle", "if", "then", "reason")
}

func listDefinitionSchema() *jsonschema.Schema {
	return s.Object(map[string]*jsonschema.Schema{
		"name":             s.Pattern("^[a-z][a-z0-9-]*$", "kebab-case, without the @"),
		"type":             s.Enum(policy.MatchDomains, policy.MatchEmails, policy.MatchIdentifiers),
		"principle":        s.String("the constitution text naming the category"),
		"generationPrompt": s.String("what the list contains, for the list resolver"),
		"requiresMcp":      s.Bool("true only when the values must be read from a tool server"),
		"mcpServerHint":    s.String("server to read the values from, when requiresMcp"),
	}, "name", "type", "principle", "generationPrompt", "requiresMcp")
}

func outputSchema(server string, tools []string) *jsonschema.Schema {
	return s.Object(map[string]*jsonschema.Schema{
		"rules":           s.Array(ruleSchema(server, tools)),
		"listDefinitions": s.Array(listDefinitionSchema()),
	}, "rules")
}

func patchSchema(server string, tools, existing []string) *jsonschema.Schema {
	// A schema must be a tree: every use gets its own copy.
	ops := []*jsonschema.Schema{
		s.Object(map[string]*jsonschema.Schema{"op": s.Const("add"), "afterRule": s.String("existing rule to insert after; omit to insert first"), "rule": ruleSchema(server, tools)}, "op", "rule"),
	}
	if len(existing) > 0 {
		ops = append(ops,
			s.Object(map[string]*jsonschema.Schema{"op": s.Const("update"), "ruleName": s.Enum(existing...), "rule": ruleSchema(server, tools)}, "op", "ruleName", "rule"),
			s.Object(map[string]*jsonschema.Schema{"op": s.Const("delete"), "ruleName": s.Enum(existing...)}, "op", "ruleName"),
		)
	}
	return s.Object(map[string]*jsonschema.Schema{
		"reasoning":       s.String("why these operations fix the failures"),
		"operations":      s.Array(s.OneOf(ops...)),
		"listDefinitions": s.Array(listDefinitionSchema()),
	}, "reasoning", "operations")
}
