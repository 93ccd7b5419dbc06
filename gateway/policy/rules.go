package policy

import (
	"errors"
	"fmt"
	"strings"

	"ironcurtain.dev/gateway/netpolicy"
)

// rule is a compiled rule prepared for evaluation.
type rule struct {
	name, reason    string
	then            Status
	hasRoles        bool
	roles           roleSet
	servers, tools  []string // nil: any
	paths           *pathCond
	domains         *domainCond
	lists           []listCond
	roleConditioned bool
}

type pathCond struct {
	roles  roleSet
	within string // canonical
}

type domainCond struct {
	roles    roleSet
	patterns domainSet
}

type listCond struct {
	roles     roleSet
	matchType string
	exact     map[string]bool // identifiers
	folded    map[string]bool // emails and lower-cased identifiers
	domains   domainSet
}

func (e *Engine) compileRules(p *CompiledPolicy, l *DynamicLists, files fileNames) error {
	names := map[string]int{}
	for i, cr := range p.Rules {
		at := func(path string, err error) error {
			return &FileError{File: files.policy, Path: fmt.Sprintf("rules[%d]%s", i, path), Err: err}
		}
		if cr.Name == "" {
			return at(".name", errors.New("missing"))
		}
		if j, dup := names[cr.Name]; dup {
			return at(".name", fmt.Errorf("duplicate rule name %q (also rules[%d])", cr.Name, j))
		}
		names[cr.Name] = i
		r := rule{name: cr.Name, reason: cr.Reason, then: cr.Then}
		c := cr.If
		if c.Roles != nil {
			if err := checkRuleRoles(c.Roles); err != nil {
				return at(".if.roles", err)
			}
			r.hasRoles, r.roles = true, setOf(c.Roles)
		}
		if c.Server != nil {
			if len(c.Server) == 0 {
				return at(".if.server", errors.New("must not be empty"))
			}
			r.servers = c.Server
		}
		if c.Tool != nil {
			if len(c.Tool) == 0 {
				return at(".if.tool", errors.New("must not be empty"))
			}
			r.tools = c.Tool
		}
		if c.Paths != nil {
			if err := checkRuleRoles(c.Paths.Roles); err != nil {
				return at(".if.paths.roles", err)
			}
			lex, err := cleanAbs(c.Paths.Within, e.canon.home)
			if err != nil {
				return at(".if.paths.within", err)
			}
			within, err := e.canon.canonical(lex)
			if err != nil {
				return at(".if.paths.within", err)
			}
			r.paths = &pathCond{roles: setOf(c.Paths.Roles), within: within}
		}
		if c.Domains != nil {
			if err := checkRuleRoles(c.Domains.Roles); err != nil {
				return at(".if.domains.roles", err)
			}
			if len(c.Domains.Allowed) == 0 {
				return at(".if.domains.allowed", errors.New("must not be empty"))
			}
			ps, err := e.expandPatterns(c.Domains.Allowed, l, files, fmt.Sprintf("rules[%d].if.domains.allowed", i))
			if err != nil {
				return err
			}
			r.domains = &domainCond{roles: setOf(c.Domains.Roles), patterns: ps}
		}
		for j, lc := range c.Lists {
			lp := fmt.Sprintf(".if.lists[%d]", j)
			if err := checkRuleRoles(lc.Roles); err != nil {
				return at(lp+".roles", err)
			}
			if len(lc.Allowed) == 0 {
				return at(lp+".allowed", errors.New("must not be empty"))
			}
			cond := listCond{roles: setOf(lc.Roles), matchType: lc.MatchType}
			jsonPath := fmt.Sprintf("rules[%d]%s.allowed", i, lp)
			switch lc.MatchType {
			case MatchDomains:
				ps, err := e.expandPatterns(lc.Allowed, l, files, jsonPath)
				if err != nil {
					return err
				}
				cond.domains = ps
			case MatchEmails, MatchIdentifiers:
				cond.exact, cond.folded = map[string]bool{}, map[string]bool{}
				for _, v := range e.expandValues(lc.Allowed, l, jsonPath) {
					cond.exact[v] = true
					cond.folded[strings.ToLower(v)] = true
				}
			default:
				return at(lp+".matchType", fmt.Errorf("%q is not domains, emails or identifiers", lc.MatchType))
			}
			r.lists = append(r.lists, cond)
		}
		r.roleConditioned = r.hasRoles || r.paths != nil || r.domains != nil || len(r.lists) > 0
		e.rules = append(e.rules, r)
	}
	e.indexRules()
	return nil
}

