package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"ironcurtain.dev/gateway/gitref"
)

// tool is one annotated tool, prepared at load.
type tool struct {
	server, name string
	ann          ToolAnnotation
	index        map[string]int // argument name → position in ann.Args
	conditional  bool
	static       *resolvedRoles // when no argument is conditional
	prMerge      bool           // isPRMerge(name), computed at load
}

// resolvedRoles are a tool's roles for one call (conditional specs applied).
type resolvedRoles struct {
	perArg   []roleSet
	first    []Role // first resource role of each argument ("" when none)
	all      roleSet
	distinct []Role // distinct resource roles in argument order
	anyPath  bool
	anyValue bool // some argument has a path, URL or identifier role
}

func (t *tool) resolve(args map[string]any) resolvedRoles {
	rr := resolvedRoles{perArg: make([]roleSet, len(t.ann.Args)), first: make([]Role, len(t.ann.Args))}
	for i, a := range t.ann.Args {
		for _, r := range a.Spec.Resolve(args) {
			rr.perArg[i].add(r)
			rr.all.add(r)
			d := roleDef(r)
			if d == nil || !d.ResourceIdentifier {
				if d != nil && d.Category != CategoryOpaque {
					rr.anyValue = true
				}
				continue
			}
			if rr.first[i] == "" {
				rr.first[i] = r
			}
			rr.anyValue = true
			if d.Category == CategoryPath {
				rr.anyPath = true
			}
			if !contains(rr.distinct, r) {
				rr.distinct = append(rr.distinct, r)
			}
		}
	}
	return rr
}

// knowsAll reports whether every key of args is an argument of t, without
// ranging over args when it can: when the annotation's names are distinct
// and as many of them are in args as args has keys, every key is one.
func (t *tool) knowsAll(args map[string]any) bool {
	if len(t.index) != len(t.ann.Args) || len(args) > len(t.ann.Args) {
		return false // let the caller range over args
	}
	n := 0
	for _, a := range t.ann.Args {
		if _, ok := args[a.Name]; ok {
			n++
		}
	}
	return n == len(args)
}

// Resolve returns the roles s gives a call with args: the roles of the
// first When entry whose condition holds, else Default. This is the
// engine's rule (the original's); the compiler uses it to reason about
// conditional annotations.
func (s ArgSpec) Resolve(args map[string]any) []Role {
	for _, w := range s.When {
		if w.Condition.Holds(args) {
			return w.Roles
		}
	}
	return s.Default
}

// Holds evaluates the condition against a call's arguments like the
// original: Equals is strict equality (numbers compared as numbers, no
// conversion between strings, numbers and booleans), In is membership by
// the same equality, Is tests presence ("present": set and not null,
// "absent") or JavaScript truthiness ("truthy", "falsy"; a missing
// argument is falsy). An unknown Is never holds.
func (c ArgCondition) Holds(args map[string]any) bool {
	v, present := args[c.Arg]
	switch {
	case c.Equals != nil:
		return present && strictEqual(v, c.Equals)
	case c.In != nil:
		if !present {
			return false
		}
		for _, x := range c.In {
			if strictEqual(v, x) {
				return true
			}
		}
		return false
	}
	switch c.Is {
	case "present":
		return present && v != nil
	case "absent":
		return !present || v == nil
	case "truthy":
		return present && truthy(v)
	case "falsy":
		return !present || !truthy(v)
	}
	return false
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

func strictEqual(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	fa, ok1 := toFloat(a)
	fb, ok2 := toFloat(b)
	return ok1 && ok2 && fa == fb
}

func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	}
	if f, ok := toFloat(v); ok {
		return f != 0 && !math.IsNaN(f)
	}
	return true
}

// argVal holds the canonical values of one argument.
type argVal struct {
	canon   []string      // canonical strings (realpath, URL, lower-cased identifier)
	domains []domainValue // URL roles: one per canonical value
	named   []string      // git remote names still to resolve
	absent  bool          // missing, null or ""
	changed bool          // canonical form differs from the request
	// one and oneDomain back canon and domains for a single value (the
	// usual case), so that they cost no allocation of their own.
	one       [1]string
	oneDomain [1]domainValue
}

