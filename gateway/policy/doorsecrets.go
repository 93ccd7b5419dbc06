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
