package pipeline

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/compiler/artifact"
	"ironcurtain.dev/compiler/internal/fakemodel"
	"ironcurtain.dev/compiler/internal/testenv"
	"ironcurtain.dev/compiler/model"
	"ironcurtain.dev/compiler/scenarios"
)

var update = flag.Bool("update", false, "rewrite the golden artifacts")

func goldenConfig(t testing.TB) Config {
	return Config{
		Constitution: testenv.Constitution(t),
		Annotations:  testenv.Annotations(t),
		Settings:     testenv.Settings(),
		Repairs:      MaxRepairs,
		Now:          testenv.Now,
	}
}

func loadScript(t testing.TB) *fakemodel.Script {
	t.Helper()
	s, err := fakemodel.LoadScript(filepath.Join(testenv.Dir(), "golden", "script.json"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// goldenCalls is the number of model calls the recorded run makes: per
// server compile (filesystem twice: a malformed reply is sent back),
// scenarios and judge, the news list, and one repair of the fetch rules.
const goldenCalls = 12

// TestGolden compiles the fixture constitution against recorded replies
// (including a malformed one, a rule repair and a scenario correction) and
// compares the artifacts byte for byte with testdata/golden/want. Run with
// -update to regenerate them.
func TestGolden(t *testing.T) {
	for _, provider := range []model.Provider{model.Anthropic, model.OpenAI} {
		t.Run(string(provider), func(t *testing.T) {
			script := loadScript(t)
			srv := fakemodel.New(script.Respond)
			defer srv.Close()
			r := testenv.Runner(t, srv, testenv.RunnerOptions{Provider: provider})
			res, err := Run(context.Background(), r, goldenConfig(t))
			if err != nil {
				t.Fatal(err)
			}
			report(t, res)
			if !res.Verified {
				t.Fatal("the recorded run is not verified")
			}
			if srv.Calls() != goldenCalls {
				t.Errorf("model calls = %d, want %d", srv.Calls(), goldenCalls)
			}
			if u := script.Unused(); len(u) > 0 {
				t.Errorf("recorded replies never served: %v", u)
			}
			checkReports(t, res)
			dir := t.TempDir()
			if err := res.Write(dir); err != nil {
				t.Fatal(err)
			}
			compareGolden(t, dir, provider == model.Anthropic && *update)
		})
	}
}

func checkReports(t *testing.T, res *Result) {
	t.Helper()
	by := map[string]ServerReport{}
	for _, s := range res.Servers {
		by[s.Server] = s
	}
	if s := by["fetch"]; s.Repairs != 1 || s.Lists != 1 {
		t.Errorf("fetch: repairs %d lists %d, want 1 and 1", s.Repairs, s.Lists)
	}
	if s := by["git"]; s.Corrections != 1 || s.Repairs != 0 {
		t.Errorf("git: corrections %d repairs %d, want 1 and 0", s.Corrections, s.Repairs)
	}
	if s := by["filesystem"]; s.Probes != 1 || !s.JudgePass {
		t.Errorf("filesystem: probes %d judge pass %v, want 1 and true", s.Probes, s.JudgePass)
	}
	// The corrected scenario is written with its corrected expectation;
	// ground truth is untouched.
	for _, sc := range res.Scenarios.Scenarios {
		if sc.Description == "Push a feature branch to GitHub" && sc.ExpectedDecision != scenarios.ExpectEscalate {
			t.Errorf("correction not applied: %+v", sc)
		}
	}
}

func report(t *testing.T, res *Result) {
	t.Helper()
	for _, s := range res.Servers {
		if s.Err != nil {
			t.Errorf("%s: %v", s.Server, s.Err)
		}
		for _, f := range s.Failures {
			t.Logf("%s: FAIL %q expected %s got %s (%s)", s.Server, f.Scenario.Description, f.Scenario.ExpectedDecision, f.Decision.Status, f.Decision.Rule)
		}
		for _, d := range s.Dropped {
			t.Logf("%s: dropped %s", s.Server, d)
		}
	}
	for _, f := range scenarios.Failures(res.Final) {
		t.Logf("final FAIL [%s] %q expected %s got %s (%s)", f.Scenario.Source, f.Scenario.Description, f.Scenario.ExpectedDecision, f.Decision.Status, f.Decision.Rule)
	}
}

func compareGolden(t *testing.T, dir string, write bool) {
	t.Helper()
	want := filepath.Join(testenv.Dir(), "golden", "want")
	for _, name := range []string{artifact.CompiledPolicyFile, artifact.DynamicListsFile, artifact.ScenariosFile} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if write {
			if err := artifact.WriteBytes(filepath.Join(want, name), got); err != nil {
				t.Fatal(err)
			}
			continue
		}
		exp, err := os.ReadFile(filepath.Join(want, name))
		if err != nil {
			t.Fatalf("%v (run with -update to create the golden files)", err)
		}
		if !bytes.Equal(got, exp) {
			t.Errorf("%s differs from the golden file:\n%s", name, firstDiff(string(exp), string(got)))
		}
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return "line " + itoa(i+1) + ":\n- " + al[i] + "\n+ " + bl[i]
		}
	}
	return "lengths differ: " + itoa(len(al)) + " vs " + itoa(len(bl)) + " lines"
}

func itoa(i int) string {
	var b []byte
	if i == 0 {
		return "0"
	}
	for i > 0 {
		b = append([]byte{byte('0' + i%10)}, b...)
		i /= 10
	}
	return string(b)
}
