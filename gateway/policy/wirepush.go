package policy

import (
	"context"
	"fmt"
	"strings"

	"ironcurtain.dev/gateway/secretscan"
)

// WirePush is a push received over git's smart HTTP protocol (the gateway's
// git door): the upstream repository and every ref update, classified from
// the objects (RefUpdate.Kind), never from what the client claimed.
type WirePush struct {
	// URL is the upstream repository, https://host/owner/repo.git.
	URL string
	// Updates are the ref updates of the push, in the client's order.
	Updates []RefUpdate
	// Secrets are what the push adds that looks like a secret (the door
	// scans the commits, tags and blobs it adds): they make the push's
	// decision RuleSecretEgress (escalate, or deny per detector).
	Secrets []secretscan.Hit
}

// EvaluateWirePush decides a push received over the wire. It is one
// decision for the whole push, made with the same engine and invariants as
// the git push tool: the push invariants (PushChecker.CheckUpdates: force
// in any form, tag moves, deletion, protected branches in any spelling,
// ref names) deny first; then the call is evaluated as git/push to URL (URL
// role, domain gate, compiled rules, shadow). Secrets found in what the
// push adds make it RuleSecretEgress: a denial by setting stands first; an
// escalation replaces an allow and names any other escalation's reason, so
// one human approval covers both. Evaluation.Policy lists every
// ref update for the audit record; Evaluation.Push is nil (there is no
// workspace plan: the door pushes exactly the updates judged here).
func (e *Engine) EvaluateWirePush(ctx context.Context, w WirePush) Evaluation {
	record := map[string]any{"remote": w.URL, "ref_updates": updatesRecord(w.Updates), "door": "git-http"}
	if len(w.Updates) == 0 {
		return Evaluation{Decision: Decision{Status: Deny, Rule: RuleGitPush, Reason: "the push holds no ref update"}, Policy: record}
	}
	if refused := e.push.CheckUpdates(w.Updates); len(refused) > 0 {
		var detail []string
		for _, r := range refused {
			detail = append(detail, r.Ref+": "+r.Reason)
		}
		return Evaluation{Decision: Decision{Status: Deny, Rule: RuleGitPush, Reason: "push refused: " + refused[0].Reason,
			Detail: strings.Join(detail, "; ")}, Policy: record}
	}
	sd, secret := e.secrets.Decide("", w.Secrets)
	if secret {
		record["secrets"] = sd.Secrets
		if sd.Status == Deny {
			return Evaluation{Decision: sd, Policy: record}
		}
	}
	remote, err := ParseGitRemoteURL(w.URL)
	if err != nil {
		return Evaluation{Decision: Decision{Status: Deny, Rule: RuleInvalidArgument, Reason: fmt.Sprintf("push refused: %v", err)}, Policy: record}
	}
	record["remote"] = remote.URL()
	req := Request{Server: "git", Tool: "push", Args: map[string]any{"remote": remote.URL()}, wire: true}
	if e.canon.sandbox != "" {
		// The push reads nothing of the agent's: its "repository" is the
		// gateway's mirror. The sandbox stands in for it so that the path
		// role resolves by containment (an absent path would reach the
		// path rules as a value-less role).
		req.Args["path"] = e.canon.sandbox
	}
	var ev Evaluation
	if e.trusted[req.Server] {
		// evaluateTrusted plans a workspace push; the invariants above are
		// what it would apply to a wire push.
		ev = Evaluation{Decision: Decision{Status: Allow, Rule: RuleTrustedServer, Reason: fmt.Sprintf("Server %q is trusted", req.Server)}}
	} else {
		ev = e.Evaluate(ctx, req)
	}
	ev.Push = nil
	ev.Transport = req.Args
	ev.Policy = record
	if secret {
		ev = withSecrets(ev, sd)
	}
	return ev
}

// isWirePush reports whether the call is a wire push being evaluated by
// EvaluateWirePush (its invariants are already applied; there is no
// workspace to plan from).
func (c *call) isWirePush() bool { return c.req.wire }

func updatesRecord(us []RefUpdate) []any {
	out := make([]any, len(us))
	for i, u := range us {
		out[i] = map[string]any{"ref": u.Ref, "kind": u.Kind.String(), "old": u.Old, "new": u.New}
	}
	return out
}

// GitDoorAllowed reports whether the git door may serve url: it must be an
// https git remote whose domain is in the git server's allowlist
// (servers.git.allowed_domains). With no allowlist nothing is allowed.
func (e *Engine) GitDoorAllowed(url string) (GitRemote, bool) {
	r, err := ParseGitRemoteURL(url)
	if err != nil || r.Scheme != "https" {
		return GitRemote{}, false
	}
	allow, ok := e.allow["git"]
	if !ok || allow.len() == 0 {
		return r, false
	}
	return r, allow.match(r.domain())
}