// indexRules lists for each tool the rules whose server and tool conditions
// admit it (tool.rules): the evaluator visits only those, in order, and
// every rule it skips is one whose matchesNonPath fails for any call of the
// tool (TestIndexedRulesMatchAll holds the two walks equal).
func (e *Engine) indexRules() {
	for _, t := range e.tools {
		t.rules = t.rules[:0]
		for i := range e.rules {
			r := &e.rules[i]
			if (r.servers == nil || contains(r.servers, t.server)) && (r.tools == nil || contains(r.tools, t.name)) {
				t.rules = append(t.rules, int32(i))
			}
		}
		t.indexed = true
	}
}

// candidates returns the rules a call of c.t can match: the tool's index,
// or every rule when the tool was added after the rules were indexed.
func (c *call) candidates(out []int32) []int32 {
	if c.t.indexed {
		return c.t.rules
	}
	for i := range c.e.rules {
		out = append(out, int32(i))
	}
	return out
}

func checkRuleRoles(rs []Role) error {
	if len(rs) == 0 {
		return errors.New("must not be empty")
	}
	for _, r := range rs {
		if !IsRole(r) {
			return fmt.Errorf("unknown role %q", r)
		}
	}
	return nil
}

// expandValues replaces @list entries by the list's effective values. A
// missing list expands to nothing (the condition then fails closed) and is
// reported as a warning.
func (e *Engine) expandValues(entries []string, l *DynamicLists, path string) []string {
	var out []string
	for _, v := range entries {
		name, isList := strings.CutPrefix(v, "@")
		if !isList {
			out = append(out, v)
			continue
		}
		var list ResolvedList
		ok := false
		if l != nil {
			list, ok = l.Lists[name]
		}
		if !ok {
			e.warnings = append(e.warnings, fmt.Sprintf("%s: list @%s is not in %s; it matches nothing", path, name, DynamicListsFile))
			continue
		}
		out = append(out, list.Effective()...)
	}
	return out
}

func (e *Engine) expandPatterns(entries []string, l *DynamicLists, files fileNames, path string) (domainSet, error) {
	var out []domainPattern
	for i, v := range entries {
		values := e.expandValues([]string{v}, l, fmt.Sprintf("%s[%d]", path, i))
		for _, s := range values {
			p, err := parseDomainPattern(s)
			if err != nil {
				where := fmt.Sprintf("%s[%d]", path, i)
				if strings.HasPrefix(v, "@") {
					return domainSet{}, &FileError{File: files.lists, Path: "lists." + v[1:],
						Err: fmt.Errorf("entry %q (used by %s): %w", s, where, unwrapParse(err))}
				}
				return domainSet{}, &FileError{File: files.policy, Path: where, Err: fmt.Errorf("%q: %w", s, unwrapParse(err))}
			}
			out = append(out, p)
		}
	}
	set, err := newDomainSet(out)
	if err != nil {
		return domainSet{}, &FileError{File: files.policy, Path: path, Err: err}
	}
	return set, nil
}

var defaultDeny = Decision{Status: Deny, Rule: RuleDefaultDeny, Reason: reasonDefaultDeny}

func (r *rule) decision() Decision {
	return Decision{Status: r.then, Rule: r.name, Reason: r.reason, Compiled: true}
}

