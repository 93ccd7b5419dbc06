package policy

import (
	"fmt"
	"sort"
	"strings"
)

// RuleUnreachablePath names the structural decision that refuses a call a
// compiled rule would allow or escalate although its server cannot run it:
// a path outside what a confined server can reach (Settings.
// ConfinedServers). A human's approval must mean the call runs, so such a
// call is never offered for approval.
const RuleUnreachablePath = "structural-unreachable-path"

// reach is what the confined servers can reach: the sandbox for every path
// role, and for the filesystem server's read-path also the read-only
// directories.
type reach struct {
	confined map[string]bool
	readOnly []string // canonical read-only directories (Settings.ReadOnlyDirs)
}

// filesystemServer is the built-in server that reads the read-only
// directories.
const filesystemServer = "filesystem"

// compileReach canonicalises Settings.ReadOnlyDirs and ConfinedServers.
// A read-only directory must be absolute (or ~/...), must not be / and must
// not contain the sandbox or lie inside it (writes there would be allowed,
// or the sandbox would become read-only).
func (e *Engine) compileReach(s Settings) error {
	e.reach = reach{}
	for _, srv := range s.ConfinedServers {
		if e.reach.confined == nil {
			e.reach.confined = map[string]bool{}
		}
		e.reach.confined[srv] = true
	}
	for i, d := range s.ReadOnlyDirs {
		field := fmt.Sprintf("read_only_dirs[%d]", i)
		lex, err := cleanAbs(d, e.canon.home)
		if err != nil {
			return settingsErr(field, err)
		}
		real, err := e.canon.canonical(lex)
		if err != nil {
			return settingsErr(field, err)
		}
		if real == "/" {
			return settingsErr(field, fmt.Errorf("%q: the root directory cannot be a read-only directory", d))
		}
		if sb := e.canon.sandbox; sb != "" && (within(real, sb) || within(sb, real)) {
			return settingsErr(field, fmt.Errorf("%q: overlaps the sandbox", d))
		}
		if !contains(e.reach.readOnly, real) {
			e.reach.readOnly = append(e.reach.readOnly, real)
		}
	}
	return nil
}

// ReadOnlyDirs returns the canonical read-only directories.
func (e *Engine) ReadOnlyDirs() []string { return append([]string(nil), e.reach.readOnly...) }

// inReadOnly reports whether a read-path value p of server lies in a
// read-only directory (only the filesystem server reads them).
func (e *Engine) inReadOnly(server string, p string) bool {
	if server != filesystemServer {
		return false
	}
	for _, d := range e.reach.readOnly {
		if within(p, d) {
			return true
		}
	}
	return false
}

// reachable reports whether server can act on path value p carried with
// roles: inside the sandbox always; inside a read-only directory only for
// the filesystem server and only when every path role of the argument reads.
func (e *Engine) reachable(server string, p string, roles roleSet) bool {
	if sb := e.canon.sandbox; sb != "" && within(p, sb) {
		return true
	}
	for _, d := range roleList {
		if d.Category == CategoryPath && d.Role != RoleReadPath && roles.has(d.Role) {
			return false
		}
	}
	return e.inReadOnly(server, p)
}

// confine turns an allow or escalate of a confined server's call into a
// deny when one of its path values lies where the server cannot reach:
// the server would refuse it ("path is outside the sandbox") after a human
// approved it.
func (c *call) confine(d Decision) Decision {
	if d.Status == Deny || !c.rr.anyPath || c.e.canon.sandbox == "" || !c.e.reach.confined[c.req.Server] {
		return d
	}
	for i := range c.vals {
		if c.rr.kind[i]&argPath == 0 {
			continue
		}
		for _, p := range c.vals[i].canon {
			if !c.e.reachable(c.req.Server, p, c.rr.perArg[i]) {
				what := "the sandbox"
				if c.req.Server == filesystemServer && len(c.e.reach.readOnly) > 0 {
					what = "the sandbox (or, for reading, the read-only directories)"
				}
				return Decision{Status: Deny, Rule: RuleUnreachablePath,
					Reason: fmt.Sprintf("the %s server works only inside %s, so this call could not run even if approved", c.req.Server, what),
					Detail: fmt.Sprintf("unreachable path %s (rule %s would have decided %s)", p, d.Rule, d.Status)}
			}
		}
	}
	return d
}

// checkReach warns about compiled rules that allow or escalate calls a
// confined server cannot run: a path rule of a filesystem or git tool whose
// values, as far as they reach the rules at all, lie outside the sandbox
// (and, for the filesystem server's reads, outside the read-only
// directories). Such calls are denied at evaluation (RuleUnreachablePath);
// the warning says that the rule does not mean what it says. Values that
// sandbox containment resolves never reach the rules, so a rule within / on
// a sandbox-safe role only ever sees unreachable values.
func (e *Engine) checkReach() {
	sb := e.canon.sandbox
	if sb == "" || len(e.reach.confined) == 0 {
		return
	}
	servers := make([]string, 0, len(e.reach.confined))
	for s := range e.reach.confined {
		servers = append(servers, s)
	}
	sort.Strings(servers)
	for i := range e.rules {
		r := &e.rules[i]
		if r.then == Deny || r.paths == nil {
			continue
		}
		for _, srv := range servers {
			if r.servers != nil && !contains(r.servers, srv) {
				continue
			}
			var dead []string
			for _, d := range roleList {
				role := d.Role
				if d.Category != CategoryPath || !r.paths.roles.has(role) || !r.relevant(setOf1(role)) || !e.serverCarries(srv, r, role) {
					continue
				}
				if e.onlyUnreachable(srv, role, r.paths.within) {
					dead = append(dead, string(role))
				}
			}
			if len(dead) == 0 {
				continue
			}
			where := "the sandbox " + sb
			if srv == filesystemServer && len(e.reach.readOnly) > 0 {
				where += " or, for reading, the read-only directories " + strings.Join(e.reach.readOnly, ", ")
			}
			e.warnings = append(e.warnings, fmt.Sprintf(
				"rule %q would %s %s calls with %s paths within %s that the %s server cannot run (it works only inside %s): they are denied instead (%s)",
				r.name, r.then, srv, strings.Join(dead, ", "), r.paths.within, srv, where, RuleUnreachablePath))
		}
	}
}

// serverCarries reports whether some tool of server that r can match has
// an argument that may carry role.
func (e *Engine) serverCarries(server string, r *rule, role Role) bool {
	for _, t := range e.tools {
		if t.server != server || (r.tools != nil && !contains(r.tools, t.name)) {
			continue
		}
		for _, a := range t.ann.Args {
			if contains(a.Spec.Default, role) {
				return true
			}
			for _, w := range a.Spec.When {
				if contains(w.Roles, role) {
					return true
				}
			}
		}
	}
	return false
}

// onlyUnreachable reports whether the values of role that a rule within w
// can see on server all lie where server cannot reach, and there are such
// values (w is not entirely inside what containment resolves first).
func (e *Engine) onlyUnreachable(server string, role Role, w string) bool {
	reach := []string{e.canon.sandbox}
	if server == filesystemServer && role == RoleReadPath {
		reach = append(reach, e.reach.readOnly...)
	}
	for _, d := range reach {
		if within(w, d) {
			return false // the rule only ever sees reachable values (or none)
		}
	}
	if e.safe.has(role) {
		// Containment resolves every reachable value before the rules: the
		// rule sees only the unreachable remainder of w.
		return true
	}
	for _, d := range reach {
		if within(d, w) {
			return false // part of w is reachable and reaches the rule
		}
	}
	return true
}
