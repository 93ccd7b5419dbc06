package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"ironcurtain.dev/gateway/gitref"
)

// PushInput is one push as a tool call describes it, after ParsePushArgs.
type PushInput struct {
	// Path is the repository directory as the call gave it.
	Path string
	// Remote is a remote name or URL ("" for the default push remote).
	Remote string
	// Branch is a local branch or a refspec "src[:dst]".
	Branch string
	// RemoteBranch is the destination branch name.
	RemoteBranch string
	// Refspecs are extra refspecs.
	Refspecs []string
	// Tags and SetUpstream are harmless flags, kept for the git server.
	Tags, SetUpstream, DryRun bool
	// Refused names the first argument that makes the push unacceptable by
	// itself (force, delete, mirror, ...), "" when none does.
	Refused string
}

// pushArg classifies the arguments of a push tool by their normalised name
// (lower case, '_' and '-' removed), so that force_with_lease,
// forceWithLease and force-with-lease are the same argument.
var pushArg = map[string]string{
	"path": "path", "repo": "refuse", "repository": "refuse",
	"remote": "remote", "branch": "branch", "remotebranch": "remotebranch",
	"refspecs": "refspecs", "refspec": "refspecs", "refs": "refspecs",
	"force": "refuse", "forcewithlease": "refuse", "forceifincludes": "refuse",
	"delete": "refuse", "mirror": "refuse", "all": "refuse", "branches": "refuse", "prune": "refuse",
	"receivepack": "refuse", "exec": "refuse", "uploadpack": "refuse", "pushoption": "refuse", "pushoptions": "refuse",
	"tags": "tags", "followtags": "tags", "setupstream": "setupstream", "u": "setupstream",
	"dryrun": "dryrun", "confirmed": "ignore", "verbose": "ignore", "quiet": "ignore", "progress": "ignore", "atomic": "ignore",
}

