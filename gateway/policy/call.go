package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"

	"ironcurtain.dev/gateway/gitref"
)

// toolName is a tool's server and name (Engine.byName).
type toolName struct{ server, tool string }

// tool is one annotated tool, prepared at load.
type tool struct {
	server, name string
	ann          ToolAnnotation
	index        map[string]int // argument name → position in ann.Args
	conditional  bool
	static       *resolvedRoles // when no argument is conditional
	prMerge      bool           // isPRMerge(name), computed at load
	// rules are the positions of the compiled rules whose server and tool
	// conditions admit this tool, in order (indexRules); the others can
	// never match its calls. Valid when indexed.
	rules   []int32
	indexed bool
	// textServer: the server is one of the secret scanner's text servers
	// (SecretScan.TextServers), looked up at load (compileSettings builds
	// the scanner before the tools are added).
	textServer bool
}

// resolvedRoles are a tool's roles for one call (conditional specs applied).
type resolvedRoles struct {
	perArg   []roleSet
	first    []Role    // first resource role of each argument ("" when none)
	kind     []argKind // what first is, so the checks need not look it up
	all      roleSet
	distinct []Role // distinct resource roles in argument order
	anyPath  bool
	anyURL   bool // some argument's first resource role is a URL role
	anyValue bool // some argument has a path, URL or identifier role
}

// argKind says what an argument's first resource role is (resolvedRoles.kind).
type argKind uint8

const (
	argPath     argKind = 1 << iota // a path role (CategoryPath)
	argURL                          // a URL role (CategoryURL)
	argRealpath                     // canonicalised by realpath (CanonRealpath)
)

func kindOf(d *RoleDefinition) argKind {
	var k argKind
	if d.Category == CategoryPath {
		k |= argPath
	}
	if d.Category == CategoryURL {
		k |= argURL
	}
	if d.Canonicalisation == CanonRealpath {
		k |= argRealpath
	}
	return k
}

// Role bits the evaluator tests on every call (roleSet.has looks the role up).
var (
	bitEmailBody   = setOf1(RoleEmailBody)
	bitBranchName  = setOf1(RoleBranchName)
	bitGitHubOwner = setOf1(RoleGitHubOwner)
	bitGitHubRepo  = setOf1(RoleGitHubRepo)
)

func (t *tool) resolve(args map[string]any) resolvedRoles {
	rr := resolvedRoles{perArg: make([]roleSet, len(t.ann.Args)), first: make([]Role, len(t.ann.Args)), kind: make([]argKind, len(t.ann.Args))}
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
				rr.first[i], rr.kind[i] = r, kindOf(d)
				rr.anyURL = rr.anyURL || d.Category == CategoryURL
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

// readArgs reads the request's value of each annotated argument once
// (c.arg; nil when absent: every check treats a missing argument and a null
// alike) and reports whether every key of the request is an argument of the
// tool, without ranging over the request when it can: when the
// annotation's names are distinct and as many of them are in the request as
// it has keys, every key is one. When it reports false the caller ranges
// over the request's keys.
func (c *call) readArgs() bool {
	args, anns := c.req.Args, c.t.ann.Args
	if len(anns) > len(c.argv) {
		c.argvMore = make([]any, len(anns)-len(c.argv))
	}
	n := 0
	for i, a := range anns {
		if v, ok := args[a.Name]; ok {
			if i < len(c.argv) {
				c.argv[i] = v
			} else {
				c.argvMore[i-len(c.argv)] = v
			}
			n++
		}
	}
	return len(c.t.index) == len(anns) && n == len(args)
}

// arg returns the request's value of the argument at position i of the
// tool's annotation (readArgs), nil when absent.
func (c *call) arg(i int) any {
	if i < len(c.argv) {
		return c.argv[i]
	}
	return c.argvMore[i-len(c.argv)]
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

// valsBlock backs the canonical values of a call of a tool with up to two
// arguments. A block is taken from valsPool by prepare and given back,
// cleared, by release when the evaluation is over: nothing of an Evaluation
// points into it (result, setPolicyValue and the reasons copy what they
// keep), and a cleared block holds no string of an earlier call.
type valsBlock [2]argVal

var valsPool = sync.Pool{New: func() any { return new(valsBlock) }}

// release clears the call's block of values and returns it to valsPool.
func (c *call) release() {
	if b := c.block; b != nil {
		c.block, c.vals = nil, nil
		clear(b[:])
		valsPool.Put(b)
	}
}

// call is the state of one evaluation.
type call struct {
	e   *Engine
	ctx context.Context
	req Request
	t   *tool
	rr  *resolvedRoles
	// argv and argvMore hold the request's value of each argument of t
	// (readArgs; read with arg). An array, not a slice of one, so that the
	// call does not point into itself and stays on the stack.
	argv     [4]any
	argvMore []any
	vals     []argVal
	block    *valsBlock // backs vals when it came from valsPool (release)
	cache    []pathPair // per-call canonicalisation cache
	resolved roleSet    // roles discharged by sandbox containment
	push     *PushPlan
	policy   map[string]any // set when a policy value differs from transport
	// multiLink: some path value is a regular file with several links
	// (checkHardLinks).
	multiLink bool
	// remotesResolved: checkGit added or replaced URL values (the special
	// hosts are checked again).
	remotesResolved bool
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
	if n := len(c.t.ann.Args); n <= len(valsBlock{}) {
		c.block = valsPool.Get().(*valsBlock)
		c.vals = c.block[:n:n]
	} else {
		c.vals = make([]argVal, n)
	}
	total := 0
	for i, a := range c.t.ann.Args {
		role := c.rr.first[i]
		if role == "" {
			continue
		}
		def := roleDef(role)
		raw := c.arg(i)
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
		if len(c.vals[i].canon) > 0 && c.rr.kind[i]&argPath != 0 {
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
	if !c.rr.anyURL {
		return Evaluation{}, false // no URL value to gate
	}
	allow, ok := c.e.allow[c.req.Server]
	if !ok {
		return Evaluation{}, false
	}
	for i := range c.vals {
		first := c.rr.first[i]
		if c.rr.kind[i]&argURL == 0 {
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
