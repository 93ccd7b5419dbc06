package policy

import "ironcurtain.dev/gateway/secretscan"

// DoorContent is what a door sends beside a call's arguments (the GitHub
// relay: a request body's texts, which are not tool arguments and are
// recorded by length only). The door scans it and digests it; Evaluate
// decides the findings with the call's own (Request.Door).
type DoorContent struct {
	// Digest is the SHA-256 (hex) of the content, "" when there is none.
	// Evaluate puts it in the policy's arguments under DoorContentKey: the
	// record names the content, and an escalation's exact call (what an
	// identical retry may reuse after a restart) covers that content only,
	// not another body with the same arguments.
	Digest string
	// Subject prefixes every location of Secrets ("request body").
	Subject string
	// Secrets are the door's findings in the content. Evaluate decides them
	// with the call's own findings, as RuleSecretEgress: one decision, one
	// escalation.
	Secrets []secretscan.Hit
}

// DoorContentKey is the key of the policy's arguments (Evaluation.Policy)
// under which a door's content digest is recorded (DoorContent.Digest).
const DoorContentKey = "door_content_sha256"

// withDoorSecrets merges the door's findings (DoorContent.Secrets) into the
// secret decision of the call's arguments.
func (c *call) withDoorSecrets(sd Decision, secret bool) (Decision, bool) {
	door := c.req.Door
	if len(door.Secrets) == 0 {
		return sd, secret
	}
	d, found := c.e.secrets.Decide(door.Subject, door.Secrets)
	return mergeSecrets(sd, secret, d, found)
}

// bindDoorContent adds the door's content digest to the policy's arguments.
func (c *call) bindDoorContent(ev *Evaluation) {
	digest := c.req.Door.Digest
	if digest == "" {
		return
	}
	pol := make(map[string]any, len(ev.Policy)+1)
	for k, v := range ev.Policy {
		pol[k] = v
	}
	pol[DoorContentKey] = digest
	ev.Policy = pol
}
