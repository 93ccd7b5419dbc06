package policy

import (
	"context"

	"ironcurtain.dev/gateway/secretscan"
)

type doorSecretsKey struct{}

type doorSecrets struct {
	subject string
	hits    []secretscan.Hit
}

// WithDoorSecrets returns ctx carrying the secrets a door found in what a
// call sends beside its arguments (the GitHub relay: a request body's
// texts, which are not tool arguments and are recorded by length only).
// Evaluate decides them with the call's own findings, as RuleSecretEgress:
// one decision, one escalation. subject prefixes every location ("request
// body"). No hits: ctx unchanged.
func WithDoorSecrets(ctx context.Context, subject string, hits []secretscan.Hit) context.Context {
	if len(hits) == 0 {
		return ctx
	}
	return context.WithValue(ctx, doorSecretsKey{}, doorSecrets{subject: subject, hits: hits})
}

// withDoorSecrets merges the door's findings (WithDoorSecrets) into the
// secret decision of the call's arguments.
func (c *call) withDoorSecrets(sd Decision, secret bool) (Decision, bool) {
	v, ok := c.ctx.Value(doorSecretsKey{}).(doorSecrets)
	if !ok {
		return sd, secret
	}
	d, found := c.e.secrets.Decide(v.subject, v.hits)
	return mergeSecrets(sd, secret, d, found)
}

type doorContentKey struct{}

// DoorContentKey is the key of the policy's arguments (Evaluation.Policy)
// under which a door's content digest is recorded (WithDoorContent).
const DoorContentKey = "door_content_sha256"

// WithDoorContent returns ctx carrying the digest of what a door sends
// beside the call's arguments (the GitHub relay: a request body). Evaluate
// puts it in the policy's arguments: the record names the content, and an
// escalation's exact call (what an identical retry may reuse after a
// restart) covers that content only, not another body with the same
// arguments.
func WithDoorContent(ctx context.Context, digest string) context.Context {
	if digest == "" {
		return ctx
	}
	return context.WithValue(ctx, doorContentKey{}, digest)
}

// bindDoorContent adds the door's content digest to the policy's arguments.
func (c *call) bindDoorContent(ev *Evaluation) {
	digest, ok := c.ctx.Value(doorContentKey{}).(string)
	if !ok {
		return
	}
	pol := make(map[string]any, len(ev.Policy)+1)
	for k, v := range ev.Policy {
		pol[k] = v
	}
	pol[DoorContentKey] = digest
	ev.Policy = pol
}
