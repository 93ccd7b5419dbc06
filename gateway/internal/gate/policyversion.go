package gate

import "ironcurtain.dev/gateway/policy"

// Snapshotter is a Policy that can be replaced while the gateway runs (hot
// reload, livepolicy.Policy). The hub takes one snapshot per call and
// decides and records the whole call with it, so a call in flight finishes
// under the policy it started with.
type Snapshotter interface {
	Snapshot() *policy.Engine
}

// Versioner names the version of a policy (policy.Engine.Version), which
// every decision record carries.
type Versioner interface {
	Version() string
}

// snapshot returns the policy one call is decided with.
func (g *Gate) snapshot() Policy {
	if s, ok := g.policy.(Snapshotter); ok {
		if e := s.Snapshot(); e != nil {
			return e
		}
	}
	return g.policy
}

// policyVersion returns p's version, "" when p cannot tell.
func policyVersion(p Policy) string {
	if v, ok := p.(Versioner); ok {
		return v.Version()
	}
	return ""
}
