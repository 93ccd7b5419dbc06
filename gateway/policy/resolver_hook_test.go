package policy

import "testing"

// TestResolver builds the git remote resolver the tests give engines:
// gateway/gitremote's, installed by gitremote_hook_test.go (an external
// test file: gitremote imports policy, so no file of this package may
// import it).
var TestResolver func(TestResolverConfig) RemoteResolver

// TestResolverConfig varies a TestResolver: Cold defeats its cache, ViaGit
// reads every config by running git (the fallback), Aged sees every file
// as older than the racy window (so that the cache fills at once).
type TestResolverConfig struct{ Cold, ViaGit, Aged bool }

// TestResolverStats returns a TestResolver's fingerprint lstats and the
// number of its resolutions that fell back to git.
var TestResolverStats func(RemoteResolver) (lstats, fallback int64)

// withGit is the option that gives an engine the real resolver.
func withGit(t testing.TB) Option {
	t.Helper()
	return withResolver(t, TestResolverConfig{})
}

func withResolver(t testing.TB, c TestResolverConfig) Option {
	t.Helper()
	if TestResolver == nil {
		t.Fatal("the git remote resolver is not installed (gitremote_hook_test.go)")
	}
	return WithRemoteResolver(TestResolver(c))
}
