// Package testenv sets up the compiler's tests: the fixture constitution and
// annotations, fixed verification settings and clock, and a structured
// runner talking to a fake model server through a real provider SDK.
package testenv

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"ironcurtain.dev/compiler/cache"
	"ironcurtain.dev/compiler/internal/fakemodel"
	"ironcurtain.dev/compiler/model"
	"ironcurtain.dev/compiler/structured"
	"ironcurtain.dev/gateway/policy"
)

// Clock is the fixed time of every test run.
var Clock = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// Now returns Clock.
func Now() time.Time { return Clock }

// Dir is the module's testdata directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata")
}

// Settings are the verification settings of the fixture.
func Settings() policy.Settings {
	return policy.Settings{
		Sandbox:          "/workspace",
		Home:             "/home/agent",
		DomainAllowlists: map[string][]string{"git": {"github.com", "*.github.com"}},
	}
}

// Constitution returns the fixture constitution.
func Constitution(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(), "fixture", "constitution.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Annotations returns the fixture annotations.
func Annotations(t testing.TB) *policy.Annotations {
	t.Helper()
	path := filepath.Join(Dir(), "fixture", "tool-annotations.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := policy.ParseAnnotations(path, b)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// RunnerOptions tune Runner.
type RunnerOptions struct {
	Provider    model.Provider // default Anthropic
	CacheDir    string         // "" : no cache
	Concurrency int            // default 8
	Log         io.Writer      // default discard
}

// Runner returns a runner whose model is srv reached through the real SDK
// of the chosen provider.
func Runner(t testing.TB, srv *fakemodel.Server, o RunnerOptions) *structured.Runner {
	t.Helper()
	if o.Provider == "" {
		o.Provider = model.Anthropic
	}
	if o.Concurrency == 0 {
		o.Concurrency = 8
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	base := srv.AnthropicURL()
	if o.Provider == model.OpenAI {
		base = srv.OpenAIURL()
	}
	spec := model.Spec{Provider: o.Provider, Name: "fake-model"}
	m, err := model.New(model.Config{Spec: spec, BaseURL: base, APIKey: "test-key", MaxRetries: 0})
	if err != nil {
		t.Fatal(err)
	}
	var store *cache.Store
	if o.CacheDir != "" {
		if store, err = cache.Open(o.CacheDir); err != nil {
			t.Fatal(err)
		}
	}
	log := model.NewLog(o.Log, Now)
	// The cache key uses one model name for both providers: the same
	// recorded replies must give the same artifacts whichever wire carried them.
	return &structured.Runner{
		Model:     model.Limit(model.Logged(m, log, spec.String()), o.Concurrency),
		ModelName: "fake:fake-model",
		Cache:     store,
		Log:       log,
	}
}
