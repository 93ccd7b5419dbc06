package pipeline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/compiler/artifact"
	"ironcurtain.dev/compiler/internal/fakemodel"
	"ironcurtain.dev/compiler/internal/testenv"
)

func refuseAll(fakemodel.Request) fakemodel.Answer { return fakemodel.Answer{Status: 599} }

func writeAll(t *testing.T, res *Result) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	if err := res.Write(dir); err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, n := range []string{artifact.CompiledPolicyFile, artifact.DynamicListsFile, artifact.ScenariosFile} {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = b
	}
	return out
}

// TestSecondRunMakesNoModelCalls runs the recorded compile twice with one
// cache: the second run is answered entirely from the cache (a server that
// refuses every request sees none) and writes byte-identical artifacts. Any
// change of the input is a cache miss.
func TestSecondRunMakesNoModelCalls(t *testing.T) {
	cacheDir := t.TempDir()
	ctx := context.Background()

	first := fakemodel.New(loadScript(t).Respond)
	defer first.Close()
	res1, err := Run(ctx, testenv.Runner(t, first, testenv.RunnerOptions{CacheDir: cacheDir}), goldenConfig(t))
	if err != nil || !res1.Verified {
		t.Fatalf("first run: verified %v, err %v", res1 != nil && res1.Verified, err)
	}
	if first.Calls() != goldenCalls {
		t.Fatalf("first run made %d calls, want %d", first.Calls(), goldenCalls)
	}

	second := fakemodel.New(refuseAll)
	defer second.Close()
	var log bytes.Buffer
	r2 := testenv.Runner(t, second, testenv.RunnerOptions{CacheDir: cacheDir, Log: &log})
	res2, err := Run(ctx, r2, goldenConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if second.Calls() != 0 {
		t.Fatalf("second run made %d model calls, want 0", second.Calls())
	}
	if !res2.Verified {
		t.Fatal("second run is not verified")
	}
	if st := r2.Stats(); st.ModelCalls != 0 || st.CacheHits != goldenCalls-1 {
		t.Errorf("stats = %+v, want 0 calls and %d cache hits (every step but the retried one)", st, goldenCalls-1)
	}
	if hits := strings.Count(log.String(), `"cache":"hit"`); hits != goldenCalls-1 {
		t.Errorf("interaction log records %d cache hits, want %d", hits, goldenCalls-1)
	}
	a, b := writeAll(t, res1), writeAll(t, res2)
	for name := range a {
		if !bytes.Equal(a[name], b[name]) {
			t.Errorf("%s differs between the runs", name)
		}
	}

	// A changed constitution changes every prompt: the model is asked again.
	third := fakemodel.New(refuseAll)
	defer third.Close()
	cfg := goldenConfig(t)
	cfg.Constitution += "\n5. Be careful.\n"
	if _, err := Run(ctx, testenv.Runner(t, third, testenv.RunnerOptions{CacheDir: cacheDir}), cfg); err != nil {
		t.Fatal(err)
	}
	if third.Calls() == 0 {
		t.Error("a changed constitution was answered from the cache")
	}
}