// call is the state of one evaluation.
type call struct {
	e        *Engine
	ctx      context.Context
	req      Request
	t        *tool
	rr       *resolvedRoles
	vals     []argVal
	cache    []pathPair // per-call canonicalisation cache
	resolved roleSet    // roles discharged by sandbox containment
	push     *PushPlan
	policy   map[string]any // set when a policy value differs from transport
	// multiLink: some path value is a regular file with several links
	// (checkHardLinks).
	multiLink bool
}

type pathPair struct {
	raw, canon string
	id         fileID
}

// maxValuesPerCall bounds the array elements of resource arguments in one
// call (each may cost a realpath or a parse).
const maxValuesPerCall = 1024

// canonicalPath canonicalises raw at most once per call.
func (c *call) canonicalPath(raw string) (string, error) {
	for _, p := range c.cache {
		if p.raw == raw {
			return p.canon, nil
		}
	}
	canon, id, err := c.e.canon.canonicalID(raw)
	if err != nil {
		return "", err
	}
	c.cache = append(c.cache, pathPair{raw, canon, id})
	c.multiLink = c.multiLink || id.nlink > 1
	return canon, nil
}

func (c *call) result(d Decision) Evaluation {
	ev := Evaluation{Decision: d, Transport: c.req.Args, Policy: c.req.Args, Push: c.push}
	changed := false
	for i := range c.vals {
		if c.vals[i].changed {
			changed = true
			break
		}
	}
	if changed {
		ev.Transport = make(map[string]any, len(c.req.Args))
		for k, v := range c.req.Args {
			ev.Transport[k] = v
		}
		for i, a := range c.t.ann.Args {
			v := &c.vals[i]
			if !v.changed {
				continue
			}
			if _, isArr := c.req.Args[a.Name].([]any); isArr {
				arr := make([]any, len(v.canon))
				for j, s := range v.canon {
					arr[j] = s
				}
				ev.Transport[a.Name] = arr
			} else if len(v.canon) == 1 {
				ev.Transport[a.Name] = v.canon[0]
			}
		}
		ev.Policy = ev.Transport
	}
	if c.policy != nil {
		p := make(map[string]any, len(ev.Transport)+len(c.policy))
		for k, v := range ev.Transport {
			p[k] = v
		}
		for k, v := range c.policy {
			p[k] = v
		}
		ev.Policy = p
	}
	return ev
}

func (c *call) deny(rule, reason, detail string) (Evaluation, bool) {
	return c.result(Decision{Status: Deny, Rule: rule, Reason: reason, Detail: detail}), true
}

// prepare canonicalises every path, URL and identifier value.
func (c *call) prepare() (Evaluation, bool) {
	if !c.rr.anyValue {
		return Evaluation{}, false
	}
	c.vals = make([]argVal, len(c.t.ann.Args))
	total := 0
	for i, a := range c.t.ann.Args {
		role := c.rr.first[i]
		if role == "" {
			continue
		}
		def := roleDef(role)
		raw, present := c.req.Args[a.Name]
		v := &c.vals[i]
		var strs []string
		switch x := raw.(type) {
		case nil:
			v.absent = true
			continue
		case string:
			if x == "" && def.Canonicalisation == CanonGitRemote {
				v.absent = true // the repository's default remote
				continue
			}
			strs = []string{x}
		case []any:
			if total += len(x); total > maxValuesPerCall {
				return c.deny(RuleInvalidArgument, fmt.Sprintf("too many values (more than %d paths, URLs or identifiers in one call)", maxValuesPerCall), "")
			}
			strs = make([]string, 0, len(x))
			for j, e := range x {
				s, ok := e.(string)
				if !ok {
					return c.deny(RuleInvalidArgument, fmt.Sprintf("argument %s[%d] must be a string", a.Name, j), "")
				}
				strs = append(strs, s)
			}
		default:
			_ = present
			return c.deny(RuleInvalidArgument, fmt.Sprintf("argument %q must be a string or an array of strings", a.Name), "")
		}
		if len(strs) == 1 {
			v.canon, v.domains = v.one[:0], v.oneDomain[:0]
		} else {
			v.canon = make([]string, 0, len(strs))
		}
		for _, s := range strs {
			switch def.Canonicalisation {
			case CanonRealpath:
				p, err := c.canonicalPath(s)
				if err != nil {
					return c.deny(RuleInvalidArgument, fmt.Sprintf("argument %q is not a usable path: %s", a.Name, safePathErr(err)), err.Error())
				}
				v.canon = append(v.canon, p)
				v.changed = v.changed || p != s
			case CanonURL:
				u, d, err := fetchDomain(s)
				if err != nil {
					return c.deny(RuleInvalidArgument, fmt.Sprintf("argument %q is not an acceptable URL: %s", a.Name, unwrapParse(err)), "")
				}
				v.canon = append(v.canon, u)
				v.domains = append(v.domains, d)
				v.changed = v.changed || u != s
			case CanonGitRemote:
				if gitref.IsRemoteName(s) {
					v.named = append(v.named, s)
					continue
				}
				r, err := ParseGitRemoteURL(s)
				if err != nil {
					return c.deny(RuleInvalidArgument, fmt.Sprintf("argument %q: %v", a.Name, err), "")
				}
				v.canon = append(v.canon, r.URL())
				v.domains = append(v.domains, r.domain())
			case CanonLowercase:
				l := strings.ToLower(s)
				v.canon = append(v.canon, l)
				v.changed = v.changed || l != s
			default:
				v.canon = append(v.canon, s)
			}
		}
	}
	return Evaluation{}, false
}

