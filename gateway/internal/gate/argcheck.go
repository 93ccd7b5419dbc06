package gate

import (
	"context"
	"fmt"
	"sort"

	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/policy"
)

// argumentChecker is implemented by a policy that can name an argument it
// would refuse as unknown (*policy.Engine). The hub asks it before any
// other work on a call: an agent that adds a large extra argument is
// refused before the loop breaker hashes it, the policy reads it, the
// audit record encodes it (issue 24 item 12).
type argumentChecker interface {
	UnknownArgument(server, tool string, args map[string]any) (string, bool)
}

var _ argumentChecker = (*policy.Engine)(nil)

// maxUnknownRecorded bounds the unknown argument names a refusal records.
const maxUnknownRecorded = 16

// refuseUnknownArgument records and refuses a call with an argument its
// tool does not have. The record holds the known arguments and the names
// (not the values) of the unknown ones, at most maxUnknownRecorded, and
// their count.
func (c *call) refuseUnknownArgument(ctx context.Context, args map[string]any, first string, pol argumentChecker) servers.Result {
	rec := make(map[string]any, len(args))
	var unknown []string
	for k, v := range args {
		if _, bad := pol.UnknownArgument(c.e.server, c.e.tool, map[string]any{k: nil}); bad {
			unknown = append(unknown, k)
			continue
		}
		rec[k] = v
	}
	sort.Strings(unknown)
	rec["_unknown_argument_count"] = len(unknown)
	if len(unknown) > maxUnknownRecorded {
		unknown = unknown[:maxUnknownRecorded]
	}
	names := make([]string, len(unknown))
	for i, n := range unknown {
		names[i] = SafeName(n)
	}
	rec["_unknown_arguments"] = names
	c.args = marshalArgs(rec)
	c.g.metrics.Decision(c.e.server, c.e.tool, policy.Deny.String())
	d := policy.Decision{Status: policy.Deny, Rule: policy.RuleUnknownArgument,
		Reason: fmt.Sprintf("argument %q is not part of %s/%s", SafeName(first), c.e.server, c.e.tool)}
	return c.deny(ctx, c.decision(d, nil))
}
