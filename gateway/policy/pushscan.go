package policy

import (
	"context"
	"fmt"

	"ironcurtain.dev/gateway/secretscan"
)

// A PushInspector reads what a planned push made with the git tool would
// send and scans it for secrets, before the decision: the git server
// stages the push's objects in its gateway-private mirror and scans the
// commits and blobs they add beyond what the upstream already has
// (internal/gitscan). Its findings join the call's one decision as
// RuleSecretEgress (SecretScan.PushInspector; nil: such pushes are not
// scanned).
type PushInspector interface {
	// InspectPush scans with det (the engine's detector, exact gateway
	// secrets included) what plan would push from the repository repoDir.
	InspectPush(ctx context.Context, det *secretscan.Detector, repoDir string, in PushInput, plan PushPlan) (PushInspection, error)
}

// PushInspection is what an inspection found and what it read.
type PushInspection struct {
	// Hits are the secrets found (gitscan's locations: "file a/b.env
	// (blob 1a2b…)", "commit 1a2b… (message or author)").
	Hits []secretscan.Hit
	// Objects are the objects the push will send, by destination ref
	// ("refs/heads/x", "refs/tags/v1"), as inspected: the git server pushes
	// exactly these, or refuses (PushPlan.Inspected).
	Objects map[string]string
}

// PushedObjectsKey is the key of the policy's arguments (Evaluation.Policy)
// under which an inspected push lists the objects it sends, by destination
// ref: the record says what was pushed, and an escalation's exact call
// (what an identical retry may reuse) covers these commits and no others.
const PushedObjectsKey = "pushed_objects"

// inspectPush asks the inspector about a git tool push the rest of the
// evaluation did not deny, and merges its findings into the secret
// decision (sd, secret: the arguments' findings). An inspection that fails
// denies: what was not scanned must not leave.
func (c *call) inspectPush(ev *Evaluation, sd Decision, secret bool) (Decision, bool) {
	insp := c.e.settings.Secrets.PushInspector
	det := c.e.secrets.Detector()
	if insp == nil || c.push == nil || c.isWirePush() || ev.Decision.Status == Deny || det == nil {
		return sd, secret
	}
	in, err := ParsePushArgs(c.req.Args)
	if err != nil {
		return Decision{Status: Deny, Rule: RuleGitPush, Reason: err.Error()}, true
	}
	repo, err := c.repoPath()
	if err != nil {
		return Decision{Status: Deny, Rule: RuleGitPush, Reason: "push refused: " + err.Error()}, true
	}
	res, err := insp.InspectPush(c.ctx, det, repo, in, *c.push)
	if err != nil {
		return Decision{Status: Deny, Rule: RuleSecretEgress, Reason: "the push could not be scanned for secrets",
			Detail: fmt.Sprintf("inspecting the push: %v", err)}, true
	}
	c.push.Inspected = res.Objects
	pol := make(map[string]any, len(ev.Policy)+1)
	for k, v := range ev.Policy {
		pol[k] = v
	}
	objs := make(map[string]any, len(res.Objects))
	for ref, oid := range res.Objects {
		objs[ref] = oid
	}
	pol[PushedObjectsKey] = objs
	ev.Policy = pol
	d, found := c.e.secrets.Decide("", res.Hits)
	return mergeSecrets(sd, secret, d, found)
}

// mergeSecrets combines two secret decisions of one call: findings are
// joined, a denial by setting wins, and a refusal to scan at all (a Deny
// without findings) stands as it is.
func mergeSecrets(sd Decision, secret bool, d Decision, found bool) (Decision, bool) {
	switch {
	case !found:
		return sd, secret
	case !secret:
		return d, true
	case sd.Status == Deny && len(sd.Secrets) == 0:
		return sd, true
	}
	sd.Secrets = dedupeFindings(append(sd.Secrets, d.Secrets...))
	if d.Status == Deny {
		sd.Status = Deny
	}
	sd.Reason = secretReason(sd)
	return sd, true
}