// relevant reports whether every role condition of r names the role of
// bit (setOf1(role)).
func (r *rule) relevant(bit roleSet) bool {
	if r.hasRoles && r.roles&bit == 0 {
		return false
	}
	if r.paths != nil && r.paths.roles&bit == 0 {
		return false
	}
	if r.domains != nil && r.domains.roles&bit == 0 {
		return false
	}
	if len(r.lists) > 0 {
		for _, lc := range r.lists {
			if lc.roles&bit != 0 {
				return true
			}
		}
		return false
	}
	return true
}

// evaluateRules runs the compiled rules: per distinct resource role (not
// resolved by sandbox containment), first match wins with per-value
// discharge; across roles the first deny returns, otherwise the most severe
// result wins.
func (c *call) evaluateRules() Decision {
	roles := c.rr.distinct
	if len(roles) > 0 {
		pending := 0
		for _, r := range roles {
			if c.resolved&setOf1(r) == 0 {
				pending++
			}
		}
		if pending == 0 {
			return Decision{Status: Allow, Rule: RuleSandboxAllow, Reason: "All path roles resolved by sandbox containment"}
		}
	} else {
		for _, i := range c.candidates(nil) {
			if c.matches(&c.e.rules[i], 0, true) {
				return c.e.rules[i].decision()
			}
		}
		return defaultDeny
	}
	var best Decision
	haveBest := false
	var escalated []Role
	for _, role := range roles {
		bit := setOf1(role)
		if c.resolved&bit != 0 {
			continue
		}
		d := c.evaluateRole(role, bit)
		if d.Status == Deny {
			return d
		}
		if d.Status == Escalate {
			escalated = append(escalated, role)
		}
		if !haveBest || d.Status.Severity() > best.Status.Severity() {
			best, haveBest = d, true
		}
	}
	if best.Status == Escalate && len(escalated) > 0 {
		best.EscalatedRoles = escalated
	}
	return best
}

// roleValues appends to out the canonical values of the arguments carrying
// the role of bit (each once).
func (c *call) roleValues(bit roleSet, out []string) []string {
	for i := range c.vals {
		if c.rr.perArg[i]&bit != 0 {
			for _, v := range c.vals[i].canon {
				if !contains(out, v) {
					out = append(out, v)
				}
			}
		}
	}
	return out
}

// evaluateRole runs the rules for role (bit: setOf1(role)).
func (c *call) evaluateRole(role Role, bit roleSet) Decision {
	var buf [4]string
	values := c.roleValues(bit, buf[:0])
	rules := c.e.rules
	cands := c.candidates(nil)
	if len(values) == 0 {
		for _, i := range cands {
			r := &rules[i]
			if r.roleConditioned && !r.relevant(bit) {
				continue
			}
			if c.matches(r, bit, true) {
				return r.decision()
			}
		}
		return defaultDeny
	}
	def := roleDef(role)
	var best Decision
	haveBest := false
	remaining := values
	sb := c.e.canon.sandbox
	if sb != "" && c.req.Server == "filesystem" && def.Category == CategoryPath && c.e.safe&bit != 0 {
		kept := remaining[:0:0]
		for _, p := range remaining {
			if !within(p, sb) && !(role == RoleReadPath && c.e.inReadOnly(c.req.Server, p)) {
				kept = append(kept, p)
			}
		}
		if len(kept) < len(remaining) {
			best, haveBest = Decision{Status: Allow, Rule: RuleSandboxAllow, Reason: "Path(s) within the sandbox directory"}, true
		}
		remaining = kept
	}
	for _, i := range cands {
		if len(remaining) == 0 {
			break
		}
		r := &rules[i]
		if r.roleConditioned && !r.relevant(bit) {
			continue
		}
		if !c.matchesNonPath(r) {
			continue
		}
		if (r.domains != nil || r.lists != nil) && !c.matches(r, bit, false) {
			continue
		}
		var kept []string
		if r.paths != nil {
			for _, p := range remaining {
				if !(def.Category == CategoryPath && within(p, r.paths.within)) {
					kept = append(kept, p)
				}
			}
			if len(kept) == len(remaining) {
				continue
			}
		}
		remaining = kept
		d := r.decision()
		if !haveBest || d.Status.Severity() > best.Status.Severity() ||
			(d.Status == best.Status && best.Rule == RuleSandboxAllow) {
			best, haveBest = d, true
		}
	}
	if len(remaining) > 0 || !haveBest {
		return defaultDeny
	}
	return best
}

