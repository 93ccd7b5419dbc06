package policy

import (
	"context"
	"fmt"
)

// Engine decides tool calls. Build it once with LoadDir or New; Evaluate is
// safe for concurrent use.
type Engine struct {
	tools    map[string]*tool
	byName   map[toolName]*tool // tools by server and tool name (no key string to build per call)
	rules    []rule
	trusted  map[string]bool
	allow    map[string]domainSet
	canon    pathCanon
	safe     roleSet // sandbox-safe roles (Settings.SandboxSafeRoles)
	fs       FileSystem
	protect  []string // canonical and lexical forms of the protected paths
	push     *PushChecker
	remotes  RemoteResolver // WithRemoteResolver; noResolver when none
	settings Settings
	shadow   *Engine
	warnings []string
	rebase   Rebase // how LoadDir moved the rules to the configured sandbox
	reach    reach  // what confined servers can reach (reach.go)
	secrets  *SecretScanner
	content  string        // content hash of the artifacts and settings (version.go)
	version  string        // content, combined with the shadow's version (version.go)
	annFiles []string      // the annotation files loaded, in load order
	src      *engineSource // what the engine was built from, for session views (sessions.go)
	sessions sessionRoot   // the per-session sandboxes' root (sessions.go)
	views    *viewCache    // session views built so far; nil in a view (sessions.go)
}

// Evaluation is the outcome of one call: the decision, the arguments to send
// to the server (Transport: canonical paths, canonical URLs) and the
// arguments the policy judged (Policy: as Transport, with named git remotes
// replaced by the URLs they resolve to), for the audit record. Transport and
// Policy may share the request's own map when nothing changed: treat them as
// read-only. Shadow is the report-only decision of the shadow policy.
type Evaluation struct {
	Decision  Decision
	Transport map[string]any
	Policy    map[string]any
	Shadow    *Decision
	// Push is the checked plan of a git push (nil for other calls).
	Push *PushPlan
}

// Rule names of the structural checks (compiled rules use their own names).
const (
	RuleTrustedServer     = "trusted-server"
	RuleProtectedPath     = "structural-protected-path"
	RuleIntrospection     = "structural-introspection-allow"
	RuleDomainEscalate    = "structural-domain-escalate"
	RuleUnknownTool       = "structural-unknown-tool"
	RuleUnknownArgument   = "structural-unknown-argument"
	RuleInvalidArgument   = "structural-invalid-argument"
	RuleSandboxAllow      = "structural-sandbox-allow"
	RuleGitPush           = "structural-git-push"
	RuleGitRemote         = "structural-git-remote"
	RulePRMerge           = "structural-pr-merge"
	RuleDefaultDeny       = "default-deny"
	RuleInternalError     = "internal-error"
	reasonDefaultDeny     = "No matching policy rule -- denied by default"
	reasonProtectedPath   = "access to a protected path is forbidden"
	reasonProtectedInRepo = "writing or deleting git metadata or environment files (.git, .gitmodules, .gitattributes, .env, .envrc) is forbidden"
)

// Annotation returns the annotation of server's tool as loaded (conditional
// specs unresolved).
func (e *Engine) Annotation(server, tool string) (ToolAnnotation, bool) {
	t := e.tools[server+"__"+tool]
	if t == nil {
		return ToolAnnotation{}, false
	}
	return t.ann, true
}

// UnknownArgument returns the smallest name in args that Evaluate refuses
// as not part of server/tool (RuleUnknownArgument); ok is false when there
// is none, or when Evaluate would not check names (a trusted server, an
// unknown tool). The MCP hub asks it before any other work on a call.
func (e *Engine) UnknownArgument(server, tool string, args map[string]any) (name string, ok bool) {
	if e.trusted[server] {
		return "", false
	}
	t := e.tools[server+"__"+tool]
	if t == nil {
		return "", false
	}
	for k := range args {
		if _, known := t.index[k]; !known && (!ok || k < name) {
			name, ok = k, true
		}
	}
	return name, ok
}

// Tools returns every annotated tool key ("server__tool").
func (e *Engine) Tools() []string {
	return sortedKeys(e.tools)
}

// AnnotationFiles returns the tool annotation files the engine loaded (the
// policy directory's tool-annotations.json, then annotations_file), for
// `policy check` and the startup log.
func (e *Engine) AnnotationFiles() []string {
	return append([]string(nil), e.annFiles...)
}

// Sandbox returns the sandbox's realpath ("" when none is set).
func (e *Engine) Sandbox() string { return e.canon.sandbox }

// SandboxSafeRoles returns the path roles that sandbox containment resolves
// (the effective Settings.SandboxSafeRoles), in registry order.
func (e *Engine) SandboxSafeRoles() []Role {
	var out []Role
	for _, d := range roleList {
		if e.safe.has(d.Role) {
			out = append(out, d.Role)
		}
	}
	return out
}

// PushChecker returns the engine's push checker (the git server uses it to
// execute exactly the plan the policy checked).
func (e *Engine) PushChecker() *PushChecker { return e.push }

// Warnings returns load-time warnings (for example a @list with no entry in
// dynamic-lists.json, which then matches nothing).
func (e *Engine) Warnings() []string { return append([]string(nil), e.warnings...) }

