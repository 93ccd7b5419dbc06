package pipeline

import (
	"context"
	"testing"

	"ironcurtain.dev/compiler/internal/fakemodel"
	"ironcurtain.dev/compiler/internal/testenv"
)

// BenchmarkCompileFromCache is a full compile-policy of the fixture whose
// every model step is answered from the cache: the pipeline's own cost
// (prompts, validation, invariants, engine runs, merge and re-parse).
func BenchmarkCompileFromCache(b *testing.B) {
	cacheDir := b.TempDir()
	srv := fakemodel.New(loadScript(b).Respond)
	defer srv.Close()
	if _, err := Run(context.Background(), testenv.Runner(b, srv, testenv.RunnerOptions{CacheDir: cacheDir}), goldenConfig(b)); err != nil {
		b.Fatal(err)
	}
	refuse := fakemodel.New(func(fakemodel.Request) fakemodel.Answer { return fakemodel.Answer{Status: 599} })
	defer refuse.Close()
	r := testenv.Runner(b, refuse, testenv.RunnerOptions{CacheDir: cacheDir})
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := Run(context.Background(), r, goldenConfig(b))
		if err != nil || !res.Verified {
			b.Fatalf("verified %v, err %v", res != nil && res.Verified, err)
		}
	}
	if refuse.Calls() != 0 {
		b.Fatalf("%d model calls", refuse.Calls())
	}
}
