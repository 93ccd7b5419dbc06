package policy

import (
	"errors"
	"fmt"
	"strings"
)

// checkGit applies the git invariants: the push hardening (force, deletion,
// protected branches, mirror, every push URL resolved) and the resolution
// of named and default remotes for the other network tools.
func (c *call) checkGit() (Evaluation, bool) {
	if IsPushTool(c.req.Server, c.req.Tool) {
		return c.checkPush()
	}
	if c.req.Server != "git" {
		for i := range c.vals {
			if len(c.vals[i].named) > 0 {
				return c.deny(RuleGitRemote, "a named git remote can only be resolved by the git server", "")
			}
		}
		return Evaluation{}, false
	}
	network := isNetworkGitTool(c.req.Tool)
	for i := range c.vals {
		if c.rr.first[i] != RoleGitRemoteURL {
			continue
		}
		v := &c.vals[i]
		names := v.named
		if len(v.canon) == 0 && len(names) == 0 {
			if !network {
				continue
			}
			names = []string{""} // the default remote
		}
		if len(names) == 0 {
			continue
		}
		repo, err := c.repoPath()
		if err != nil {
			return c.deny(RuleGitRemote, "cannot resolve the git remote: "+err.Error(), "")
		}
		for _, n := range names {
			res, err := c.e.remotes.Resolve(c.ctx, repo, c.e.canon.sandbox, n, false)
			if err != nil {
				return c.deny(RuleGitRemote, gitReason(err), err.Error())
			}
			for _, u := range res.URLs {
				v.canon = append(v.canon, u.URL())
				v.domains = append(v.domains, u.domain())
			}
			c.remotesResolved = true
		}
		c.setPolicyValue(c.t.ann.Args[i].Name, v.canon)
	}
	return Evaluation{}, false
}

// isNetworkGitTool reports the git tools that talk to a remote when none is
// named: push, fetch and pull (with or without a git_ prefix).
func isNetworkGitTool(tool string) bool {
	switch strings.TrimPrefix(tool, "git_") {
	case "push", "fetch", "pull":
		return true
	}
	return false
}

func (c *call) checkPush() (Evaluation, bool) {
	if c.isWirePush() {
		// EvaluateWirePush applied the invariants to the classified updates;
		// the remote is the URL argument, judged like any other.
		return Evaluation{}, false
	}
	in, err := ParsePushArgs(c.req.Args)
	if err != nil {
		return c.deny(RuleGitPush, err.Error(), "")
	}
	repo, err := c.repoPath()
	if err != nil {
		return c.deny(RuleGitPush, "push refused: "+err.Error(), "")
	}
	remoteArg := -1
	for i := range c.t.ann.Args {
		if c.rr.perArg[i].has(RoleGitRemoteURL) {
			remoteArg = i
			break
		}
	}
	if remoteArg < 0 {
		return c.deny(RuleGitPush, "push refused: the tool's annotation has no git-remote-url argument", "")
	}
	plan, err := c.e.push.Check(c.ctx, repo, in)
	if err != nil {
		return c.deny(RuleGitPush, gitReason(err), err.Error())
	}
	c.push = &plan
	v := &c.vals[remoteArg]
	v.canon, v.domains, v.named = v.canon[:0], v.domains[:0], nil
	c.remotesResolved = true
	for _, u := range plan.URLs {
		v.canon = append(v.canon, u.URL())
		v.domains = append(v.domains, u.domain())
	}
	c.setPolicyValue(c.t.ann.Args[remoteArg].Name, v.canon)
	return Evaluation{}, false
}

// gitReason shortens a resolution error for the agent: git's own stderr
// stays in the audit detail.
func gitReason(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "git remote: exit status"); i >= 0 {
		msg = msg[:i] + "git could not resolve the remote"
	}
	if i := strings.Index(msg, "git config: exit status"); i >= 0 {
		msg = msg[:i] + "git could not read the repository config"
	}
	return msg
}

// repoPath returns the canonical repository directory of a git call: the
// realpath of its "path" argument, which must lie inside the sandbox.
func (c *call) repoPath() (string, error) {
	raw, ok := c.req.Args["path"].(string)
	if !ok || raw == "" {
		return "", errors.New("the repository path is missing")
	}
	p, err := c.canonicalPath(raw)
	if err != nil {
		return "", fmt.Errorf("the repository path is invalid: %s", safePathErr(err))
	}
	if c.e.canon.sandbox == "" || !within(p, c.e.canon.sandbox) {
		return "", errors.New("the repository must be inside the sandbox")
	}
	return p, nil
}

func (c *call) setPolicyValue(name string, urls []string) {
	if c.policy == nil {
		c.policy = map[string]any{}
	}
	if len(urls) == 1 {
		c.policy[name] = urls[0]
		return
	}
	arr := make([]any, len(urls))
	for i, u := range urls {
		arr[i] = u
	}
	c.policy[name] = arr
}