// safePathErr describes a canonicalisation failure without host details.
func safePathErr(err error) string {
	switch err {
	case errPathControl, errPathTooLong, errPathRelative, errPathNoHome, errPathLoop, errPathMissingParent:
		return err.Error()
	}
	return "it cannot be resolved"
}

// pathValues returns the canonical values of the arguments carrying role.
func (c *call) pathValues(roles roleSet, out []string) []string {
	for i := range c.vals {
		if c.rr.perArg[i]&roles != 0 {
			out = append(out, c.vals[i].canon...)
		}
	}
	return out
}

// sandboxContainment marks the sandbox-safe path roles (Settings.
// SandboxSafeRoles) whose values all lie in the sandbox (filesystem and git
// servers only; a filesystem read-path value may also lie in a read-only
// directory, Settings.ReadOnlyDirs). Other path roles, in or out of the
// sandbox, are left to the compiled rules.
func (c *call) sandboxContainment() {
	sb := c.e.canon.sandbox
	if sb == "" || !c.rr.anyPath || (c.req.Server != "filesystem" && c.req.Server != "git") {
		return
	}
	anyValue := false
	for i := range c.vals {
		if len(c.vals[i].canon) > 0 && c.rr.first[i] != "" && roleDef(c.rr.first[i]).Category == CategoryPath {
			anyValue = true
		}
	}
	if !anyValue {
		return
	}
	var buf [8]string
	for _, r := range c.rr.distinct {
		d := roleDef(r)
		if d.Category != CategoryPath || !c.e.safe.has(r) {
			continue
		}
		vals := c.pathValues(setOf1(r), buf[:0])
		if len(vals) == 0 {
			continue
		}
		all := true
		for _, p := range vals {
			if !within(p, sb) && !(r == RoleReadPath && c.e.inReadOnly(c.req.Server, p)) {
				all = false
				break
			}
		}
		if all {
			c.resolved.add(r)
		}
	}
}

func setOf1(r Role) roleSet {
	var s roleSet
	s.add(r)
	return s
}

// domainGate escalates a URL whose domain the server's allowlist lacks.
func (c *call) domainGate() (Evaluation, bool) {
	allow, ok := c.e.allow[c.req.Server]
	if !ok {
		return Evaluation{}, false
	}
	for i := range c.vals {
		first := c.rr.first[i]
		if first == "" || roleDef(first).Category != CategoryURL {
			continue
		}
		for _, d := range c.vals[i].domains {
			if !allow.match(d) {
				return c.result(Decision{Status: Escalate, Rule: RuleDomainEscalate,
					Reason:         fmt.Sprintf("URL domain %q is not in the allowlist for server %q", d.String(), c.req.Server),
					EscalatedRoles: []Role{first}}), true
			}
		}
	}
	return Evaluation{}, false
}