// WithShadow returns a copy of e that also evaluates every call with s and
// reports s's decision in Evaluation.Shadow. s never changes the decision.
func (e *Engine) WithShadow(s *Engine) *Engine {
	c := *e
	c.shadow = s
	c.version = c.versionWithShadow()
	c.views = newViewCache() // views of e carry e's shadow, not s
	return &c
}

// Shadow returns the attached shadow engine, if any.
func (e *Engine) Shadow() *Engine { return e.shadow }

// Evaluate decides one call. It never panics: an internal failure denies.
func (e *Engine) Evaluate(ctx context.Context, r Request) (ev Evaluation) {
	if r.Sandbox != "" {
		return e.evaluateInSandbox(ctx, r) // sessions.go
	}
	ev = e.safeEvaluate(ctx, r)
	if e.shadow != nil {
		d := e.shadow.safeEvaluate(ctx, r).Decision
		ev.Shadow = &d
	}
	return ev
}

func (e *Engine) safeEvaluate(ctx context.Context, r Request) (ev Evaluation) {
	defer func() {
		if p := recover(); p != nil {
			ev = Evaluation{Decision: Decision{Status: Deny, Rule: RuleInternalError,
				Reason: "internal error while evaluating the call", Detail: fmt.Sprint(p)}}
		}
	}()
	return e.evaluate(ctx, r)
}

func deny(rule, reason string) Evaluation {
	return Evaluation{Decision: Decision{Status: Deny, Rule: rule, Reason: reason}}
}

func (e *Engine) evaluate(ctx context.Context, r Request) Evaluation {
	if r.Args == nil {
		r.Args = map[string]any{}
	}
	t := e.byName[toolName{r.Server, r.Tool}]
	if t != nil && t.prMerge || t == nil && isPRMerge(r.Tool) {
		return deny(RulePRMerge, fmt.Sprintf("merging pull requests (%s) is never allowed", r.Tool))
	}
	if e.trusted[r.Server] {
		return e.evaluateTrusted(ctx, r)
	}
	if t == nil {
		return deny(RuleUnknownTool, fmt.Sprintf("Unknown tool: %s/%s", r.Server, r.Tool))
	}
	c := call{e: e, ctx: ctx, req: r, t: t}
	defer c.release()
	if t.static != nil {
		c.rr = t.static
	} else {
		rr := t.resolve(r.Args)
		c.rr = &rr
	}
	if !c.readArgs() {
		for k := range r.Args {
			if _, ok := t.index[k]; !ok {
				return deny(RuleUnknownArgument, fmt.Sprintf("argument %q is not part of %s/%s", k, r.Server, r.Tool))
			}
		}
	}
	if ev, done := c.checkSpelling(); done {
		return ev
	}
	if ev, done := c.prepare(); done {
		return ev
	}
	if ev, done := c.checkSpecialHosts(); done {
		return ev
	}
	sd, secret := c.scanSecrets()
	sd, secret = c.withDoorSecrets(sd, secret) // doorsecrets.go
	if secret && sd.Status == Deny {
		return c.result(sd)
	}
	ev := c.evaluatePrepared()
	sd, secret = c.inspectPush(&ev, sd, secret) // pushscan.go
	c.bindDoorContent(&ev)                      // doorsecrets.go
	if secret {
		return withSecrets(ev, sd)
	}
	return ev
}

// evaluatePrepared runs the checks and rules after the values are prepared.
func (c *call) evaluatePrepared() Evaluation {
	r := c.req
	if ev, done := c.checkProtected(); done {
		return ev
	}
	if ev, done := c.checkProtectedSpelling(); done {
		return ev
	}
	if ev, done := c.checkHardLinks(); done {
		return ev
	}
	if ev, done := c.checkGit(); done {
		return ev
	}
	if c.remotesResolved { // the remotes checkGit resolved (the other values were checked)
		if ev, done := c.checkSpecialHosts(); done {
			return ev
		}
	}
	if r.Server == "filesystem" && r.Tool == "list_allowed_directories" && len(r.Args) == 0 {
		return c.result(Decision{Status: Allow, Rule: RuleIntrospection, Reason: "Introspection tool is always allowed"})
	}
	c.sandboxContainment()
	if ev, done := c.domainGate(); done {
		return c.result(c.confine(ev.Decision))
	}
	return c.result(c.confine(c.evaluateRules()))
}

// evaluateTrusted allows calls to trusted servers, except that the git push
// and PR-merge invariants still hold.
func (e *Engine) evaluateTrusted(ctx context.Context, r Request) Evaluation {
	ev := Evaluation{Decision: Decision{Status: Allow, Rule: RuleTrustedServer,
		Reason: fmt.Sprintf("Server %q is trusted", r.Server)}, Transport: r.Args, Policy: r.Args}
	if !IsPushTool(r.Server, r.Tool) {
		return ev
	}
	in, err := ParsePushArgs(r.Args)
	if err != nil {
		return deny(RuleGitPush, err.Error())
	}
	repo, err := e.canon.canonical(in.Path)
	if err != nil {
		return deny(RuleGitPush, "the repository path is invalid")
	}
	plan, err := e.push.Check(ctx, repo, in)
	if err != nil {
		return deny(RuleGitPush, err.Error())
	}
	ev.Push = &plan
	return ev
}

// RuleCount returns the number of compiled rules.
func (e *Engine) RuleCount() int { return len(e.rules) }
