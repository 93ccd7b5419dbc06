package compile

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"ironcurtain.dev/gateway/policy"
)

// Validate checks rules and list definitions beyond their schema: unique
// names, roles of the right category in paths and domains, clean paths,
// domain patterns the engine accepts, list references that exist and have
// the right type, no rule posing as a structural check, every defined list
// used. known are lists defined earlier (repair rounds). Every problem is
// reported, one per line, in words the model can act on.
func Validate(rules []policy.CompiledRule, defs, known []policy.ListDefinition) error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	lists := map[string]policy.ListDefinition{}
	for _, d := range known {
		lists[d.Name] = d
	}
	seenDef := map[string]bool{}
	for i, d := range defs {
		if seenDef[d.Name] {
			bad("listDefinitions[%d]: list %q is defined twice", i, d.Name)
		}
		seenDef[d.Name] = true
		if k, ok := lists[d.Name]; ok && k.Type != d.Type {
			bad("listDefinitions[%d]: list %q already exists with type %s", i, d.Name, k.Type)
		}
		if strings.TrimSpace(d.GenerationPrompt) == "" {
			bad("listDefinitions[%d]: list %q needs a generationPrompt", i, d.Name)
		}
		lists[d.Name] = d
	}

	used := map[string]bool{}
	names := map[string]bool{}
	for i, r := range rules {
		at := fmt.Sprintf("rules[%d] (%s)", i, r.Name)
		if names[r.Name] {
			bad("%s: the name is used by an earlier rule", at)
		}
		names[r.Name] = true
		if r.Then != policy.Allow && r.Then != policy.Escalate {
			bad("%s: then must be allow or escalate", at)
		}
		lower := strings.ToLower(r.Name + " " + r.Description)
		for _, w := range []string{"structural", "protected path", "protected-path", "unknown tool", "unknown-tool", "default deny", "default-deny"} {
			if strings.Contains(lower, w) {
				bad("%s: mentions %q; structural checks are enforced by the engine and must not be written as rules", at, w)
				break
			}
		}
		checkRoles := func(field string, roles []policy.Role, cats ...policy.Category) {
			for _, role := range roles {
				def, ok := policy.LookupRole(role)
				if !ok {
					bad("%s: %s: unknown role %q", at, field, role)
					continue
				}
				if len(cats) > 0 && !hasCategory(cats, def.Category) {
					bad("%s: %s: role %q is a %s role, not %s", at, field, role, def.Category, joinCats(cats))
				}
			}
		}
		checkRoles("if.roles", r.If.Roles)
		if p := r.If.Paths; p != nil {
			checkRoles("if.paths.roles", p.Roles, policy.CategoryPath)
			if err := checkWithin(p.Within); err != nil {
				bad("%s: if.paths.within: %v", at, err)
			}
		}
		if d := r.If.Domains; d != nil {
			checkRoles("if.domains.roles", d.Roles, policy.CategoryURL, policy.CategoryIdentifier)
			for j, a := range d.Allowed {
				field := fmt.Sprintf("if.domains.allowed[%d]", j)
				if name, ok := strings.CutPrefix(a, "@"); ok {
					used[name] = true
					switch def, ok := lists[name]; {
					case !ok:
						bad("%s: %s: @%s has no list definition", at, field, name)
					case def.Type != policy.MatchDomains:
						bad("%s: %s: @%s is a %s list; only domains lists belong in domains.allowed", at, field, name, def.Type)
					}
					continue
				}
				if err := policy.ValidateDomainPattern(a); err != nil {
					bad("%s: %s: %v", at, field, err)
				}
			}
		}
		for j, l := range r.If.Lists {
			field := fmt.Sprintf("if.lists[%d]", j)
			checkRoles(field+".roles", l.Roles)
			for _, a := range l.Allowed {
				name, ok := strings.CutPrefix(a, "@")
				if !ok {
					continue
				}
				used[name] = true
				switch def, ok := lists[name]; {
				case !ok:
					bad("%s: %s: @%s has no list definition", at, field, name)
				case def.Type == policy.MatchDomains:
					bad("%s: %s: @%s is a domains list; put it in domains.allowed", at, field, name)
				case def.Type != l.MatchType:
					bad("%s: %s: matchType %s does not match @%s, a %s list", at, field, l.MatchType, name, def.Type)
				}
			}
		}
	}
	for i, d := range defs {
		if !used[d.Name] {
			bad("listDefinitions[%d]: list %q is not referenced by any rule; remove it or use it", i, d.Name)
		}
	}
	return errors.Join(errs...)
}

func checkWithin(w string) error {
	switch {
	case w == "~":
		return nil
	case strings.HasPrefix(w, "~/"), strings.HasPrefix(w, "/"):
	default:
		return fmt.Errorf("%q must be absolute or start with ~/", w)
	}
	if strings.ContainsAny(w, "\x00\n\r\\") {
		return fmt.Errorf("%q contains a control character or backslash", w)
	}
	rest := strings.TrimPrefix(w, "~")
	if clean := path.Clean(rest); clean != rest && clean+"/" != rest {
		return fmt.Errorf("%q is not a clean path (write %q)", w, strings.TrimSuffix(w, rest)+clean)
	}
	if w == "/" {
		return errors.New(`"/" would cover the whole filesystem`)
	}
	return nil
}

func hasCategory(cats []policy.Category, c policy.Category) bool {
	for _, x := range cats {
		if x == c {
			return true
		}
	}
	return false
}

func joinCats(cats []policy.Category) string {
	s := make([]string, len(cats))
	for i, c := range cats {
		s[i] = string(c)
	}
	return strings.Join(s, " or ")
}