func normArgName(n string) string {
	var b strings.Builder
	for i := 0; i < len(n); i++ {
		c := n[i]
		switch {
		case c == '_' || c == '-':
		case c >= 'A' && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// IsPushTool reports whether server/tool is a git push the engine hardens:
// server "git", tool "push" or "git_push".
func IsPushTool(server, tool string) bool {
	return server == "git" && (tool == "push" || tool == "git_push")
}

// ParsePushArgs reads the arguments of a push tool (ours: path, remote,
// branch, remote_branch, refspecs, force, force_with_lease, tags,
// set_upstream; the original's git_push: forceWithLease, remoteBranch,
// delete, ...). A flag that forces, deletes, mirrors or pushes every branch
// is recorded in Refused when its value is anything but false or null; an
// argument the hardening does not know is an error.
func ParsePushArgs(args map[string]any) (PushInput, error) {
	var in PushInput
	for name, v := range args {
		kind, ok := pushArg[normArgName(name)]
		if !ok {
			return in, fmt.Errorf("unsupported push argument %q", name)
		}
		switch kind {
		case "refuse":
			if v != nil && v != false {
				if in.Refused == "" || name < in.Refused {
					in.Refused = name
				}
			}
		case "path", "remote", "branch", "remotebranch":
			s, err := optString(name, v)
			if err != nil {
				return in, err
			}
			switch kind {
			case "path":
				in.Path = s
			case "remote":
				in.Remote = s
			case "branch":
				in.Branch = s
			default:
				in.RemoteBranch = s
			}
		case "refspecs":
			switch x := v.(type) {
			case nil:
			case string:
				in.Refspecs = append(in.Refspecs, x)
			case []any:
				for i, e := range x {
					s, ok := e.(string)
					if !ok {
						return in, fmt.Errorf("argument %s[%d] must be a string", name, i)
					}
					in.Refspecs = append(in.Refspecs, s)
				}
			default:
				return in, fmt.Errorf("argument %q must be an array of strings", name)
			}
		case "tags", "setupstream", "dryrun":
			b, ok := v.(bool)
			if !ok && v != nil {
				return in, fmt.Errorf("argument %q must be a boolean", name)
			}
			switch kind {
			case "tags":
				in.Tags = in.Tags || b
			case "setupstream":
				in.SetUpstream = in.SetUpstream || b
			default:
				in.DryRun = in.DryRun || b
			}
		}
	}
	return in, nil
}

func optString(name string, v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	}
	return "", fmt.Errorf("argument %q must be a string", name)
}

// PushPlan is where a push goes and what it updates, in canonical form. The
// git server executes exactly this plan (explicit URLs and full refspecs).
type PushPlan struct {
	Remote        string        // remote name ("" when a URL was given)
	URLs          []GitRemote   // every destination; all passed policy
	Refspecs      []PushRefspec // canonical src → dst
	CurrentBranch string
	Tags          bool
	SetUpstream   bool
	// Inspected, when set, are the objects a secret scan read, by
	// destination ref (PushInspector): the push must send exactly these.
	// Not part of Equal.
	Inspected map[string]string
}

// ErrPushRefused is wrapped by every refusal from CheckPush.
var ErrPushRefused = errors.New("push refused")

// PushChecker plans and checks pushes. The engine and the git server use
// the same one, so there is one parser and one answer.
type PushChecker struct {
	Sandbox           string // canonical sandbox
	ProtectedBranches []string
	Resolver          RemoteResolver // reads the repository's remotes and branch
	protected         []protectedBranch
}

// NewPushChecker validates the protected branch names (default main and
// master when empty). r reads the repositories (gateway/gitremote); nil
// refuses every push (no remote can be resolved).
func NewPushChecker(sandbox string, protectedBranches []string, r RemoteResolver) (*PushChecker, error) {
	if len(protectedBranches) == 0 {
		protectedBranches = DefaultProtectedBranches()
	}
	pc := &PushChecker{Sandbox: sandbox, ProtectedBranches: protectedBranches, Resolver: r}
	for i, b := range protectedBranches {
		p, err := parseProtectedBranch(b)
		if err != nil {
			return nil, &FileError{Path: fmt.Sprintf("protected_branches[%d]", i), Err: err}
		}
		pc.protected = append(pc.protected, p)
	}
	if pc.Resolver == nil {
		pc.Resolver = noResolver{}
	}
	return pc, nil
}

// DefaultProtectedBranches returns the branches protected when the settings
// name none.
func DefaultProtectedBranches() []string { return []string{"main", "master"} }

// Check plans the push in. repoDir is the canonical repository directory
// (the policy's realpath of in.Path). Every refusal wraps ErrPushRefused and
// says why in words safe to show the agent.
func (pc *PushChecker) Check(ctx context.Context, repoDir string, in PushInput) (PushPlan, error) {
	refuse := func(format string, a ...any) (PushPlan, error) {
		return PushPlan{}, fmt.Errorf("%w: %s", ErrPushRefused, fmt.Sprintf(format, a...))
	}
	if in.Refused != "" {
		return refuse("argument %q (force, delete, mirror or all-branches push) is not allowed", in.Refused)
	}
	if repoDir == "" || pc.Sandbox == "" || !within(repoDir, pc.Sandbox) {
		return refuse("the repository must be inside the sandbox")
	}
	for _, v := range []struct{ name, val string }{{"remote", in.Remote}, {"branch", in.Branch}, {"remote_branch", in.RemoteBranch}} {
		if strings.HasPrefix(v.val, "-") {
			return refuse("%s may not start with '-'", v.name)
		}
	}
	var urlRemote *GitRemote
	name := in.Remote
	if name != "" && !gitref.IsRemoteName(name) {
		u, err := ParseGitRemoteURL(name)
		if err != nil {
			return refuse("%v", err)
		}
		urlRemote, name = &u, ""
	}
	var res RemoteResolution
	var err error
	if urlRemote != nil {
		res, err = pc.Resolver.Inspect(ctx, repoDir, pc.Sandbox)
	} else {
		res, err = pc.Resolver.Resolve(ctx, repoDir, pc.Sandbox, name, true)
	}
	if err != nil {
		return refuse("%v", err)
	}
	plan := PushPlan{Remote: res.Remote, URLs: res.URLs, CurrentBranch: res.Branch, Tags: in.Tags, SetUpstream: in.SetUpstream}
	if urlRemote != nil {
		plan.Remote, plan.URLs = "", []GitRemote{*urlRemote}
	} else if res.Mirror {
		return refuse("remote %q is configured as a mirror", res.Remote)
	}

	specs, err := pushSpecs(in, res, urlRemote != nil)
	if err != nil {
		return refuse("%v", err)
	}
	for _, s := range specs {
		r, err := ParsePushRefspec(s, res.Branch)
		if err != nil {
			return refuse("%v", err)
		}
		switch {
		case r.Force:
			return refuse("force push (%s) is not allowed", gitref.Quote(s))
		case r.Delete:
			return refuse("deleting a remote ref (%s) is not allowed", gitref.Quote(s))
		}
		for _, c := range r.Candidates {
			for i, p := range pc.protected {
				if p.matchesRef(c) {
					return refuse("pushing to protected branch %q is not allowed", pc.ProtectedBranches[i])
				}
			}
		}
		plan.Refspecs = append(plan.Refspecs, r)
	}
	return plan, nil
}

// pushSpecs turns branch, remote_branch and refspecs into refspecs. With
// none of them, the remote's configured push refspecs apply (only for a
// named remote), otherwise the current branch to the same name.
func pushSpecs(in PushInput, res RemoteResolution, urlGiven bool) ([]string, error) {
	var specs []string
	switch {
	case in.Branch != "" && in.RemoteBranch != "":
		if strings.Contains(in.Branch, ":") {
			return nil, errors.New("branch names a destination and remote_branch names another")
		}
		specs = append(specs, in.Branch+":"+in.RemoteBranch)
	case in.Branch != "":
		specs = append(specs, in.Branch)
	case in.RemoteBranch != "":
		if res.Branch == "" {
			return nil, errors.New("HEAD is not on a branch")
		}
		specs = append(specs, "refs/heads/"+res.Branch+":"+in.RemoteBranch)
	}
	specs = append(specs, in.Refspecs...)
	if len(specs) > 0 {
		return specs, nil
	}
	if !urlGiven && len(res.PushRefspecs) > 0 {
		return res.PushRefspecs, nil
	}
	if res.Branch == "" {
		return nil, errors.New("no branch named and HEAD is not on a branch")
	}
	return []string{"refs/heads/" + res.Branch}, nil
}

// Equal reports whether two plans push the same refs to the same URLs. The
// git server re-plans when it executes and refuses when its plan differs
// from the one the policy checked (the repository may have changed in
// between).
func (p PushPlan) Equal(q PushPlan) bool {
	if len(p.URLs) != len(q.URLs) || len(p.Refspecs) != len(q.Refspecs) || p.Tags != q.Tags {
		return false
	}
	for i := range p.URLs {
		if p.URLs[i].URL() != q.URLs[i].URL() {
			return false
		}
	}
	for i := range p.Refspecs {
		a, b := p.Refspecs[i], q.Refspecs[i]
		if a.Src != b.Src || a.Dst != b.Dst || a.Force != b.Force || a.Delete != b.Delete {
			return false
		}
	}
	return true
}

type pushPlanKey struct{}

// WithPushPlan returns a context carrying the plan the policy checked, for
// the server that executes the push.
func WithPushPlan(ctx context.Context, p *PushPlan) context.Context {
	return context.WithValue(ctx, pushPlanKey{}, p)
}

// PushPlanFromContext returns the plan stored by WithPushPlan.
func PushPlanFromContext(ctx context.Context) (*PushPlan, bool) {
	p, ok := ctx.Value(pushPlanKey{}).(*PushPlan)
	return p, ok && p != nil
}
