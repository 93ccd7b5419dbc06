package policy_test

import (
	"time"

	"ironcurtain.dev/gateway/gitremote"
	"ironcurtain.dev/gateway/policy"
)

func init() {
	policy.TestResolver = func(c policy.TestResolverConfig) policy.RemoteResolver {
		o := gitremote.Options{NoCache: c.Cold, NoNative: c.ViaGit}
		if c.Aged {
			o.Now = func() time.Time { return time.Now().Add(time.Hour) }
		}
		return gitremote.New(o)
	}
	policy.TestResolverStats = func(r policy.RemoteResolver) (int64, int64) {
		s := r.(*gitremote.Resolver).Stats()
		return s.Lstats, s.Fallback
	}
}
