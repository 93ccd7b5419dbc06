package scenarios_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"ironcurtain.dev/compiler/internal/testenv"
	"ironcurtain.dev/compiler/scenarios"
	"ironcurtain.dev/compiler/verify"
	"ironcurtain.dev/gateway/policy"
)

// BenchmarkEvaluatorRun runs the golden scenarios (invariants, handwritten,
// generated) against the golden policy: the inner loop of verification,
// repeated after every repair.
func BenchmarkEvaluatorRun(b *testing.B) {
	dir := filepath.Join(testenv.Dir(), "golden", "want")
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			b.Fatal(err)
		}
		return data
	}
	pol, err := policy.ParseCompiledPolicy("p", read("compiled-policy.json"))
	if err != nil {
		b.Fatal(err)
	}
	lists, err := policy.ParseDynamicLists("l", read("dynamic-lists.json"))
	if err != nil {
		b.Fatal(err)
	}
	file, err := scenarios.Parse("s", read("test-scenarios.json"))
	if err != nil {
		b.Fatal(err)
	}
	// Git pushes spawn git to resolve the repository; keep them out so the
	// benchmark measures the compiler's side.
	var list []scenarios.Scenario
	for _, s := range file.Scenarios {
		if s.Request.ToolName != "push" {
			list = append(list, s)
		}
	}
	v, err := verify.NewVerifier(context.Background(), testenv.Settings())
	if err != nil {
		b.Fatal(err)
	}
	defer v.Close()
	e, err := v.Engine(pol, lists, testenv.Annotations(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, r := range v.Run(ctx, e, list) {
			if !r.Pass {
				b.Fatalf("%s fails", r.Scenario.Description)
			}
		}
	}
	b.ReportMetric(float64(len(list)), "scenarios/op")
}

func BenchmarkMerge(b *testing.B) {
	var list []scenarios.Scenario
	for i := range 300 {
		list = append(list, scenarios.Scenario{Description: "s", Source: scenarios.Generated,
			Request: scenarios.Request{ServerName: "fs", ToolName: "read", Arguments: map[string]any{"path": "/w/" + string(rune('a'+i%26)), "n": float64(i)}}})
	}
	b.ReportAllocs()
	for b.Loop() {
		if got := scenarios.Merge(nil, list...); len(got) != 300 {
			b.Fatal(len(got))
		}
	}
}