// matchesNonPath checks roles, server and tool.
func (c *call) matchesNonPath(r *rule) bool {
	if r.hasRoles && c.rr.all&r.roles == 0 {
		return false
	}
	if r.servers != nil && !contains(r.servers, c.req.Server) {
		return false
	}
	if r.tools != nil && !contains(r.tools, c.req.Tool) {
		return false
	}
	return true
}

// matches checks every condition of r. With a role (bit: setOf1(role); 0
// for none), extraction is scoped to it; withPaths false skips the paths
// condition (per-value discharge does that part).
func (c *call) matches(r *rule, bit roleSet, withPaths bool) bool {
	if !c.matchesNonPath(r) {
		return false
	}
	scope := func(roles roleSet) roleSet {
		if bit != 0 {
			return bit
		}
		return roles
	}
	if withPaths && r.paths != nil {
		n := 0
		for i := range c.vals {
			if c.rr.perArg[i]&scope(r.paths.roles) == 0 {
				continue
			}
			isPath := c.rr.kind[i]&argPath != 0
			for _, p := range c.vals[i].canon {
				n++
				if !isPath || !within(p, r.paths.within) {
					return false
				}
			}
		}
		if n == 0 {
			return false
		}
	}
	if r.domains != nil {
		n := 0
		for i := range c.vals {
			if c.rr.perArg[i]&scope(r.domains.roles) == 0 {
				continue
			}
			v := &c.vals[i]
			if len(v.domains) != len(v.canon) {
				return false // values that are not URLs never match a domain
			}
			for _, d := range v.domains {
				n++
				if !r.domains.patterns.match(d) {
					return false
				}
			}
		}
		if n == 0 {
			return false
		}
	}
	for li := range r.lists {
		lc := &r.lists[li]
		roles := lc.roles
		if bit != 0 && lc.roles&bit != 0 {
			roles = bit
		}
		if !c.listHolds(lc, roles) {
			return false
		}
	}
	return true
}

// listHolds reports whether every value of the arguments carrying roles is
// in the list (at least one value is required).
func (c *call) listHolds(lc *listCond, roles roleSet) bool {
	n := 0
	for i := range c.t.ann.Args {
		if c.rr.perArg[i]&roles == 0 {
			continue
		}
		var vals []string
		var doms []domainValue
		if c.vals != nil && c.rr.first[i] != "" {
			vals, doms = c.vals[i].canon, c.vals[i].domains
		} else {
			switch x := c.arg(i).(type) {
			case string:
				vals = []string{x}
			case []any:
				for _, e := range x {
					if s, ok := e.(string); ok {
						vals = append(vals, s)
					}
				}
			}
		}
		lower := false
		for _, d := range roleList {
			if d.Canonicalisation == CanonLowercase && (c.rr.perArg[i] & roles).has(d.Role) {
				lower = true
			}
		}
		for j, v := range vals {
			n++
			switch lc.matchType {
			case MatchDomains:
				var d domainValue
				if j < len(doms) {
					d = doms[j]
				} else {
					h, err := netpolicy.ParseHost(v)
					if err != nil {
						return false
					}
					d = domainValue{host: h}
				}
				if !lc.domains.match(d) {
					return false
				}
			case MatchEmails:
				if !lc.folded[strings.ToLower(v)] {
					return false
				}
			default:
				if lower {
					if !lc.folded[strings.ToLower(v)] {
						return false
					}
				} else if !lc.exact[v] {
					return false
				}
			}
		}
	}
	return n > 0
}
