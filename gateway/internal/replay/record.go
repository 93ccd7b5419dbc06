package replay

import (
	"bytes"
	"encoding/json"
	"strings"

	"ironcurtain.dev/gateway/internal/audit"
)

// Record is one recorded decision (a tool_calls row, read by the audit
// trail's read model).
type Record = audit.RecordedDecision

// Reasons a record cannot be replayed faithfully (Report.NotReplayable).
const (
	SkipTruncated   = "truncated"    // a value (or the whole) was cut before storage
	SkipRedacted    = "redacted"     // a secret was masked before storage
	SkipInvalidArgs = "invalid_args" // the stored arguments are not a JSON object
	SkipGitState    = "git_state"    // the decision read a repository (push refs, a default remote)
	SkipHardLink    = "hard_link"    // refused for a hard link, which replay cannot see
	SkipGateway     = "gateway"      // decided by the gateway outside the policy (loop breaker, budget, tool pin, a door's refusal)
	SkipBadRecord   = "bad_record"   // the recorded decision is not allow, deny or escalate
	SkipDoor        = "door"         // came through the git HTTP door or the GitHub relay: the record mixes request facts into the arguments
	SkipWorkspace   = "workspace"    // a minted session's call whose own workspace is gone (judged against it, not the sandbox)
)

// doors are the values of the "door" key the git HTTP door and the GitHub
// relay add to what they record (gate.Call.Record). Such a record
// holds the arguments the policy judged merged with facts about the
// request (method, route, service, …), which cannot be told apart again.
var doors = map[string]bool{"git-http": true, "github-relay": true}

// decodeArgs returns the arguments the policy judged, or the reason they
// cannot be had: stored values may have been cut ({"$truncated": ...}),
// were never JSON ({"$invalid_json": ...}), or had secrets masked
// (audit.Redacted). Keys the agent sent beginning with "$" were stored with
// one more "$" (ArgsEscaped) and are unescaped. Nothing is guessed.
func decodeArgs(r *Record) (map[string]any, string) {
	if len(bytes.TrimSpace(r.Args)) == 0 {
		return map[string]any{}, ""
	}
	var v any
	if err := json.Unmarshal(r.Args, &v); err != nil {
		return nil, SkipInvalidArgs
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, SkipInvalidArgs
	}
	if why := scan(m, r.ArgsEscaped); why != "" {
		return nil, why
	}
	if r.ArgsEscaped {
		unescape(m)
	}
	return m, ""
}

// scan finds what makes stored arguments unfaithful: a gateway marker (a
// key with one leading "$", which only the gateway can write when keys are
// escaped) or a masked secret.
func scan(v any, escaped bool) string {
	switch x := v.(type) {
	case string:
		if strings.Contains(x, audit.Redacted) {
			return SkipRedacted
		}
	case map[string]any:
		for k, val := range x {
			if escaped && strings.HasPrefix(k, "$") && !strings.HasPrefix(k, "$$") {
				if k == audit.KeyInvalidJSON {
					return SkipInvalidArgs
				}
				return SkipTruncated
			}
			if strings.Contains(k, audit.Redacted) {
				return SkipRedacted
			}
			if why := scan(val, escaped); why != "" {
				return why
			}
		}
	case []any:
		for _, val := range x {
			if why := scan(val, escaped); why != "" {
				return why
			}
		}
	}
	return ""
}

// unescape removes the "$" the gateway added to every key the agent sent
// that began with "$", in place.
func unescape(v any) {
	switch x := v.(type) {
	case map[string]any:
		var renamed []string
		for k, val := range x {
			unescape(val)
			if strings.HasPrefix(k, "$$") {
				renamed = append(renamed, k)
			}
		}
		// Renamed after the walk: a key added while ranging may be visited
		// again ("$$$a" would lose two "$").
		for _, k := range renamed {
			val := x[k]
			delete(x, k)
			x[k[1:]] = val
		}
	case []any:
		for _, val := range x {
			unescape(val)
		}
	}
}
